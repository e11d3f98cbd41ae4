package hostq

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/internal/batch"
	"github.com/tempqueues/tempqueues/internal/clock"
	"github.com/tempqueues/tempqueues/observe"
)

// OrphanAction is what happens to an orphan: a host message no route takes.
type OrphanAction int

const (
	// Delete deletes the orphan (the default).
	Delete OrphanAction = iota
	// Release makes it visible again after Options.OrphanReleaseDelay.
	Release
	// Keep leaves it in flight until its visibility timeout ends.
	Keep
)

func (v OrphanAction) String() string {
	switch v {
	case Release:
		return "release"
	case Keep:
		return "keep"
	}
	return "delete"
}

// Options configure a Host. Zero values select the defaults noted.
type Options struct {
	Logger *slog.Logger // nil discards
	// Orphan settles a message no route takes, on the poller's goroutine;
	// nil deletes every orphan. name is the routing attribute ("" when
	// absent).
	Orphan func(ctx context.Context, hostURL, name string, m types.Message) OrphanAction
	// OrphanReleaseDelay is the visibility given to released orphans and to
	// messages whose queue buffer was full; default 5s.
	OrphanReleaseDelay time.Duration
	BufferSize         int           // messages buffered per queue; default 256
	PollWaitTime       time.Duration // long-poll wait, whole seconds; default 20s
	MaxPollers         int           // concurrent receives; default 16 (wantPollersLocked)
	// Linger keeps the last poller for one more receive after one that
	// brought messages, for a host this process owns alone.
	Linger bool
	// ReceiveVisibilityTimeout, if set, is the visibility receives ask
	// for instead of the host queue's.
	ReceiveVisibilityTimeout time.Duration
	// ReleaseMargin is how long before its visibility ends a held message
	// is released; default a quarter of the receive visibility, at most 5s.
	ReleaseMargin time.Duration
	MaxBatchCalls int // concurrent delete/visibility batch calls; default 4
	// NoSystemAttributes asks receives for message attributes only: a
	// host whose messages go to callers that never read system attributes
	// (the requester's replies) saves decoding them.
	NoSystemAttributes bool
	// TraceHeader, with NoSystemAttributes, still asks for AWSTraceHeader:
	// the trace context a reply carries, when it has one.
	TraceHeader bool
	Clock       clock.Clock
	// Counters, if set, are added to by the host; several hosts may share
	// them.
	Counters *Counters
	// OnGone is called once, from a host goroutine, when the host queue is
	// found deleted (a receive failed with QueueDoesNotExist).
	OnGone func(h *Host)
	// FewerPollers leaves out the spare poller that keeps one parked for
	// sparse bursts of replies (poll.Sizer.NoSpare).
	FewerPollers bool
	// Observer, if set, is told of the messages the host settles for
	// nobody: Dropped ("orphan") and Released ("orphan", "overflow": its
	// queue's buffer was full, "expiring": held near the end of its
	// visibility, "closed", "fifo-stale": behind a message of its group
	// whose visibility ended undeleted).
	Observer observe.Observer
	// Answering, if set, is told the tags of the tagged expectations
	// (ExpectTagged) a receive answers, counted, on the poller's
	// goroutine before any of them gets its message.
	Answering func([]batch.Count)
}

// Counters count what hosts did, for their owners' Stats.
type Counters struct {
	Routed, Orphaned, Released, Expired, Overflowed atomic.Int64
	Queues                                          atomic.Int64 // live queues
}

// SetDefaults fills in the zero fields.
func (o *Options) SetDefaults() {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.OrphanReleaseDelay <= 0 {
		o.OrphanReleaseDelay = 5 * time.Second
	}
	if o.BufferSize <= 0 {
		o.BufferSize = 256
	}
	if o.PollWaitTime <= 0 || o.PollWaitTime > 20*time.Second {
		o.PollWaitTime = 20 * time.Second
	}
	// SQS waits whole seconds; a wait that rounded to 0 would short-poll in
	// a tight loop.
	o.PollWaitTime = max(o.PollWaitTime+time.Second-1, time.Second).Truncate(time.Second)
	if o.MaxPollers <= 0 {
		o.MaxPollers = 16
	}
	if o.ReceiveVisibilityTimeout > 0 {
		o.ReceiveVisibilityTimeout = min(max(o.ReceiveVisibilityTimeout.Truncate(time.Second), time.Second), 12*time.Hour)
	}
	if o.MaxBatchCalls <= 0 {
		o.MaxBatchCalls = 4
	}
	if o.Counters == nil {
		o.Counters = new(Counters)
	}
}
