package virtualqueue

import (
	"context"
	"log/slog"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/observe"
)

// OrphanAction is what happens to a host message that no virtual queue of
// this client can take.
type OrphanAction int

const (
	// DeleteOrphan deletes the message from the host queue, counts it and
	// logs one line. It is what happens to orphans without an
	// OrphanHandler: late replies to requests that timed out end here.
	DeleteOrphan OrphanAction = iota
	// ReleaseOrphan makes it visible again after Options.OrphanReleaseDelay,
	// for another process sharing the host queue.
	ReleaseOrphan
	// KeepOrphan leaves it in flight; it reappears when its host visibility
	// timeout ends.
	KeepOrphan
)

// Options configure a Client. The zero value of every field selects the
// documented default.
type Options struct {
	// Logger receives operational warnings and debug records; nil means
	// slog.Default(), as docs/architecture.md#conventions says.
	Logger *slog.Logger
	// Observer, if set, is told of the host messages the client settles
	// for nobody: Dropped with Reason "orphan" (an orphan deleted), and
	// Released with Reason "orphan", "overflow" (its virtual queue's
	// buffer of 256 messages was full), "expiring" (buffered until
	// shortly before its visibility ended: a quarter of the receive
	// visibility, at most 5s), "closed" (on Close) or "fifo-stale"
	// (behind a message of its group whose visibility ended undeleted),
	// with Duration the delay before it is visible. It runs on the host
	// poller's goroutine and must not block.
	Observer observe.Observer

	// OrphanHandler, if set, decides for each orphan; by default
	// (DeleteOrphan) orphans are deleted.
	// It runs on the host poller's goroutine and must not block for long.
	// hostURL is the host queue, name the routing attribute ("" when
	// absent).
	OrphanHandler func(ctx context.Context, hostURL, name string, msg types.Message) OrphanAction
	// OrphanReleaseDelay is the visibility timeout given to released orphans
	// and to messages that found their virtual queue's buffer full; default
	// 5s.
	OrphanReleaseDelay time.Duration

	// PollWaitTime is the long-poll wait of host pollers; default 20s (the SQS
	// maximum).
	PollWaitTime time.Duration
	// MaxPollers bounds the concurrent receives per host queue. The number of
	// pollers follows demand, one per 10 waiting receivers up to 4, and
	// past that the pace of the messages (enough to keep up with them at
	// the measured call latency, plus one parked while traffic is sparse).
	// Default 16.
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
	// receive retried by the SDK).
	ReceiveVisibilityTimeout time.Duration

	// MaxVirtualQueues bounds the virtual queues of the client; 0 means no
	// limit.
	MaxVirtualQueues int
}
