package reap

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tempqueues/tempqueues/internal/callback"
	"github.com/tempqueues/tempqueues/internal/heartbeat"
	"github.com/tempqueues/tempqueues/internal/lifecycle"
	"github.com/tempqueues/tempqueues/internal/wire"
	"github.com/tempqueues/tempqueues/observe"
	"github.com/tempqueues/tempqueues/sqsapi"
)

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
type Reaper struct {
	opts    Config
	hb      *heartbeat.Heartbeater
	sweeper *Sweeper
	lease   *lease // nil when sweeping is disabled
	fleet   *fleet // nil when sweeping is disabled: it lists queues too

	cancel    context.CancelFunc // of the lease goroutine and its sweeps
	leaseDone chan struct{}      // closed when the lease goroutine has returned

	mu     sync.Mutex
	closed bool
	owned  map[string]string // queue URL -> name, of the queues added

	stopper lifecycle.Once

	sweeps, deleted atomic.Int64

	// tags are the user's tags of the queues added, which the lease's
	// coordination queue gets too.
	tags userTags
}

// New validates the options and starts the Reaper. Heartbeats begin with
// the first Add; unless DisableSweeping is set, a goroutine checks the
// lease, its first poll within moments (a new fleet sweeps at once), then
// once per period. Close stops both.
func New(client sqsapi.Client, optFns ...func(*Config)) (*Reaper, error) {
	if err := wire.CheckClient("reaper.New", "client", client); err != nil {
		return nil, err
	}
	o, err := buildOptions("reaper.New", optFns)
	if err != nil {
		return nil, err
	}
	r := &Reaper{
		opts:      o,
		owned:     make(map[string]string),
		leaseDone: make(chan struct{}),
	}
	r.hb = heartbeat.New(client, heartbeat.Options{
		Logger:      o.Logger,
		CallTimeout: callTimeout,
		OnQueueGone: r.queueGone,
		Clock:       o.Clock,
	})
	r.sweeper = newSweeper(client, o, r.owns, r.hb)
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	if o.DisableSweeping {
		close(r.leaseDone)
	} else {
		r.lease = newLease(client, o, &r.tags)
		r.fleet = newFleet(client, o, r.hb)
		go func() {
			defer close(r.leaseDone)
			r.leaseLoop(ctx)
		}()
	}
	return r, nil
}

// Add registers a queue owned by this process for heartbeats, with its idle
// retention (whole seconds, at least one). Its tags are written at once,
// then the heartbeat tag is refreshed every third of the retention. Adding
// a registered queue again with the same retention does nothing. A sweep
// by this process never inspects the queues it owns. Add makes no call
// itself; it returns ErrClosed after Close.
func (r *Reaper) Add(queueURL string, retention time.Duration) error {
	return r.add(queueURL, func() error { return r.hb.Add(queueURL, retention) })
}

// Tags returns the tags to create a temporary queue with, beside any of
// the user's: sqsapi.RetentionTag and sqsapi.HeartbeatTag (now), as the
// Java client writes them. The retention written is retention, or a
// multiple of it when the fleet is too large for its heartbeats to fit the
// account's tagging quota at retention (docs/capacity.md). To know, Tags
// first estimates the fleet's size with a ListQueues call, unless the
// Reaper's last estimate is recent (a quarter period at first, growing to
// six periods) or DisableSweeping is set; ctx bounds that call. Create the
// queue with the tags, then register it with AddTagged.
func (r *Reaper) Tags(ctx context.Context, retention time.Duration) map[string]string {
	if r.fleet != nil && !r.isClosed() {
		r.fleet.refresh(ctx)
		r.fleet.signal()
	}
	return heartbeat.Tags(r.hb.Fitted(retention), r.opts.Clock.Now())
}

// AddTagged is Add for a queue created with the tags from Tags (tags is
// that map, with the user's own tags if any: the two heartbeat tags are
// read, and the first user's tags seen go on the lease's coordination
// queue Prefix+"sweeper.fifo" too, at its creation or by the next holder
// of the lease). It saves the first
// TagQueue call: the first heartbeat comes at a random point of the first
// interval, so a fleet started at once spreads its heartbeats. It returns
// an error matching sqsapi.ErrInvalidInput when a heartbeat tag is missing
// or malformed, and ErrClosed after Close.
func (r *Reaper) AddTagged(queueURL string, retention time.Duration, tags map[string]string) error {
	return r.add(queueURL, func() error {
		if err := r.hb.AddTagged(queueURL, retention, tags); err != nil {
			return err
		}
		r.tags.learn(tags)
		return nil
	})
}

func (r *Reaper) isClosed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.closed
}

func (r *Reaper) add(queueURL string, add func() error) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return ErrClosed
	}
	if err := add(); err != nil {
		return err
	}
	r.owned[queueURL] = queueName(queueURL)
	return nil
}

// Remove stops heartbeating a queue, before the owner deletes it. It makes
// no call; the tags stay until the queue is deleted.
func (r *Reaper) Remove(queueURL string) {
	r.mu.Lock()
	delete(r.owned, queueURL)
	r.mu.Unlock()
	r.hb.Remove(queueURL)
}

// queueGone forgets a deleted queue and tells the observer (the owner).
func (r *Reaper) queueGone(queueURL string, err error) {
	r.mu.Lock()
	delete(r.owned, queueURL)
	r.mu.Unlock()
	callback.Observe(context.Background(), r.opts.Logger, r.opts.Observer, observe.Event{Kind: observe.QueueGone, Queue: queueURL, Err: err})
}

// owns reports whether the queue named name was added; a sweep of this
// process skips it without reading its tags.
func (r *Reaper) owns(name string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, n := range r.owned {
		if n == name {
			return true
		}
	}
	return false
}

// Close stops heartbeats and sweeps: Add returns ErrClosed from then on,
// and a lease poll, a heartbeat or a sweep in progress is cancelled (sweeps
// are idempotent: the next sweeper finishes the job). A Reaper owes nothing
// to flush, so Close only waits for its goroutines, which takes moments,
// and returns nil; if ctx ends first it returns ctx's error. It may be
// called again: later calls wait for the first one's result
// (internal/lifecycle).
//
// A lease token this process took stays hidden until the next period's
// window, as it would after any sweep, so the fleet sweeps at its usual
// pace. Queues keep their tags: the owner deletes them, or they become idle
// after their retention and a sweeper deletes them.
func (r *Reaper) Close(ctx context.Context) error {
	return r.stopper.Do(ctx, func() error {
		r.mu.Lock()
		r.closed = true
		r.mu.Unlock()
		r.cancel()
		if err := r.hb.Close(ctx); err != nil {
			return err
		}
		select {
		case <-r.leaseDone:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
}

// Stats are counters of a Reaper.
type Stats struct {
	Heartbeats      int64 // successful TagQueue calls
	HeartbeatErrors int64 // failed TagQueue calls, each retried after a backoff
	LeaseErrors     int64 // failed calls on the coordination queue
	Sweeps          int64 // sweeps this process ran under the lease
	QueuesDeleted   int64 // queues those sweeps deleted
}

// Stats returns the Reaper's counters.
func (r *Reaper) Stats() Stats {
	hs := r.hb.Stats()
	s := Stats{Heartbeats: hs.Heartbeats, HeartbeatErrors: hs.Failures, Sweeps: r.sweeps.Load(), QueuesDeleted: r.deleted.Load()}
	if l := r.lease; l != nil {
		s.LeaseErrors = l.errs.Load()
	}
	return s
}

// leaseLoop checks the lease once at start and then once per period, in
// the period's window, and sweeps when it wins. Between polls, while the
// process has queues, it estimates the fleet's size again whenever the
// estimate turns stale (fleet.go).
func (r *Reaper) leaseLoop(ctx context.Context) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for ctx.Err() == nil {
		if receipt, until, won := r.lease.acquire(ctx); won {
			r.sweepHolding(ctx, receipt, until)
		}
		// The poll time is chosen once per window: choosing it again after
		// an estimate could skip the window.
		pollAt := r.lease.nextPoll(r.opts.Clock.Now())
		for {
			wake := pollAt
			if r.hb.Len() > 0 {
				r.fleet.refresh(ctx)
				if due := r.fleet.due(); !due.IsZero() && due.Before(wake) {
					wake = due
				}
			}
			timer.Reset(max(r.opts.Clock.Until(wake), 0))
			polling := false
			select {
			case <-ctx.Done():
				return
			case <-r.fleet.estimated: // a first queue's Tags: schedule the next estimate
			case <-timer.C:
				polling = wake.Equal(pollAt)
			}
			timer.Stop()
			if polling {
				break
			}
		}
	}
}

// sweepHolding sweeps while holding the lease, extending the token's
// invisibility if the sweep runs into the next window.
func (r *Reaper) sweepHolding(ctx context.Context, receipt string, until time.Time) {
	type result struct {
		rep Tally
		err error
	}
	done := make(chan result, 1)
	go func() {
		rep, err := r.sweeper.Sweep(ctx)
		done <- result{rep, err}
	}()

	extendAt := func(until time.Time) time.Duration {
		return max(r.opts.Clock.Until(until)-r.lease.margin/2, time.Millisecond)
	}
	timer := time.NewTimer(extendAt(until))
	defer timer.Stop()
	for {
		select {
		case res := <-done:
			r.sweeps.Add(1)
			r.deleted.Add(int64(len(res.rep.Deleted)))
			if ctx.Err() != nil {
				return // closing: the sweep was cut short
			}
			if res.err != nil {
				r.opts.Logger.Warn("reaper: sweep failed", slog.Any("err", res.err))
			} else {
				r.fleet.observe(res.rep.fleet)
			}
			if r.opts.Observer != nil {
				var detail any = res.rep
				if fn := r.opts.Detail; fn != nil {
					detail = fn(res.rep)
				}
				callback.Observe(ctx, r.opts.Logger, r.opts.Observer, observe.Event{Kind: observe.Swept, Err: res.err, Duration: res.rep.Duration, Detail: detail})
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
