package virtualqueue

import (
	"context"
	"log/slog"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/internal/backoff"
)

// OrphanPolicy says what happens to host messages that no virtual queue of
// this client can take.
type OrphanPolicy int

const (
	// OrphanDelete deletes orphans, counts them and logs one line each. It is
	// the default: late replies to requests that timed out end here.
	OrphanDelete OrphanPolicy = iota
	// OrphanRelease makes orphans visible again after
	// Options.OrphanReleaseDelay, for another process sharing the host queue.
	OrphanRelease
	// OrphanHandle passes orphans to Options.OrphanHandler.
	OrphanHandle
)

// OrphanAction is an OrphanHandler's verdict on one orphan.
type OrphanAction int

const (
	// DeleteOrphan deletes the message from the host queue.
	DeleteOrphan OrphanAction = iota
	// ReleaseOrphan makes it visible again after Options.OrphanReleaseDelay.
	ReleaseOrphan
	// KeepOrphan leaves it in flight; it reappears when its host visibility
	// timeout ends.
	KeepOrphan
)

// Options configure a Client. The zero value of every field selects the
// documented default.
type Options struct {
	// Logger receives operational logs; nil discards them.
	Logger *slog.Logger

	// Orphans selects the orphan policy; default OrphanDelete.
	Orphans OrphanPolicy
	// OrphanHandler decides for each orphan under OrphanHandle. It runs on
	// the host poller's goroutine and must not block for long. hostURL is the
	// host queue, name the routing attribute ("" when absent).
	OrphanHandler func(ctx context.Context, hostURL, name string, msg types.Message) OrphanAction
	// OrphanReleaseDelay is the visibility timeout given to released orphans
	// and to messages that found their virtual queue's buffer full; default
	// 5s.
	OrphanReleaseDelay time.Duration

	// BufferSize bounds the messages buffered per virtual queue; default 256.
	// Messages beyond it are released to come back later.
	BufferSize int

	// PollWaitTime is the long-poll wait of host pollers; default 20s (the SQS
	// maximum).
	PollWaitTime time.Duration
	// MaxPollers bounds the concurrent receives per host queue. The number of
	// pollers follows demand: one per 10 waiting receivers. Default 4.
	MaxPollers int
	// Linger keeps the last poller of a host for one more receive after a
	// receive that brought messages, even when nobody waits. Under steady
	// request/response traffic the receive for the next reply is then on
	// its way before the next request is sent, instead of starting
	// alongside it; an idle host pays one empty long poll after its last
	// message. Set it only for host queues this client owns alone (the
	// tempqueue package does): on a shared host, a lingering receive takes
	// messages that no local queue waits for, and the orphan policy
	// applies to them.
	Linger bool
	// ReceiveVisibilityTimeout, if set (whole seconds, 1s to 12h), is the
	// visibility timeout the host pollers ask for on each receive instead of
	// the host queue's. A short one bounds how long messages stay hidden
	// when the response of a receive is lost (a dropped connection, a
	// receive retried by the SDK): the requester, whose replies are taken
	// within milliseconds, uses 5s.
	ReceiveVisibilityTimeout time.Duration
	// ReleaseMargin is how long before a buffered message's visibility
	// timeout ends it is released; default a quarter of the receive
	// visibility (ReceiveVisibilityTimeout, or the host's
	// VisibilityTimeout), at most 5s.
	ReleaseMargin time.Duration

	// DisableSendBatching sends each SendMessage to a virtual queue with its
	// own SendMessage call instead of coalescing concurrent sends to one host
	// into SendMessageBatch calls.
	DisableSendBatching bool
	// MaxBatchCalls bounds the concurrent batch calls (send, delete,
	// visibility) per host queue; default 4.
	MaxBatchCalls int

	// Backoff paces host polls after errors; the zero value starts at 100ms
	// and caps at 20s, with full jitter.
	Backoff backoff.Policy

	// MaxVirtualQueues bounds the virtual queues of the client; 0 means no
	// limit.
	MaxVirtualQueues int
}

func (o *Options) setDefaults() {
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
		o.MaxPollers = 4
	}
	if o.ReceiveVisibilityTimeout > 0 {
		o.ReceiveVisibilityTimeout = min(max(o.ReceiveVisibilityTimeout.Truncate(time.Second), time.Second), 12*time.Hour)
	}
	if o.MaxBatchCalls <= 0 {
		o.MaxBatchCalls = 4
	}
}
