package lambdatempq

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/responder"
	"github.com/tempqueues/tempqueues/sqsapi"
)

// Options configure a Responder. Zero values mean the documented
// defaults.
type Options struct {
	// Responder configures the responder.Responder the requests go
	// through: Store, StoreTTL, InProgressDelay, Middleware, Observer,
	// Retry, BackoffBase, BackoffCap, HandlerTimeout, Logger, AllowReplyTo (where replies may go: by default only to
	// requesters' host queues next to the request queue), and
	// VisibilityTimeout, which here is only the length of a Store lease:
	// keep it at least the function's timeout. The options of Serve's loop
	// (pollers, long polls, visibility extensions, MaxConcurrency) do not
	// apply: the event source mapping receives, and the function's timeout
	// bounds a batch.
	Responder []func(*responder.Options)
	// MaxConcurrency is how many records of one event are handled at
	// once. Default 10. Records from a FIFO queue are handled one at a
	// time, in order, whatever this says.
	MaxConcurrency int
	// QueueURL returns the URL of the queue an event source ARN names, for
	// the requests' QueueURL and the visibility changes of released
	// requests. Default QueueURL, the queue's URL on AWS; tests and
	// emulators set their own.
	QueueURL func(queueARN string) (string, error)
	// Logger receives the adapter's operational warnings; nil means
	// slog.Default().
	Logger *slog.Logger
}

// Client is the part of the SQS API a Responder calls: the replies'
// sends, and the visibility changes of requests released for a retry.
// *sqs.Client implements it.
type Client = sqsapi.MessageClient

// Responder answers the requests of SQS events with a responder.Handler.
type Responder struct {
	r      *responder.Responder
	client Client
	h      responder.Handler
	opts   Options
	// released counts the requests release made visible again, which
	// Stats adds to the responder's Released.
	released atomic.Int64
}

// NewResponder returns a Responder that answers requests with h and sends
// replies through client. It validates the options (an
// *sqsapi.InvalidInputError for bad ones) and makes no call.
func NewResponder(client Client, h responder.Handler, optFns ...func(*Options)) (*Responder, error) {
	const op = "lambdatempq.NewResponder"
	var o Options
	for _, fn := range optFns {
		if fn != nil {
			fn(&o)
		}
	}
	switch {
	case h == nil:
		return nil, invalid(op, "handler", "nil handler")
	case o.MaxConcurrency < 0:
		return nil, invalid(op, "MaxConcurrency", "negative")
	case o.MaxConcurrency == 0:
		o.MaxConcurrency = 10
	}
	if o.QueueURL == nil {
		o.QueueURL = QueueURL
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	r, err := responder.New(client, o.Responder...)
	if err != nil {
		return nil, err
	}
	return &Responder{r: r, client: client, h: h, opts: o}, nil
}

// Responder returns the responder.Responder the requests go through, to
// send replies of your own. Read the counters with Stats.
func (l *Responder) Responder() *responder.Responder { return l.r }

// Stats returns the counters of the requests handled: the
// responder.Responder's Stats, with the requests this adapter released
// for a retry counted in Released, as Serve counts its own.
func (l *Responder) Stats() responder.Stats {
	st := l.r.Stats()
	st.Released += l.released.Load()
	return st
}

// HandleSQSEvent answers the requests of ev and returns the records that
// are to be retried: those whose handler failed or panicked, whose reply
// could not be sent, whose Store call failed, or which another consumer
// holds in the Store. Pass it to the aws-lambda-go runtime's Start. A
// request released by the responder's retry policy (BackoffBase not 0,
// or InProgressDelay) gets its visibility changed
// accordingly before the function returns. The error is non-nil only when
// no record can be handled (an event source ARN that names no queue).
func (l *Responder) HandleSQSEvent(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	var resp events.SQSEventResponse
	if len(ev.Records) == 0 {
		return resp, nil
	}
	results := make([]error, len(ev.Records))
	urls := make([]string, len(ev.Records))
	for i, rec := range ev.Records {
		u, err := l.opts.QueueURL(rec.EventSourceARN)
		if err != nil {
			return resp, err
		}
		urls[i] = u
	}
	run := func(i int) {
		defer func() {
			// responder.Process recovers the handler's panics; this is the
			// last line for the adapter's own.
			if p := recover(); p != nil {
				results[i] = &responder.PanicError{Value: p, Stack: debug.Stack()}
			}
		}()
		results[i] = l.r.Process(ctx, urls[i], Message(ev.Records[i]), l.h)
	}
	if isFIFO(ev.Records[0].EventSourceARN) {
		// In order; after a failure the rest of the batch is retried too,
		// so nothing overtakes the failed message of its group.
		for i := range ev.Records {
			run(i)
			if results[i] != nil {
				for j := i + 1; j < len(ev.Records); j++ {
					results[j] = errSkipped
				}
				break
			}
		}
	} else {
		sem := make(chan struct{}, l.opts.MaxConcurrency)
		var wg sync.WaitGroup
		for i := range ev.Records {
			sem <- struct{}{}
			wg.Add(1)
			go func() {
				defer func() { <-sem; wg.Done() }()
				run(i)
			}()
		}
		wg.Wait()
	}
	l.release(ctx, ev.Records, urls, results)
	for i, err := range results {
		if err != nil {
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: ev.Records[i].MessageId})
			if !errors.Is(err, errSkipped) {
				l.opts.Logger.LogAttrs(ctx, slog.LevelDebug, "lambdatempq: request left for retry",
					slog.String("message_id", ev.Records[i].MessageId), slog.Any("error", err))
			}
		}
	}
	return resp, nil
}

// errSkipped marks FIFO records after a failed one.
var errSkipped = errors.New("lambdatempq: not handled after an earlier failure in a FIFO batch")

// release changes the visibility of the requests the responder released
// for a retry after a delay, in batches of 10 per queue. A failure only
// logs: the request then reappears after its visibility timeout.
func (l *Responder) release(ctx context.Context, recs []events.SQSMessage, urls []string, results []error) {
	byQueue := map[string][]types.ChangeMessageVisibilityBatchRequestEntry{}
	var order []string
	for i, err := range results {
		var re *responder.RetryError
		if !errors.As(err, &re) || !re.Release {
			continue
		}
		u := urls[i]
		if _, ok := byQueue[u]; !ok {
			order = append(order, u)
		}
		byQueue[u] = append(byQueue[u], types.ChangeMessageVisibilityBatchRequestEntry{
			Id:                aws.String(strconv.Itoa(i)),
			ReceiptHandle:     aws.String(recs[i].ReceiptHandle),
			VisibilityTimeout: int32(min(re.Delay, maxVisibility).Round(time.Second) / time.Second),
		})
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	for _, u := range order {
		entries := byQueue[u]
		for start := 0; start < len(entries); start += maxBatch {
			chunk := entries[start:min(len(entries), start+maxBatch)]
			out, err := l.client.ChangeMessageVisibilityBatch(cctx, &sqs.ChangeMessageVisibilityBatchInput{QueueUrl: aws.String(u), Entries: chunk})
			if err == nil {
				// Counted as the responder counts its releases: once made.
				l.released.Add(int64(len(out.Successful)))
				if len(out.Failed) > 0 {
					err = fmt.Errorf("%d of %d entries failed, first: %s", len(out.Failed), len(chunk), aws.ToString(out.Failed[0].Message))
				}
			}
			if err != nil {
				l.opts.Logger.LogAttrs(ctx, slog.LevelWarn, "lambdatempq: releasing requests for retry failed; they reappear after their visibility timeout",
					slog.String("queue_url", u), slog.Any("error", err))
			}
		}
	}
}

func invalid(op, param, reason string) error {
	return &sqsapi.InvalidInputError{Op: op, Param: param, Reason: reason}
}

// SQS's limits this module works within: the longest visibility
// timeout, 12 hours (the longest delay a release can ask for), the
// entries of a batch call and the messages of a receive.
const (
	maxVisibility = 12 * time.Hour
	maxBatch      = 10
	maxReceive    = 10
)
