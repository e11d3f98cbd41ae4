package redrive

import (
	"context"
	"log/slog"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/tempqueues/tempqueues/internal/clock"
	"github.com/tempqueues/tempqueues/internal/deflog"
	"github.com/tempqueues/tempqueues/internal/wire"
	"github.com/tempqueues/tempqueues/observe"
	"github.com/tempqueues/tempqueues/sqsapi"
)

// Client is the part of the SQS API a Redriver calls. *sqs.Client
// implements it.
type Client interface {
	sqsapi.MessageClient
	ListDeadLetterSourceQueues(ctx context.Context, params *sqs.ListDeadLetterSourceQueuesInput, optFns ...func(*sqs.Options)) (*sqs.ListDeadLetterSourceQueuesOutput, error)
}

var _ Client = (*sqs.Client)(nil)

// maxBackoffCap is the largest accepted Options.BackoffCap. A replay
// delayed beyond SQS's 900 s waits on the dead-letter queue, so keep
// BackoffCap well below the dead-letter queue's MessageRetentionPeriod too.
const maxBackoffCap = 24 * time.Hour

// The defaults of Options.
const (
	defaultBackoffBase       = time.Second
	defaultBackoffCap        = 15 * time.Minute
	defaultMaxAttempts       = 5
	defaultVisibilityTimeout = 30 * time.Second
	defaultPollWaitTime      = 20 * time.Second
	// drainWait is the long-poll wait of Drain's receives: a long poll, even
	// a short one, asks every SQS server, so an empty answer means empty.
	drainWait = time.Second
)

// Options configure a Redriver. Zero values mean the documented defaults.
type Options struct {
	// Target is the URL of the queue messages are replayed to. Default: the
	// dead-letter queue's source queue, found with
	// ListDeadLetterSourceQueues on first use; it must be exactly one
	// queue (ErrNoSource or ErrAmbiguousSource otherwise). Some emulators lack that call:
	// name the target there. A FIFO dead-letter queue needs a FIFO
	// target, a standard one a standard target.
	Target string
	// ParkingQueue is the URL of the queue that receives messages past
	// MaxAttempts, and those with no room left for the attempt attribute,
	// for a person to inspect. Required.
	ParkingQueue string

	// BackoffBase and BackoffCap shape the replay delay: replay n (1-based)
	// waits a uniformly random time in
	// [0, min(BackoffCap, BackoffBase x 2^(n-1))] (exponential backoff with
	// full jitter). Defaults 1 s and 15 min (or BackoffBase if larger);
	// BackoffCap may exceed SQS's 900 s limit on DelaySeconds, up to
	// 24 hours (see the package documentation for how). SQS delays
	// whole seconds: up to 900 s the delay is drawn uniformly from the whole
	// seconds 0 to floor(min(BackoffCap, BackoffBase x 2^(n-1))).
	BackoffBase, BackoffCap time.Duration
	// MaxAttempts is how many times a message is replayed; the next time it
	// reaches the dead-letter queue it is parked. Default 5.
	MaxAttempts int
	// RateLimit, if positive, bounds the messages handled per second: a
	// receive asks for at most that many (10 at most), and the next waits
	// until the rate allows the messages handled so far.
	RateLimit float64
	// DryRun receives the messages and reports what would be done to each,
	// sending, deleting and re-hiding nothing; the messages are made
	// visible again at the end of Drain. Only Drain accepts it.
	DryRun bool

	// VisibilityTimeout is how long a received message stays hidden while
	// it is replayed (extended while its batch's calls run); after a
	// failure it reappears that much later. Default 30 s.
	VisibilityTimeout time.Duration
	// PollWaitTime is the long-poll wait of Run's receives, 1 s to 20 s.
	// Default 20 s. Drain polls for 1 s and stops at the first empty
	// answer.
	PollWaitTime time.Duration

	// Logger receives failures at Warn and a record per action at Debug;
	// nil means slog.Default(), as docs/architecture.md#conventions says.
	Logger *slog.Logger
	// Observer, if set, is told of each message handled, in order: an
	// observe.Redriven event whose Reason is the action ("replay",
	// "schedule", "wait" or "park"; in a dry run, the action
	// that would be taken), Queue the dead-letter queue, Message the dead
	// letter, RequestID its TempQueues.RequestId, Duration the delay (the
	// DelaySeconds of a replay, the whole delay of a scheduled replay, the
	// time left for a wait), Err the action's failure, and Detail a
	// Detail. It runs on the goroutine of Drain, Run or Process, and must
	// not block.
	Observer observe.Observer

	// clock is the time of due dates and the jitter's random source; tests
	// replace it (export_test.go).
	clock clock.Clock
}

func buildOptions(dlqURL string, optFns []func(*Options)) (Options, error) {
	const op = "redrive.New"
	o := Options{}
	for _, fn := range optFns {
		if fn != nil {
			fn(&o)
		}
	}
	if o.BackoffBase == 0 {
		o.BackoffBase = defaultBackoffBase
	}
	if o.BackoffCap == 0 {
		o.BackoffCap = max(defaultBackoffCap, o.BackoffBase)
	}
	if o.MaxAttempts == 0 {
		o.MaxAttempts = defaultMaxAttempts
	}
	if o.VisibilityTimeout == 0 {
		o.VisibilityTimeout = defaultVisibilityTimeout
	}
	if o.PollWaitTime == 0 {
		o.PollWaitTime = defaultPollWaitTime
	}
	o.Logger = deflog.Or(o.Logger)
	switch {
	case dlqURL == "" || wire.IsVirtualQueueURL(dlqURL):
		return o, wire.Invalid(op, "dlqURL", "%q is not a queue URL", dlqURL)
	case o.ParkingQueue == "":
		return o, wire.Invalid(op, "ParkingQueue", "required: messages past MaxAttempts go there")
	case o.ParkingQueue == dlqURL:
		return o, wire.Invalid(op, "ParkingQueue", "must differ from the dead-letter queue")
	case wire.IsVirtualQueueURL(o.ParkingQueue):
		return o, wire.Invalid(op, "ParkingQueue", "%q is a virtual queue URL", o.ParkingQueue)
	case o.Target != "" && (o.Target == dlqURL || o.Target == o.ParkingQueue):
		return o, wire.Invalid(op, "Target", "must differ from the dead-letter and parking queues")
	case o.Target != "" && wire.IsVirtualQueueURL(o.Target):
		return o, wire.Invalid(op, "Target", "%q: virtual queues are not supported as targets", o.Target)
	case o.Target != "" && isFIFO(o.Target) != isFIFO(dlqURL):
		return o, wire.Invalid(op, "Target", "%q: a FIFO queue's dead-letter queue is FIFO, and a standard queue's standard", o.Target)
	case isFIFO(o.ParkingQueue) && !isFIFO(dlqURL):
		return o, wire.Invalid(op, "ParkingQueue", "%q is FIFO: a standard dead-letter queue's messages have no message group", o.ParkingQueue)
	case o.BackoffBase < 0 || o.BackoffCap < o.BackoffBase || o.BackoffCap > maxBackoffCap:
		return o, wire.Invalid(op, "BackoffBase/BackoffCap", "want 0 < BackoffBase <= BackoffCap <= %v, got %v and %v", maxBackoffCap, o.BackoffBase, o.BackoffCap)
	case o.MaxAttempts < 0:
		return o, wire.Invalid(op, "MaxAttempts", "%d is negative", o.MaxAttempts)
	case o.RateLimit < 0:
		return o, wire.Invalid(op, "RateLimit", "%v is negative", o.RateLimit)
	case o.VisibilityTimeout < time.Second || o.VisibilityTimeout > wire.MaxVisibilityTimeout*time.Second:
		return o, wire.Invalid(op, "VisibilityTimeout", "%v is outside [1s, 12h]", o.VisibilityTimeout)
	case o.PollWaitTime < time.Second || o.PollWaitTime > wire.MaxWaitTimeSeconds*time.Second:
		return o, wire.Invalid(op, "PollWaitTime", "%v is outside [1s, 20s]", o.PollWaitTime)
	}
	return o, nil
}

func isFIFO(queueURL string) bool { return strings.HasSuffix(queueURL, ".fifo") }
