package reaper

import (
	"context"
	"log/slog"
	"time"

	"github.com/tempqueues/tempqueues/internal/reap"
	"github.com/tempqueues/tempqueues/observe"
	"github.com/tempqueues/tempqueues/sqsapi"
)

// SweeperOptions configure a Sweeper, and the sweeps of a Reaper
// (Options embeds them). Zero values mean the documented defaults.
type SweeperOptions struct {
	// Prefix selects the queues swept: those whose name starts with it.
	// The lease lives in the queue Prefix+"sweeper.fifo". Default ("")
	// sqsapi.DefaultQueuePrefix (an empty prefix would sweep every queue
	// of the account). Every process of a fleet must use the same.
	Prefix string

	// Period is how often the fleet sweeps, and how often each process
	// checks the lease (one ReceiveMessage); a Sweeper uses it to judge
	// whether the fleet's heartbeats fit the account's tagging quota.
	// Default (0) 5 minutes, as in the Java client; between 2 seconds and
	// 12 hours. Every process of a fleet should use the same.
	Period time.Duration

	// DryRun makes sweeps inspect queues and report the idle ones in
	// Report.Deleted without deleting anything.
	DryRun bool

	// Logger receives operational warnings (throttling, vanished queues,
	// lease changes) and debug records; nil means slog.Default(), as
	// docs/architecture.md#conventions says.
	Logger *slog.Logger
}

// Options configure a Reaper: its sweeps' SweeperOptions, and what only a
// Reaper does. Zero values mean the documented defaults.
//
//	r, err := reaper.New(client, func(o *reaper.Options) {
//		o.Period = 10 * time.Minute
//	})
type Options struct {
	SweeperOptions

	// DisableSweeping makes the Reaper only heartbeat its own queues: it
	// neither takes part in the lease nor sweeps. Use it for processes that
	// should not need the IAM actions of sweeping.
	DisableSweeping bool

	// Observer, if set, is told what the Reaper finds: QueueGone when a
	// queue added to it turns out to be deleted (Queue is its URL, Err
	// matches *types.QueueDoesNotExist; the queue is no longer heartbeated,
	// and its owner may recreate it and Add it again), and Swept after
	// each sweep this process ran under the lease (Detail is its Report,
	// Err set when the sweep failed). It runs on the Reaper's goroutines
	// and must not block for long: heartbeats of other queues wait for it.
	Observer observe.Observer
}

// config turns a Reaper's options into the implementation's settings.
func config(o Options) func(*reap.Config) {
	return func(c *reap.Config) {
		c.Prefix, c.Period, c.DryRun, c.Logger = o.Prefix, o.Period, o.DryRun, o.Logger
		c.DisableSweeping, c.Observer = o.DisableSweeping, o.Observer
		c.Detail = func(t reap.Tally) any { return report(t) }
	}
}

// Reaper is what a process runs to take part in a fleet's cleanup: it
// heartbeats the temporary queues the process owns (Add, Remove) and, unless
// DisableSweeping is set, checks the fleet's sweeper lease once per period
// and sweeps idle queues when it holds the lease. It runs from New to
// Close:
//
//	r, err := reaper.New(client)          // validates and starts
//	defer r.Close(ctx)
//	r.Add(queueURL, 300*time.Second)       // after creating the queue
//	...
//	r.Remove(queueURL)                     // before deleting it
type Reaper struct{ r *reap.Reaper }

// New validates the options and starts the Reaper. Heartbeats begin with
// the first Add; unless DisableSweeping is set, a goroutine checks the
// lease, its first poll within moments (a new fleet sweeps at once), then
// once per period. Close stops both.
func New(client sqsapi.Client, optFns ...func(*Options)) (*Reaper, error) {
	var o Options
	for _, fn := range optFns {
		if fn != nil {
			fn(&o)
		}
	}
	r, err := reap.New(client, config(o))
	if err != nil {
		return nil, err
	}
	return &Reaper{r}, nil
}

// Add registers a queue owned by this process for heartbeats, with its idle
// retention (whole seconds, at least one). Its tags are written at once,
// then the heartbeat tag is refreshed every third of the retention. Adding
// a registered queue again with the same retention does nothing. A sweep
// by this process never inspects the queues it owns. Add makes no call
// itself; it returns sqsapi.ErrClosed after Close.
func (r *Reaper) Add(queueURL string, retention time.Duration) error {
	return r.r.Add(queueURL, retention)
}

// Remove stops heartbeating a queue, before the owner deletes it. It makes
// no call; the tags stay until the queue is deleted.
func (r *Reaper) Remove(queueURL string) { r.r.Remove(queueURL) }

// Close stops heartbeats and sweeps: Add returns sqsapi.ErrClosed from then on,
// and a lease poll, a heartbeat or a sweep in progress is cancelled (sweeps
// are idempotent: the next sweeper finishes the job). A Reaper owes nothing
// to flush, so Close only waits for its goroutines, which takes moments,
// and returns nil; if ctx ends first it returns ctx's error. It may be
// called again: later calls wait for the first and return its result.
//
// A lease token this process took stays hidden until the next period's
// window, as it would after any sweep, so the fleet sweeps at its usual
// pace. Queues keep their tags: the owner deletes them, or they become idle
// after their retention and a sweeper deletes them.
func (r *Reaper) Close(ctx context.Context) error { return r.r.Close(ctx) }

// Stats are counters of a Reaper. Its sweeps are told to
// Options.Observer, one Swept event each.
type Stats struct {
	HeartbeatErrors int64 // failed TagQueue calls, each retried after a backoff
}

// Stats returns the Reaper's counters.
func (r *Reaper) Stats() Stats { return Stats{HeartbeatErrors: r.r.Stats().HeartbeatErrors} }
