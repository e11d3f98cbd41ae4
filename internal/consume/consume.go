// Package consume is the consumer engine under responder.Serve and
// redrive's Drain and Run: it receives from one queue with as many pollers
// as the pace of the messages needs, runs handlers in a bounded number of
// slots, extends the visibility of the messages being handled
// (extender.go), and then deletes or releases each one as its handler
// decides, in batched calls. Its stop is graceful: no new receive, a long
// poll in flight gets poll.StopGrace, running handlers may finish until a
// grace period or a hard stop ends, and the rest are cancelled and their
// messages released.
//
// # Modes
//
// The engine is one loop; its users pick, in one place (Config's mode
// fields and the Run they call):
//
//   - per message (Run with a Handler): each message is handled alone, in
//     a slot of its own, while the pollers go on receiving (the responder);
//   - per receive (RunBatch with a BatchHandler): the messages of one
//     receive are handled together, holding every slot their receive asked
//     for, so that one poller (MaxPollers 1) handles each batch before its
//     next receive (redrive, whose batch sends and deletes are its own);
//   - StopWhenEmpty: the run ends by itself, gracefully, after a receive
//     that brings no message (redrive's Drain);
//   - Pace: a wait before each receive (redrive's rate limit, and its
//     backoff after a batch whose actions all failed);
//   - GiveUp: which failed receives end the run besides a missing queue
//     (redrive's errors that retrying will not fix);
//   - the Hold action: a message kept hidden until the run stops and
//     released then (a dry run, which sees each message once).
//
// What a message means, and what its handler does with it, is the
// engine's user's: the responder's stages (responder/stages.go), redrive's
// decisions (redrive/redrive.go).
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
var ErrVisibilityLimit = errors.New("tempqueues: message reached the SQS 12-hour visibility limit")

// FinalTimeout bounds each step of a stop that follows the end of a grace
// period: releasing the abandoned messages and flushing deletes.
const FinalTimeout = time.Second

// ReasonStopping is the reason of the engine's own releases: messages
// received or being handled when a stop ended their chance.
const ReasonStopping = "stopping"

// reasonHeld is the reason of a held message's release at the end of its
// run.
const reasonHeld = "held"

// heldTimeout bounds the releases of held messages at the end of a run.
const heldTimeout = 30 * time.Second

// Action is what happens to a message once its handler returns.
type Action int

const (
	Leave   Action = iota // nothing: abandoned, or left to its visibility timeout
	Delete                // done: delete it
	Release               // make it visible again after Outcome.Delay
	Hold                  // keep it hidden until the run stops, then release it
)

// Outcome is a handler's decision on its message.
type Outcome struct {
	Action Action
	Delay  time.Duration // for Release
	Reason string        // for Release: why, for Config.OnRelease
}

// Handler handles one delivery under ctx, which the engine cancels at the
// visibility limit (ErrVisibilityLimit) and when the delivery is abandoned
// at a stop (sqsapi.ErrClosed).
type Handler func(ctx context.Context, d *Delivery) Outcome

// BatchHandler handles the deliveries of one receive together, and returns
// one Outcome per delivery, in order (a missing one is Leave). The engine
// cancels ctx as a Handler's when any of the deliveries reaches the
// visibility limit or is abandoned.
type BatchHandler func(ctx context.Context, ds []*Delivery) []Outcome

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

	Deletes *batch.Deletes
	// AfterDeletes, if set, counts the goroutines that run a delivery's
	// AfterDelete function, so that the owner of Deletes can wait for them
	// once it has closed Deletes (whose Close runs every delete's
	// callback before it returns).
	AfterDeletes *sync.WaitGroup
	Visibility   *batch.Visibilities
	Counters     *Counters
	Backoff      backoff.Policy // after failed receives
	Clock        clock.Clock
	Log          *slog.Logger

	// Stopping, when closed, stops the run as ctx's end does, but with no
	// grace period of its own: HardStop then ends the grace.
	Stopping <-chan struct{}
	HardStop <-chan struct{}
	// Latency is how long a call to SQS takes now: pollers size by it
	// (nil: unknown, one poller unless backlogs add more).
	Latency func() time.Duration
	// Key names a message in logs (a request id).
	Key func(types.Message) string
	// OnReceive sees every receive of several messages before their
	// handlers start.
	OnReceive func([]types.Message)
	// Renew, if set, is called for each delivery with a lease (SetLease)
	// after its visibility was extended, on a goroutine of the extender's,
	// one round at a time, under a context of two extension intervals.
	Renew func(ctx context.Context, d *Delivery, lease string)
	// OnRelease, if set, is told of each message made visible again, once
	// its call succeeded: with the handler's Outcome.Reason, or
	// ReasonStopping for one the engine released at a stop.
	OnRelease func(m types.Message, delay time.Duration, reason string)

	// The modes besides the handler's kind (see the package
	// documentation).

	// StopWhenEmpty ends the run, as Stopping does, after a receive that
	// brings no message.
	StopWhenEmpty bool
	// Pace, if set, is called by a poller before each receive, once the
	// slots it asks for are free, and may wait; it must return ctx's error
	// when ctx ends (the stop began), and the poller then ends.
	Pace func(ctx context.Context) error
	// GiveUp, if set, says which failed receives end the run with their
	// error, besides a missing queue's (always): it is given the error,
	// whether it is transient, and the loop's consecutive failures.
	GiveUp func(err error, transient bool, failures int) bool
}

// Run consumes cfg.QueueURL with h, one message per call, until ctx ends,
// Stopping is closed, the queue is found empty (StopWhenEmpty) or a receive
// fails for good (a missing queue, GiveUp), and then stops gracefully. It
// returns the error that ended it (a wrapped *types.QueueDoesNotExist, or
// what GiveUp accepted), or nil.
func Run(ctx context.Context, cfg Config, h Handler) error {
	return run(ctx, cfg, h, nil)
}

// RunBatch is Run with h given the messages of each receive together.
func RunBatch(ctx context.Context, cfg Config, h BatchHandler) error {
	return run(ctx, cfg, nil, h)
}

func run(ctx context.Context, cfg Config, h Handler, bh BatchHandler) error {
	c := &consumer{
		cfg:    cfg,
		h:      h,
		batch:  bh,
		ctx:    ctx,
		base:   context.WithoutCancel(ctx),
		slots:  make(chan struct{}, cfg.MaxConcurrency),
		gather: make(chan struct{}, 1),
		fatal:  make(chan struct{}),
		empty:  make(chan struct{}),
		pool:   workers.New(0),
	}
	c.paceCtx, c.stopPace = context.WithCancel(c.base)
	defer c.stopPace()
	c.sizer.NoSpare = cfg.NoSpare
	// Run returns with none of its goroutines left: by then every poller
	// and handler has returned (drain waits even for abandoned ones), so
	// the workers are idle and stop at once.
	defer func() {
		c.pool.Close()
		c.pool.Wait()
	}()
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
	c.ext.init(c)
	go c.ext.run()
	c.addPoller()
	log := cfg.Log.With(slog.String("queue_url", cfg.QueueURL))
	log.Debug(cfg.Name + ": serving")

	stopped := make(chan struct{})
	defer close(stopped)
	hard := c.hardStop(ctx, stopped)
	c.stopIntake(hard)
	c.drain(hard)
	held := c.releaseHeld()
	c.ext.close()

	// Held messages may be many (a dry run's): their releases get a call's
	// time rather than a final step's.
	final := FinalTimeout
	if held > 0 {
		final = heldTimeout
	}
	fctx, cancel := context.WithTimeout(c.base, final)
	defer cancel()
	if err := errors.Join(cfg.Deletes.Flush(fctx), cfg.Visibility.Flush(fctx)); err != nil {
		log.Warn(cfg.Name+": flushing deletes and visibility changes at stop", slog.Any("error", err))
	}
	log.Debug(cfg.Name + ": stopped serving")
	return c.fatalErr
}

// hardStop waits for the stop to begin and returns the channel closed when
// its grace ends: DrainTimeout after ctx ends or a receive failed for good,
// or HardStop under Stopping or StopWhenEmpty; never once the run has
// stopped.
func (c *consumer) hardStop(ctx context.Context, stopped <-chan struct{}) <-chan struct{} {
	var graceEnd <-chan time.Time // nil under Stopping: HardStop rules
	select {
	case <-ctx.Done():
		graceEnd = time.After(c.cfg.DrainTimeout)
	case <-c.fatal:
		graceEnd = time.After(c.cfg.DrainTimeout)
	case <-c.cfg.Stopping:
	case <-c.empty:
	}
	hard := make(chan struct{})
	c.pool.Go(func() { // on the pool, so that Run waits for it
		select {
		case <-graceEnd:
		case <-c.cfg.HardStop:
		case <-stopped:
			return
		}
		close(hard)
	})
	return hard
}

// stopIntake stops receiving: no new work starts while the old drains. A
// long poll in flight may return for a while (on a busy queue at once),
// and what it returns is released; then it is cancelled.
func (c *consumer) stopIntake(hard <-chan struct{}) {
	c.loop.Stop()
	c.stopPace()
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
	cfg   Config
	h     Handler         // per message, or
	batch BatchHandler    // per receive
	ctx   context.Context // Run's: its end begins the stop
	base  context.Context // Run's context without its cancellation

	paceCtx  context.Context // Config.Pace's: ends when the stop begins
	stopPace context.CancelFunc

	pool  *workers.Pool // runs pollers and handlers on reused stacks
	slots chan struct{} // one token per running handler
	// gather lets one batch poller at a time wait for its slots: two
	// waiting at once could each hold a part and wait for ever. A token
	// channel rather than a mutex, as it is held while its holder waits on
	// slots: a poller waiting for it waits on a channel too, which lets a
	// testing/synctest bubble see every goroutine blocked.
	gather   chan struct{}
	loop     *poll.Loop
	pollers  sync.WaitGroup
	nPollers atomic.Int32
	sizer    poll.Sizer // pollers by the pace of the receives that bring messages
	handlers sync.WaitGroup
	ext      extender

	fatalOnce sync.Once
	fatal     chan struct{}
	fatalErr  error
	emptyOnce sync.Once
	empty     chan struct{} // closed after an empty receive (StopWhenEmpty)

	heldMu sync.Mutex
	held   []*Delivery // Hold: released at the end of the run
}

func (c *consumer) setFatal(err error) {
	c.fatalOnce.Do(func() {
		c.fatalErr = err
		close(c.fatal)
	})
}

func (c *consumer) setEmpty() { c.emptyOnce.Do(func() { close(c.empty) }) }
