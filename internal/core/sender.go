package core

import (
	"context"
	"sync/atomic"

	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/internal/awserr"
	"github.com/tempqueues/tempqueues/internal/batch"
	"github.com/tempqueues/tempqueues/sqsapi"
)

// defaultMaxSends bounds the send calls in flight per queue by default.
const defaultMaxSends = 4

// Sender is the one send path of the clients. Concurrent sends to a queue
// share SendMessageBatch calls, by the policy of internal/batch (when a
// burst gathers, when a send waits for the call in flight); a lone send
// goes out at once. A send that cannot be batched (SDK options given, or
// the Sender closed) goes alone through SendMessage,
// retried as a batched entry is.
type Sender struct {
	client  sqsapi.Client
	sends   *batch.Sends
	stopped atomic.Bool
}

func newSender(client sqsapi.Client, maxInFlight int, policy batch.NewPolicy) *Sender {
	if maxInFlight <= 0 {
		maxInFlight = defaultMaxSends
	}
	return &Sender{client: client, sends: batch.NewSends(client, maxInFlight, policy)}
}

// Send sends in (its QueueUrl a real queue) for the caller's operation op,
// whose destination was queueURL (a virtual queue's URL, for one). An SQS
// error names op and queueURL, not the call that failed (often a
// SendMessageBatch the caller never made), and wraps the SDK's error.
func (s *Sender) Send(ctx context.Context, op, queueURL string, in *sqs.SendMessageInput, optFns []func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	lone := s.stopped.Load()
	out, err := batch.SendMessage(ctx, s.sends, s.client, in, optFns, lone)
	if err != nil {
		return nil, awserr.ForSend(op, queueURL, err)
	}
	return out, nil
}

// Submit queues entry for a batch call to queueURL (a real queue) and
// returns at once; done is called once with the outcome, perhaps on a
// batch call's goroutine, and must not block. Entries of one stream may
// share calls and overtake each other: a stream's sequence numbers put
// them back in order. op names the caller's operation in an SQS error.
func (s *Sender) Submit(op, queueURL string, entry types.SendMessageBatchRequestEntry, done func(error)) {
	s.sends.Submit(queueURL, entry, sendDone(op, queueURL, done))
}

// SubmitUrgent is Submit for an entry the receiver waits for, a session's
// message (batch.Coalescer.SubmitUrgent): it may start a call while
// another is in flight rather than wait for its end.
func (s *Sender) SubmitUrgent(op, queueURL string, entry types.SendMessageBatchRequestEntry, done func(error)) {
	s.sends.SubmitUrgent(queueURL, entry, sendDone(op, queueURL, done))
}

// sendDone adapts done to a batched send's outcome, naming op and
// queueURL in an SQS error.
func sendDone(op, queueURL string, done func(error)) func(types.SendMessageBatchResultEntry, error) {
	return func(_ types.SendMessageBatchResultEntry, err error) {
		if err != nil {
			err = awserr.ForSend(op, queueURL, err)
		}
		done(err)
	}
}

// Announce tells the batching policy how many sends will follow soon to each
// queue (batch.Coalescer.AnnounceAll): the callers a receive is about to
// wake, who send their next requests at once.
func (s *Sender) Announce(counts []batch.Count) { s.sends.AnnounceAll(counts) }

// close flushes the sends in flight; later sends go alone.
func (s *Sender) close(ctx context.Context) error {
	s.stopped.Store(true)
	return s.sends.Close(ctx)
}
