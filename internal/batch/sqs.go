package batch

import (
	"context"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/internal/awserr"
	"github.com/tempqueues/tempqueues/internal/backoff"
	"github.com/tempqueues/tempqueues/internal/callbound"
	"github.com/tempqueues/tempqueues/internal/wire"
	"github.com/tempqueues/tempqueues/sqsapi"
)

// Deletes coalesces DeleteMessage calls (entries are receipt handles) into
// DeleteMessageBatch.
type Deletes = Coalescer[string, struct{}]

// Visibility is an entry of a visibility change.
type Visibility struct {
	ReceiptHandle string
	Timeout       int32 // seconds
}

// Visibilities coalesces ChangeMessageVisibility calls into
// ChangeMessageVisibilityBatch.
type Visibilities = Coalescer[Visibility, struct{}]

// Sends coalesces SendMessage calls into SendMessageBatch. Entry Ids are
// assigned by the coalescer.
type Sends = Coalescer[types.SendMessageBatchRequestEntry, types.SendMessageBatchResultEntry]

// DeleteLinger is how long the library's deletes that nobody waits for (a
// request after its reply, a reply after its caller has it) wait for
// company: at one round trip every half millisecond it turns two
// DeleteMessage calls per round trip into a fifth of one, and it is tiny
// against any visibility timeout.
const DeleteLinger = 10 * time.Millisecond

// maxDeleteLinger bounds how long a handled message may wait for its delete:
// the longer it waits, the more work a crash in between repeats.
const maxDeleteLinger = 2 * time.Second

// DeleteWithin is how long the delete of a message with left of its
// visibility timeout may wait for company (Coalescer.SubmitWithin): a tenth
// of what is left, between DeleteLinger and 2 s. One round trip at a time
// over an SQS-like 10 ms per call takes tens of milliseconds, so the 10 ms
// of DeleteLinger never shares a call; a tenth of a reply's 5 s lets ten
// share one, and the message stays hidden for nine tenths of its timeout
// after the delete is due.
func DeleteWithin(left time.Duration) time.Duration {
	return min(max(left/10, DeleteLinger), maxDeleteLinger)
}

// retryBackoff spaces the retries of failed SQS entries: from 100 ms,
// doubling to 2 s, with full jitter, so that the callers a burst throttled
// spread out and a waiting call is tried again well within its deadline.
var retryBackoff = backoff.Policy{Base: 100 * time.Millisecond, Cap: 2 * time.Second}

// retryable is the SQS coalescers' Options.Retry, and Call's: throttling,
// server faults and connection errors, by the SDK's own rules. Throttling is
// safe to retry (SQS processed none of the call or entry); a transient
// failure of a send may have got through, so a retry may duplicate it, as
// the SDK's own retry would.
//
// These calls are retried here and only here: each is made with the SDK's
// retries turned off (oneAttempt), because the SDK counts attempts while
// the library knows the caller's deadline and which entry of a batch
// failed. A retry under a retry would multiply every attempt.
func retryable(err error) bool { return awserr.IsTransient(err) }

// oneAttempt is the SDK option the coalescers and Call make their calls
// with: one attempt, whatever the client's retryer; they retry themselves.
// A client that is not an *sqs.Client ignores it.
func oneAttempt(o *sqs.Options) { o.RetryMaxAttempts = 1 }

// Call makes one SQS call that is not batched (call, which makes it with
// oneAttempt and returns its error) under the rules the coalescers apply to
// an entry a caller waits for under ctx: failures retryable accepts are
// tried again after the same backoff, until ctx ends when it has a
// deadline, at most DefaultMaxRetries times when it has none. When ctx ends
// first, the error is ctx.Err() joined with the last failure.
func Call(ctx context.Context, call func() error) error {
	_, deadline := ctx.Deadline()
	for tries := 0; ; tries++ {
		err := call()
		if err == nil || !retryable(err) || !deadline && tries >= DefaultMaxRetries {
			return err
		}
		if ctx.Err() != nil || backoff.Sleep(ctx, retryBackoff.Delay(tries)) != nil {
			return gaveUp(ctx, &err)
		}
	}
}

// The batch calls the coalescers make; *sqs.Client and sqsapi.Client
// implement them.
type deleter interface {
	DeleteMessageBatch(ctx context.Context, params *sqs.DeleteMessageBatchInput, optFns ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error)
}

type visibilityChanger interface {
	ChangeMessageVisibilityBatch(ctx context.Context, params *sqs.ChangeMessageVisibilityBatchInput, optFns ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error)
}

type sender interface {
	SendMessageBatch(ctx context.Context, params *sqs.SendMessageBatchInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error)
}

// NewDeletes returns a coalescer of deletes made through client; entries
// submitted without waiting linger for company up to linger (Options.Linger).
// Failures are retried as retryable says, as for every SQS coalescer here.
func NewDeletes(client deleter, maxInFlight int, linger time.Duration) *Deletes {
	return New(func(ctx context.Context, queueURL string, handles []string) ([]Result[struct{}], error) {
		in := &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(queueURL), Entries: make([]types.DeleteMessageBatchRequestEntry, len(handles))}
		for i, h := range handles {
			in.Entries[i] = types.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: aws.String(h)}
		}
		out, err := client.DeleteMessageBatch(ctx, in, oneAttempt)
		if err != nil {
			return nil, err
		}
		res := make([]Result[struct{}], len(handles))
		applyFailures(res, out.Failed)
		return res, nil
	}, Options[string]{MaxInFlight: maxInFlight, Linger: linger, Retry: retryable, RetryBackoff: retryBackoff})
}

// NewVisibilities returns a coalescer of visibility changes made through
// client.
func NewVisibilities(client visibilityChanger, maxInFlight int) *Visibilities {
	return New(func(ctx context.Context, queueURL string, vs []Visibility) ([]Result[struct{}], error) {
		in := &sqs.ChangeMessageVisibilityBatchInput{QueueUrl: aws.String(queueURL), Entries: make([]types.ChangeMessageVisibilityBatchRequestEntry, len(vs))}
		for i, v := range vs {
			in.Entries[i] = types.ChangeMessageVisibilityBatchRequestEntry{
				Id: aws.String(strconv.Itoa(i)), ReceiptHandle: aws.String(v.ReceiptHandle), VisibilityTimeout: v.Timeout,
			}
		}
		out, err := client.ChangeMessageVisibilityBatch(ctx, in, oneAttempt)
		if err != nil {
			return nil, err
		}
		res := make([]Result[struct{}], len(vs))
		applyFailures(res, out.Failed)
		return res, nil
	}, Options[Visibility]{MaxInFlight: maxInFlight, Retry: retryable, RetryBackoff: retryBackoff})
}

// NewSends returns a coalescer of sends made through client, whose urgent
// entries follow policy (nil: the adaptive one). Batches respect SQS's
// limit on the total payload of a SendMessageBatch call.
func NewSends(client sender, maxInFlight int, policy NewPolicy) *Sends {
	return New(func(ctx context.Context, queueURL string, es []types.SendMessageBatchRequestEntry) ([]Result[types.SendMessageBatchResultEntry], error) {
		in := &sqs.SendMessageBatchInput{QueueUrl: aws.String(queueURL), Entries: make([]types.SendMessageBatchRequestEntry, len(es))}
		for i, e := range es {
			e.Id = aws.String(strconv.Itoa(i))
			in.Entries[i] = e
		}
		out, err := client.SendMessageBatch(ctx, in, oneAttempt)
		if err != nil {
			return nil, err
		}
		res := make([]Result[types.SendMessageBatchResultEntry], len(es))
		got := make([]bool, len(es))
		for _, s := range out.Successful {
			if i, ok := entryIndex(s.Id, len(es)); ok {
				res[i].Value = s
				got[i] = true
			}
		}
		for _, f := range out.Failed {
			if i, ok := entryIndex(f.Id, len(es)); ok {
				res[i].Err = entryError(f)
				got[i] = true
			}
		}
		for i := range got {
			if !got[i] {
				res[i].Err = &awserr.BatchEntryError{Code: "MissingBatchResult", Message: "SendMessageBatch returned no result for the entry"}
			}
		}
		return res, nil
	}, Options[types.SendMessageBatchRequestEntry]{
		Policy:       policy,
		MaxInFlight:  maxInFlight,
		Retry:        retryable,
		RetryBackoff: retryBackoff,
		MaxBytes:     sqsapi.MaxMessageSize,
		Size:         packedSize,
	})
}

func applyFailures(res []Result[struct{}], failed []types.BatchResultErrorEntry) {
	for _, f := range failed {
		if i, ok := entryIndex(f.Id, len(res)); ok {
			res[i].Err = entryError(f)
		}
	}
}

func entryIndex(id *string, n int) (int, bool) {
	i, err := strconv.Atoi(aws.ToString(id))
	return i, err == nil && i >= 0 && i < n
}

func entryError(f types.BatchResultErrorEntry) error {
	return &awserr.BatchEntryError{Code: aws.ToString(f.Code), Message: aws.ToString(f.Message), SenderFault: f.SenderFault}
}

// SendMessage sends in as *sqs.Client's SendMessage does, through sends
// (concurrent sends to a queue share SendMessageBatch calls), or, when
// lone (batching disabled, or its owner closed) or with SDK options,
// alone through client, retried as the batcher retries an entry. It is the one
// send path of the requester and of virtual queues.
func SendMessage(ctx context.Context, sends *Sends, client loneSender, in *sqs.SendMessageInput, optFns []func(*sqs.Options), lone bool) (*sqs.SendMessageOutput, error) {
	if lone || len(optFns) > 0 {
		var out *sqs.SendMessageOutput
		// The caller's options come after oneAttempt: one that sets the
		// SDK's retries has them, under the library's.
		optFns = append([]func(*sqs.Options){oneAttempt}, optFns...)
		err := Call(ctx, func() (err error) {
			cctx, cancel := callbound.Context(ctx, 0)
			defer cancel()
			out, err = client.SendMessage(cctx, in, optFns...)
			return err
		})
		return out, err
	}
	res, err := sends.Do(ctx, aws.ToString(in.QueueUrl), SendEntry(in))
	if err != nil {
		return nil, err
	}
	return SendOutput(res), nil
}

type loneSender interface {
	SendMessage(ctx context.Context, params *sqs.SendMessageInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
}

// SendEntry is the batch entry for a SendMessage call (its Id is assigned by
// the coalescer).
func SendEntry(in *sqs.SendMessageInput) types.SendMessageBatchRequestEntry {
	return types.SendMessageBatchRequestEntry{
		MessageBody:             in.MessageBody,
		DelaySeconds:            in.DelaySeconds,
		MessageAttributes:       in.MessageAttributes,
		MessageSystemAttributes: in.MessageSystemAttributes,
		MessageDeduplicationId:  in.MessageDeduplicationId,
		MessageGroupId:          in.MessageGroupId,
	}
}

// SendOutput is the SendMessage output for a batch entry's result.
func SendOutput(res types.SendMessageBatchResultEntry) *sqs.SendMessageOutput {
	return &sqs.SendMessageOutput{
		MessageId:                    res.MessageId,
		MD5OfMessageBody:             res.MD5OfMessageBody,
		MD5OfMessageAttributes:       res.MD5OfMessageAttributes,
		MD5OfMessageSystemAttributes: res.MD5OfMessageSystemAttributes,
		SequenceNumber:               res.SequenceNumber,
	}
}

// packedSize is the size of an entry as a batch is packed: its
// MessageSize, with Binary attribute values counted as base64. SQS counts
// them raw, but fauxqs counts them in base64 against a batch's 1 MiB and
// refuses the call (BatchRequestTooLong); packed so, a batch of
// compressed messages (docs/wire.md, "Compression") goes on both, for a
// call more in four when they are all large and compressed: SQS bills a
// call's payload by the 64 KiB, so each such call costs at most one billed
// request more.
func packedSize(e types.SendMessageBatchRequestEntry) int {
	n := wire.MessageSize(e.MessageBody, e.MessageAttributes)
	for _, v := range e.MessageAttributes {
		n += (len(v.BinaryValue)+2)/3*4 - len(v.BinaryValue)
	}
	return n
}
