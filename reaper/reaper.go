package reaper

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tempqueues/tempqueues/internal/backoff"
	"github.com/tempqueues/tempqueues/sqsapi"
)

// Reaper is what a process runs to take part in a fleet's cleanup: it
// heartbeats the temporary queues the process owns (Add, Remove), and, unless
// DisableSweeping is set, checks the fleet's sweeper lease once per period and
// sweeps idle queues when it holds the lease.
//
// Typical use by a requester:
//
//	r, err := reaper.New(client)                // validates, no API call
//	r.Start()                                   // or go r.Run(ctx)
//	r.Add(hostQueueURL, 300*time.Second)        // after creating the host queue
//	...
//	r.Remove(hostQueueURL)                      // before deleting it
//	r.Close(ctx)                                // stops the goroutines
type Reaper struct {
	opts    Options
	hb      *Heartbeater
	sweeper *Sweeper
	lease   *lease // nil when sweeping is disabled
	life    lifecycle

	sweeps, deleted atomic.Int64
}

// New returns a Reaper. It validates the options and makes no API call;
// Run or Start begins the work.
func New(client sqsapi.Client, optFns ...func(*Options)) (*Reaper, error) {
	if client == nil {
		return nil, sqsapi.Invalid("reaper.New", "client", "must not be nil")
	}
	o, err := buildOptions("reaper.New", optFns)
	if err != nil {
		return nil, err
	}
	r := &Reaper{opts: o, hb: newHeartbeater(client, o)}
	r.sweeper = newSweeper(client, o, r.hb.owns)
	if !o.DisableSweeping {
		r.lease = newLease(client, o)
	}
	return r, nil
}

// Add registers a queue owned by this process for heartbeats; see
// Heartbeater.Add. A sweep by this process never inspects it.
func (r *Reaper) Add(queueURL string, retention time.Duration) error {
	return r.hb.Add(queueURL, retention)
}

// AddTagged registers a queue created with QueueTags; see
// Heartbeater.AddTagged.
func (r *Reaper) AddTagged(queueURL string, retention time.Duration, taggedAt time.Time) error {
	return r.hb.AddTagged(queueURL, retention, taggedAt)
}

// Remove stops heartbeating a queue; see Heartbeater.Remove.
func (r *Reaper) Remove(queueURL string) { r.hb.Remove(queueURL) }

// CoordinationQueueName returns the name of the queue holding the sweeper
// lease token: the prefix followed by "sweeper".
func (r *Reaper) CoordinationQueueName() string { return r.opts.Prefix + CoordinationQueueSuffix }

// Sweep sweeps once now, outside the lease (an operator's command). The
// process's own queues are skipped.
func (r *Reaper) Sweep(ctx context.Context) (Report, error) {
	return r.sweeper.Sweep(ctx)
}

// Run heartbeats and, unless sweeping is disabled, takes part in the
// fleet's sweeps, until ctx is cancelled or Close is called. It returns nil
// after Close, ctx.Err() after cancellation, and ErrRunning or ErrClosed at
// once when it cannot start.
func (r *Reaper) Run(ctx context.Context) error {
	runCtx, end, err := r.life.begin(ctx)
	if err != nil {
		return err
	}
	defer end()
	r.run(runCtx)
	return runResult(ctx)
}

// Start runs Run in a goroutine that Close stops.
func (r *Reaper) Start() error {
	runCtx, end, err := r.life.begin(context.Background())
	if err != nil {
		return err
	}
	go func() {
		defer end()
		r.run(runCtx)
	}()
	return nil
}

// Close stops heartbeats and sweeps and waits until every goroutine has
// returned or ctx is done. A lease token held by this process stays hidden
// until the next window, so the fleet sweeps at its usual pace. Queues keep
// their tags: the owner deletes them, or they become idle after their
// retention and a sweeper deletes them.
func (r *Reaper) Close(ctx context.Context) error {
	err := r.life.close(ctx)
	_ = r.hb.life.close(ctx) // makes later Add calls fail with ErrClosed
	return err
}

// Stats are counters of a Reaper.
type Stats struct {
	HeartbeatStats
	LeaseChecks     int64 // polls of the coordination queue
	LeasesWon       int64 // periods in which this process held the lease
	TokensCreated   int64 // lease tokens this process created
	DuplicateTokens int64 // extra tokens this process deleted
	LeaseErrors     int64 // failed lease calls
	Sweeps          int64 // sweeps this process ran under the lease
	QueuesDeleted   int64 // queues those sweeps deleted
}

// Stats returns the Reaper's counters.
func (r *Reaper) Stats() Stats {
	s := Stats{HeartbeatStats: r.hb.Stats(), Sweeps: r.sweeps.Load(), QueuesDeleted: r.deleted.Load()}
	if l := r.lease; l != nil {
		s.LeaseChecks, s.LeasesWon, s.TokensCreated = l.checks.Load(), l.won.Load(), l.created.Load()
		s.DuplicateTokens, s.LeaseErrors = l.duplicates.Load(), l.errs.Load()
	}
	return s
}

func (r *Reaper) run(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		r.hb.loop(ctx)
	}()
	if r.lease != nil {
		r.leaseLoop(ctx)
	}
	wg.Wait()
}

// leaseLoop checks the lease once at start and then once per period, in
// the period's window, and sweeps when it wins.
func (r *Reaper) leaseLoop(ctx context.Context) {
	for ctx.Err() == nil {
		if receipt, until, won := r.lease.acquire(ctx); won {
			r.sweepHolding(ctx, receipt, until)
		}
		now := r.opts.Now()
		if backoff.Sleep(ctx, r.lease.nextPoll(now).Sub(now)) != nil {
			return
		}
	}
}

// sweepHolding sweeps while holding the lease, extending the token's
// invisibility if the sweep runs into the next window.
func (r *Reaper) sweepHolding(ctx context.Context, receipt string, until time.Time) {
	type result struct {
		rep Report
		err error
	}
	done := make(chan result, 1)
	go func() {
		rep, err := r.sweeper.Sweep(ctx)
		done <- result{rep, err}
	}()

	extendAt := func(until time.Time) time.Duration {
		return max(until.Sub(r.opts.Now())-r.lease.margin/2, time.Millisecond)
	}
	timer := time.NewTimer(extendAt(until))
	defer timer.Stop()
	for {
		select {
		case res := <-done:
			r.sweeps.Add(1)
			r.deleted.Add(int64(len(res.rep.Deleted)))
			if res.err != nil && ctx.Err() == nil {
				r.opts.Logger.Warn("reaper: sweep failed", slog.Any("err", res.err))
			}
			if r.opts.OnSweep != nil && ctx.Err() == nil {
				r.opts.OnSweep(res.rep)
			}
			return
		case <-timer.C:
			if receipt == "" {
				continue // the token was replaced; nothing to extend
			}
			u, err := r.lease.extend(ctx, receipt)
			if err != nil {
				// Another process may take the token and sweep too; sweeps
				// are idempotent, so finishing this one is harmless.
				r.lease.fail(ctx, "extending the lease during a long sweep", err)
				receipt = ""
				continue
			}
			timer.Reset(extendAt(u))
		}
	}
}
