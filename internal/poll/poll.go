// Package poll is the library's one receive loop: it calls ReceiveMessage
// on a queue again and again for the responder's pollers, the dead-letter
// replayer and the virtual-queue host poller, so that backoff after failures,
// the classification of errors, the tracking of long polls that may stay
// parked on the server, and what happens to messages received after a stop
// are written once.
//
// A Loop holds what the pollers of one queue share; each poller is one call
// of Run on a goroutine of its owner, driven by a Consumer:
//
//	l := poll.New(ctx, poll.Config{Client: c, Input: in})
//	go l.Run(consumer) // as many as the owner wants, started when it wants
//	...
//	l.Stop()  // graceful: no new receive; one in flight may finish
//	l.Abort() // at a deadline: cancel the receives in flight too
//
// Consumer.Want says how many messages the next receive asks for, or ends
// the poller: it may block (the responder waits there for free handler
// slots) or answer from a demand count (a host queue polls only while
// receivers wait). Every Want that returns n > 0 is followed by exactly one
// Consumer.Handle with Result.Asked = n, so a consumer that reserved
// capacity in Want gets it back in Handle. A poller costs one goroutine
// (the caller's) and no allocation per receive beyond the SDK call's own.
package poll

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/internal/awserr"
	"github.com/tempqueues/tempqueues/internal/backoff"
	"github.com/tempqueues/tempqueues/internal/callbound"
	"github.com/tempqueues/tempqueues/internal/clock"
	"github.com/tempqueues/tempqueues/internal/wire"
)

// StopGrace is how long a graceful stop lets a long poll in flight run
// before aborting it. A poll on a busy queue returns within it, and what it
// took is released at once; a poll still parked after it belongs to a queue
// with little traffic, and is cancelled, which the server may not notice
// until its wait ends (see ParkedUntil). It is what keeps an idle consumer's
// stop well under a second without handing arrivals to a cancelled poll on
// a busy queue.
const StopGrace = 500 * time.Millisecond

// Receiver is the call a Loop makes. *sqs.Client and sqsapi.Client
// implement it.
type Receiver interface {
	ReceiveMessage(ctx context.Context, params *sqs.ReceiveMessageInput, optFns ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
}

// Config describes the receives of a Loop.
type Config struct {
	// Client makes the receives.
	Client Receiver
	// Input is the template of every receive: QueueUrl, WaitTimeSeconds,
	// VisibilityTimeout, attribute names. Each Run copies it once and sets
	// MaxNumberOfMessages from Consumer.Want before each receive.
	Input sqs.ReceiveMessageInput
	// Backoff spaces the receives after failures: the n-th consecutive
	// failure of the loop (counted across its pollers) waits
	// Backoff.Delay(n-1). Its Rand is replaced by Clock's.
	Backoff backoff.Policy
	// Clock stamps receipts and parked polls and draws the jitter.
	Clock clock.Clock
}

// Result is the outcome of one receive, given to Consumer.Handle.
type Result struct {
	// Asked is the number Want returned for this receive.
	Asked int
	// Messages are the messages received; empty after an empty receive or a
	// failure.
	Messages []types.Message
	// At is when the receive returned (the receipt time of Messages).
	At time.Time
	// Err is the receive's error, nil on success.
	Err error
	// Transient reports that Err is throttling, a server error or a network
	// failure: worth retrying after Delay.
	Transient bool
	// Delay is the backoff the loop waits after a failed receive before
	// calling Want again, when Handle returns true.
	Delay time.Duration
	// Failures is the number of consecutive failed receives of the loop,
	// this one included (counted across its pollers); 0 after a success.
	Failures int
	// Stopped reports that the loop was stopped before the receive returned
	// (or before it was made, with no Messages and no Err). Messages must
	// then be handed back (visibility 0), not processed; the poller ends
	// whatever Handle returns.
	Stopped bool
}

// Consumer drives one poller.
type Consumer interface {
	// Want returns how many messages the next receive asks for, 1 to 10,
	// or 0 to end the poller. It may block, but must return 0 once the
	// loop's Stopping channel is closed.
	Want() int
	// Handle receives the outcome of a receive and returns false to end the
	// poller. Errors caused by the loop's stop do not count as failures.
	Handle(Result) bool
}

// Loop is the shared state of the pollers of one queue.
type Loop struct {
	cfg  Config
	wait time.Duration

	stopCtx  context.Context // done: no new receive
	stop     context.CancelFunc
	recvCtx  context.Context // done: receives in flight are cancelled
	abort    context.CancelFunc
	failures atomic.Int32 // consecutive failed receives
	// parkedUntil is the latest end (unix nanos) of the wait of a receive
	// that did not complete normally: cancelled by Abort or failed
	// client-side. The server may keep such a poll parked until then and
	// hand it messages nobody sees, hidden for a visibility timeout.
	parkedUntil atomic.Int64
}

// New returns a Loop receiving with cfg. The receives carry ctx's values;
// cancelling ctx aborts the loop (as Abort does).
func New(ctx context.Context, cfg Config) *Loop {
	cfg.Backoff.Rand = cfg.Clock.Int64N
	l := &Loop{cfg: cfg, wait: time.Duration(cfg.Input.WaitTimeSeconds) * time.Second}
	l.stopCtx, l.stop = context.WithCancel(ctx)
	l.recvCtx, l.abort = context.WithCancel(ctx)
	return l
}

// Stop ends the loop gracefully: no receive starts any more and backoff
// waits end, while receives in flight run on; what they return is handed to
// Handle with Stopped set, for release. Stop is idempotent.
func (l *Loop) Stop() { l.stop() }

// Abort stops the loop and cancels the receives in flight; they count as
// parked until their wait ends (see ParkedUntil).
func (l *Loop) Abort() {
	l.stop()
	l.abort()
}

// Stopping is closed once Stop or Abort was called or ctx was cancelled.
func (l *Loop) Stopping() <-chan struct{} { return l.stopCtx.Done() }

// Stopped reports whether Stopping is closed.
func (l *Loop) Stopped() bool { return l.stopCtx.Err() != nil }

// ParkedUntil returns the latest time until which a receive of this loop
// that did not complete normally (aborted, or failed client-side) may stay
// parked on the server; the zero time when there was none.
func (l *Loop) ParkedUntil() time.Time {
	if u := l.parkedUntil.Load(); u != 0 {
		return time.Unix(0, u)
	}
	return time.Time{}
}

// ReleaseDelay is how long a message made visible again now should stay
// hidden so that no parked receive of this loop can take it: the time left
// until ParkedUntil, in whole seconds, plus two seconds for clocks and the
// network; 0 when nothing is parked.
func (l *Loop) ReleaseDelay() time.Duration {
	u := l.parkedUntil.Load()
	if u == 0 {
		return 0
	}
	left := l.cfg.Clock.Until(time.Unix(0, u))
	if left <= 0 {
		return 0
	}
	return left.Truncate(time.Second) + 2*time.Second
}

func (l *Loop) notePark(until time.Time) {
	u := until.UnixNano()
	for {
		old := l.parkedUntil.Load()
		if old >= u || l.parkedUntil.CompareAndSwap(old, u) {
			return
		}
	}
}

// Run runs one poller until c.Want returns 0, c.Handle returns false, or
// the loop stops. Several Runs of one Loop may run at once.
func (l *Loop) Run(c Consumer) {
	in := l.cfg.Input
	bound := receiveBound{parent: l.recvCtx}
	defer bound.end()
	for {
		n := c.Want()
		if n <= 0 {
			return
		}
		if l.Stopped() {
			c.Handle(Result{Asked: n, At: l.cfg.Clock.Now(), Stopped: true})
			return
		}
		in.MaxNumberOfMessages = int32(min(n, wire.MaxReceiveMessages))
		end := l.cfg.Clock.Now().Add(l.wait)
		out, err := l.cfg.Client.ReceiveMessage(bound.start(l.wait+callbound.Timeout), &in)
		bound.stop()
		res := Result{Asked: n, At: l.cfg.Clock.Now(), Stopped: l.Stopped()}
		if err != nil {
			// The request may have reached the server, which can keep it
			// parked although this side gave up on it.
			l.notePark(end)
			res.Err = err
			if res.Stopped {
				c.Handle(res)
				return
			}
			f := l.failures.Add(1)
			res.Transient = awserr.IsTransient(err)
			res.Failures = int(f)
			res.Delay = l.cfg.Backoff.Delay(int(f) - 1)
			if !c.Handle(res) {
				return
			}
			// A stop ends the wait; the next Want then returns 0.
			_ = backoff.Sleep(l.stopCtx, res.Delay)
			continue
		}
		l.failures.Store(0)
		res.Messages = out.Messages
		if !c.Handle(res) || res.Stopped {
			return
		}
	}
}

// receiveBound cuts off a receive that outlasts its wait by
// callbound.Timeout (a hung connection), without allocating per receive:
// one context and one timer per Run, made anew only after a receive was
// cut off.
type receiveBound struct {
	parent context.Context
	ctx    context.Context
	cancel context.CancelFunc
	timer  *time.Timer
}

// start returns the context of a receive that may last d.
func (b *receiveBound) start(d time.Duration) context.Context {
	if b.ctx == nil || b.ctx.Err() != nil {
		b.end()
		b.ctx, b.cancel = context.WithCancel(b.parent)
		b.timer = time.AfterFunc(d, b.cancel)
		return b.ctx
	}
	b.timer.Reset(d)
	return b.ctx
}

// stop disarms the bound once the receive returned.
func (b *receiveBound) stop() { b.timer.Stop() }

// end releases the context and the timer.
func (b *receiveBound) end() {
	if b.cancel != nil {
		b.timer.Stop()
		b.cancel()
	}
}
