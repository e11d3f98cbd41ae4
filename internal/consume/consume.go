// Package consume is the consumer engine under responder.Serve: it
// receives from one queue with as many pollers as the pace of the messages
// needs, runs a handler per message in a bounded number of slots, extends
// the visibility of the messages being handled (heartbeat.go), and then
// deletes or releases each one as its handler decides, in batched calls.
// Its stop is graceful: no new receive, a long poll in flight gets
// poll.StopGrace, running handlers may finish until a grace period or a
// hard stop ends, and the rest are cancelled and their messages released.
//
// What a message means, and what its handler does with it, is the
// engine's user's: the responder's stages (responder/stages.go).
package consume

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/internal/backoff"
	"github.com/tempqueues/tempqueues/internal/batch"
	"github.com/tempqueues/tempqueues/internal/clock"
	"github.com/tempqueues/tempqueues/internal/poll"
	"github.com/tempqueues/tempqueues/internal/workers"
	"github.com/tempqueues/tempqueues/sqsapi"
)

// ErrVisibilityLimit is the cause with which a handler's context is
// cancelled when its message reaches SQS's 12-hour visibility limit.
var ErrVisibilityLimit = errors.New("responder: request reached the SQS 12-hour visibility limit")

// FinalTimeout bounds each step of a stop that follows the end of a grace
// period: releasing the abandoned messages and flushing deletes.
const FinalTimeout = time.Second

// Verdict is what happens to a message once its handler returns.
type Verdict int

const (
	Leave   Verdict = iota // nothing: abandoned, or left to its visibility timeout
	Delete                 // done: delete it
	Release                // make it visible again after Outcome.Delay
)

// Outcome is a handler's decision on its message.
type Outcome struct {
	Verdict Verdict
	Delay   time.Duration // for Release
}

// Handler handles one delivery under ctx, which the engine cancels at the
// visibility limit (ErrVisibilityLimit) and when the delivery is abandoned
// at a stop (sqsapi.ErrClosed).
type Handler func(ctx context.Context, d *Delivery) Outcome

// Counters are the engine's figures, kept by its user across its runs.
type Counters struct {
	Receives, EmptyReceives, ReceiveErrors, Received atomic.Int64
	Deleted, DeleteErrors, Released                  atomic.Int64
	Extended, ExtendErrors, VisibilityLimits         atomic.Int64
	InFlight, Pollers                                atomic.Int64
	Abandoned                                        atomic.Int64 // handlers cancelled at a stop deadline
}

// Config is one queue's consumer, with what it shares with the others of
// its owner.
type Config struct {
	Name     string // starts the engine's log messages ("responder")
	Client   sqsapi.MessageClient
	QueueURL string

	MaxConcurrency    int           // handler slots
	MaxPollers        int           // receive loops at most
	PollWaitTime      time.Duration // long poll
	VisibilityTimeout time.Duration // of each receive, and each extension
	DrainTimeout      time.Duration // grace period after ctx ends
	MaxVisibility     time.Duration // SQS's cap since receipt (12 h)
	NoSpare           bool          // no spare poller parked for bursts (poll.Sizer)

	Deletes    *batch.Deletes
	Visibility *batch.Visibilities
	Counters   *Counters
	Backoff    backoff.Policy // after failed receives
	Clock      clock.Clock
	Log        *slog.Logger

	// Stopping, when closed, stops the run as ctx's end does, but with no
	// grace period of its own: HardStop then ends the grace.
	Stopping <-chan struct{}
	HardStop <-chan struct{}
	// Latency is how long a call to SQS takes now: pollers size by it.
	Latency func() time.Duration
	// Key names a message in logs (a request id).
	Key func(types.Message) string
	// OnReceive sees every receive of several messages before their
	// handlers start.
	OnReceive func([]types.Message)
	// Renew, if set, is called for each delivery with a lease (SetLease)
	// after its visibility was extended, on a goroutine of the heartbeat's,
	// one round at a time, under a context of two heartbeat intervals.
	Renew func(ctx context.Context, d *Delivery, lease string)
}

// Run consumes cfg.QueueURL with h until ctx ends, Stopping is closed or
// the queue is found gone, and then stops gracefully. It returns the
// error that ended it (a wrapped *types.QueueDoesNotExist), or nil.
func Run(ctx context.Context, cfg Config, h Handler) error {
	c := &consumer{
		cfg:   cfg,
		h:     h,
		base:  context.WithoutCancel(ctx),
		slots: make(chan struct{}, cfg.MaxConcurrency),
		fatal: make(chan struct{}),
		pool:  workers.New(0),
	}
	c.sizer.NoSpare = cfg.NoSpare
	// Idle workers stop now, busy ones (a handler abandoned at the hard
	// deadline) after their task.
	defer c.pool.Close()
	c.loop = poll.New(c.base, poll.Config{
		Client: cfg.Client,
		Input: sqs.ReceiveMessageInput{
			QueueUrl:                    aws.String(cfg.QueueURL),
			WaitTimeSeconds:             int32(cfg.PollWaitTime / time.Second),
			VisibilityTimeout:           int32(cfg.VisibilityTimeout / time.Second),
			MessageAttributeNames:       []string{"All"},
			MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
		},
		Backoff: cfg.Backoff,
		Clock:   cfg.Clock,
	})
	defer c.loop.Abort()
	c.hb.init(c)
	go c.hb.run()
	c.addPoller()
	log := cfg.Log.With(slog.String("queue_url", cfg.QueueURL))
	log.Debug(cfg.Name + ": serving")

	stopped := make(chan struct{})
	defer close(stopped)
	hard := c.hardStop(ctx, stopped)
	c.stopIntake(hard)
	c.drain(hard)
	c.hb.close()

	fctx, cancel := context.WithTimeout(c.base, FinalTimeout)
	defer cancel()
	if err := errors.Join(cfg.Deletes.Flush(fctx), cfg.Visibility.Flush(fctx)); err != nil {
		log.Warn(cfg.Name+": flushing deletes and visibility changes at stop", slog.Any("error", err))
	}
	log.Debug(cfg.Name + ": stopped serving")
	return c.fatalErr
}

// hardStop waits for the stop to begin and returns the channel closed when
// its grace ends: DrainTimeout after ctx ends or the queue is found gone,
// or HardStop under Stopping; never once the run has stopped.
func (c *consumer) hardStop(ctx context.Context, stopped <-chan struct{}) <-chan struct{} {
	var graceEnd <-chan time.Time // nil under Stopping: HardStop rules
	select {
	case <-ctx.Done():
		graceEnd = time.After(c.cfg.DrainTimeout)
	case <-c.fatal:
		graceEnd = time.After(c.cfg.DrainTimeout)
	case <-c.cfg.Stopping:
	}
	hard := make(chan struct{})
	go func() {
		select {
		case <-graceEnd:
		case <-c.cfg.HardStop:
		case <-stopped:
			return
		}
		close(hard)
	}()
	return hard
}

// stopIntake stops receiving: no new work starts while the old drains. A
// long poll in flight may return for a while (on a busy queue at once),
// and what it returns is released; then it is cancelled.
func (c *consumer) stopIntake(hard <-chan struct{}) {
	c.loop.Stop()
	polled := waitDone(&c.pollers)
	grace := time.NewTimer(poll.StopGrace)
	defer grace.Stop()
	select {
	case <-polled:
		return
	case <-grace.C:
	case <-hard:
	}
	c.loop.Abort()
	<-polled
}

// drain waits for the running handlers, and at the hard stop abandons
// them. The pollers are gone, so no handler starts any more.
func (c *consumer) drain(hard <-chan struct{}) {
	handled := waitDone(&c.handlers)
	select {
	case <-handled:
	case <-hard:
		c.abandonAll()
		<-handled
	}
}

// waitDone returns a channel closed when wg's count reaches zero.
func waitDone(wg *sync.WaitGroup) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	return done
}

// consumer is one Run.
type consumer struct {
	cfg  Config
	h    Handler
	base context.Context // Run's context without its cancellation

	pool     *workers.Pool // runs pollers and handlers on reused stacks
	slots    chan struct{} // one token per running handler
	loop     *poll.Loop
	pollers  sync.WaitGroup
	nPollers atomic.Int32
	sizer    poll.Sizer // pollers by the pace of the receives that bring messages
	handlers sync.WaitGroup
	hb       heartbeat

	fatalOnce sync.Once
	fatal     chan struct{}
	fatalErr  error
}

func (c *consumer) setFatal(err error) {
	c.fatalOnce.Do(func() {
		c.fatalErr = err
		close(c.fatal)
	})
}
