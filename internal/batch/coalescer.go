// Package batch coalesces single SQS operations (send, delete, change
// visibility) from many goroutines into the batch APIs, without delaying a
// lone call: a queue's pending entries are flushed at once when no batch call
// is in flight for that queue, and otherwise when a full batch (10 entries, or
// the byte limit) is waiting and fewer than MaxInFlight calls run. Entries
// that arrive while a call is in flight ride on the next call, so batches
// grow with load and the call count per entry falls towards 1/10. A lone
// entry waited for with Do is sent on the caller's own goroutine.
//
// When entries a caller waits for (Do, and SubmitUrgent's) go is decided by
// a Policy per key (policy.go): by default one that measures the calls'
// latency and the entries' arrivals, gathers a burst for a small fraction
// of a call's latency, and starts a call of its own while others are in
// flight unless, by Little's law, enough company would join it before the
// earliest call ends.
//
// Failed entries are tried again when Options.Retry says so (for SQS:
// throttling and transient failures), after a backoff with full jitter, in
// a later batch: an entry
// a caller waits for with a deadline until that deadline passes, any other
// entry at most Options.MaxRetries times, so that Flush and Close end.
package batch

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tempqueues/tempqueues/internal/backoff"
	"github.com/tempqueues/tempqueues/internal/callbound"
	"github.com/tempqueues/tempqueues/internal/clock"
	"github.com/tempqueues/tempqueues/internal/wire"
	"github.com/tempqueues/tempqueues/internal/workers"
	"github.com/tempqueues/tempqueues/sqsapi"
)

// ErrClosed is returned for entries submitted after Close.
var ErrClosed = sqsapi.ErrClosed

// Result is the outcome of one entry of a batch call.
type Result[R any] struct {
	Value R
	Err   error
}

// Func performs one batch call for entries that share a key (a queue URL).
// It returns one Result per entry, in order, or an error for the whole call,
// which every entry then receives.
type Func[E, R any] func(ctx context.Context, key string, entries []E) ([]Result[R], error)

// Options tune a Coalescer. The zero value means 10 entries per call, no byte
// limit and 2 concurrent calls per key.
type Options[E any] struct {
	MaxEntries  int         // entries per call, at most 10
	MaxBytes    int         // bytes per call as measured by Size; 0 = no limit
	Size        func(E) int // size of an entry, used with MaxBytes
	MaxInFlight int         // concurrent calls per key
	// CallTimeout bounds each batch call, so that a hung call frees its
	// key's call slot; 0 means callbound.Timeout. A call made on a
	// waiting caller's goroutine (Do) has its caller's deadline too.
	CallTimeout time.Duration
	// Linger lets entries that nobody waits for (Submit, SubmitAll) wait up
	// to this long for company when no call is in flight, instead of going
	// out at once: a full batch, an entry waited for with Do, Flush and
	// Close still send at once. For deletes after a round trip, where a
	// few milliseconds cost nothing and one call per entry costs an API
	// call and the CPU to make it. 0 means no lingering.
	Linger time.Duration
	// Retry reports whether an entry whose attempt failed with err (the
	// whole call's error or its own) is tried again, within the bounds
	// above. nil retries nothing.
	Retry func(err error) bool
	// RetryBackoff spaces an entry's retries; the zero value starts at
	// 100ms and doubles up to 20s.
	RetryBackoff backoff.Policy
	// MaxRetries bounds the retries of an entry that no caller waits for
	// under a deadline (Submit, or any entry once Close began); 0 means
	// DefaultMaxRetries.
	MaxRetries int
	// Clock times the calls and the arrivals the send policy measures.
	Clock clock.Clock
	// Policy makes each key's policy for the entries a caller waits for
	// (Do, SubmitUrgent); nil means Adaptive{}.New.
	Policy NewPolicy
}

// DefaultMaxRetries is Options.MaxRetries' default: with the default
// backoff an entry nobody waits for is given up after at most 3.1 s of
// waits, plus its calls.
const DefaultMaxRetries = 5

// Coalescer batches entries per key. It is safe for concurrent use. Batch
// calls run on pooled goroutines (a fresh goroutine would grow its stack for
// every SDK call) that stop when idle and by Close.
type Coalescer[E, R any] struct {
	fn   Func[E, R]
	opts Options[E]
	pool *workers.Pool
	// base is the context of the batch calls, ended by abandon when a
	// Close's context ends before they do.
	base    context.Context
	abandon context.CancelFunc

	mu       sync.Mutex
	keys     map[string]*keyState[E, R]
	closed   bool
	flushing int        // running Flush calls: nothing lingers meanwhile
	idle     *sync.Cond // signalled when a call ends
	calls    sync.WaitGroup
	// Entries belong to the epoch current when they were submitted; each
	// Flush starts a new one and waits only for the epochs before it, so
	// that later entries, on any key, cannot keep it waiting.
	epoch uint64
	open  map[uint64]int // unanswered entries per epoch; no zero counts
	// retrying holds the entries waiting out a backoff before their next
	// attempt, so that a Close whose context ends can answer them; after
	// that (abandoned) nothing is retried.
	retrying  map[*retry[E, R]]struct{}
	abandoned bool

	lat     latency      // how long a batch call takes
	latNow  atomic.Int64 // lat, for Latency without the lock
	pruneAt int          // prune idle keys when there are more than this
}

// retry is an entry waiting for its next attempt.
type retry[E, R any] struct {
	it    item[E, R]
	timer *time.Timer
}

type keyState[E, R any] struct {
	pending  []item[E, R]
	bytes    int
	inFlight int
	due      time.Time   // when the oldest lingering entry must go; zero when none
	timer    *time.Timer // armed for timerAt while entries linger or gather
	timerAt  time.Time

	// urgent counts the pending entries a caller waits for, whose sending
	// policy decides (policy.go). A key's state stays after it goes idle,
	// so that the policy's estimates span quiet moments, and is pruned
	// after idleKeyTTL unused.
	urgent int
	policy Policy
	used   time.Time // the latest use, for pruning
}

// idleKeyTTL is how long the state of a key with nothing pending and no
// call in flight is kept for its estimates.
const idleKeyTTL = 10 * time.Second

type item[E, R any] struct {
	entry  E
	done   func(R, error)
	epoch  uint64
	urgent bool // a caller waits for it (Do), or a retry
	// ctx is the waiting caller's context (Do, DoAll); nil for Submit.
	ctx context.Context
	// failed, if set, notes each failure that is retried, for the caller
	// whose context ends first.
	failed func(error)
	tries  int   // failed attempts so far
	last   error // the last of them
}

// New returns a Coalescer that performs batch calls with fn.
func New[E, R any](fn Func[E, R], opts Options[E]) *Coalescer[E, R] {
	if opts.MaxEntries <= 0 || opts.MaxEntries > wire.MaxBatchEntries {
		opts.MaxEntries = wire.MaxBatchEntries
	}
	if opts.MaxInFlight <= 0 {
		opts.MaxInFlight = 2
	}
	if opts.CallTimeout <= 0 {
		opts.CallTimeout = callbound.Timeout
	}
	if opts.MaxRetries <= 0 {
		opts.MaxRetries = DefaultMaxRetries
	}
	if opts.Policy == nil {
		opts.Policy = Adaptive{}.New
	}
	c := &Coalescer[E, R]{fn: fn, opts: opts, pool: workers.New(0), keys: make(map[string]*keyState[E, R]),
		open: make(map[uint64]int), retrying: make(map[*retry[E, R]]struct{})}
	c.base, c.abandon = context.WithCancel(context.Background())
	c.idle = sync.NewCond(&c.mu)
	return c
}

// Submit queues entry for key and calls done with its result from the batch
// call's goroutine (done must not block for long). After Close, done is called
// at once with ErrClosed.
func (c *Coalescer[E, R]) Submit(key string, entry E, done func(R, error)) {
	c.SubmitWithin(key, entry, c.opts.Linger, done)
}

// SubmitWithin is Submit for an entry that may wait up to within (instead
// of Options.Linger) for company when no call is in flight: an entry whose
// deadline is far off (a delete with most of its visibility timeout left)
// can wait for a fuller batch than one about to expire. The batch goes out
// when the earliest of its entries' waits ends, when it is full, or on
// Flush and Close.
func (c *Coalescer[E, R]) SubmitWithin(key string, entry E, within time.Duration, done func(R, error)) {
	if done == nil {
		done = func(R, error) {}
	}
	c.submit(key, item[E, R]{entry: entry, done: done}, within)
}

// SubmitUrgent is Submit for an entry that nobody waits for here but
// somebody waits for at the other end, as for a session's messages: it
// follows the policy of the entries a caller waits for (Do), gathering a
// burst for a moment and starting a call of its own while others are in
// flight unless enough company would join it before the earliest ends,
// where a Submit waits for the call in flight, up to a call's latency.
// Its call runs on a pooled goroutine, never the caller's.
func (c *Coalescer[E, R]) SubmitUrgent(key string, entry E, done func(R, error)) {
	if done == nil {
		done = func(R, error) {}
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		var zero R
		done(zero, ErrClosed)
		return
	}
	ks := c.keyLocked(key)
	now := c.opts.Clock.Now()
	ks.policy.Arrive(now, c.lat.d)
	ks.policy.Join(now)
	ks = c.addLocked(key, item[E, R]{entry: entry, done: done, urgent: true}, 0)
	c.maybeStartLocked(key, ks)
	c.mu.Unlock()
}

// submit queues it for key to wait up to linger for company. After Close,
// its done gets ErrClosed at once.
func (c *Coalescer[E, R]) submit(key string, it item[E, R], linger time.Duration) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		var zero R
		it.done(zero, ErrClosed)
		return
	}
	ks := c.addLocked(key, it, linger)
	c.maybeStartLocked(key, ks)
	c.mu.Unlock()
}

// SubmitAll queues entries for key together and calls done(i, ...) with the
// result of entries[i]. Unlike a loop of Submit, where the first entry goes
// out alone when no call is in flight, entries submitted together share
// batch calls from the start: 10 entries make one call. After Close, done is
// called at once with ErrClosed for every entry.
func (c *Coalescer[E, R]) SubmitAll(key string, entries []E, done func(i int, v R, err error)) {
	// Without a deadline, Background retries as nobody's context would.
	c.submitAll(context.Background(), key, entries, done, nil)
}

// submitAll is SubmitAll for entries a caller waits for under ctx;
// failed(i, err), if set, notes the retried failures of entry i.
func (c *Coalescer[E, R]) submitAll(ctx context.Context, key string, entries []E, done func(i int, v R, err error), failed func(int, error)) {
	if done == nil {
		done = func(int, R, error) {}
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		var zero R
		for i := range entries {
			done(i, zero, ErrClosed)
		}
		return
	}
	var ks *keyState[E, R]
	for i, e := range entries {
		it := item[E, R]{entry: e, ctx: ctx, done: func(v R, err error) { done(i, v, err) }}
		if failed != nil {
			it.failed = func(err error) { failed(i, err) }
		}
		ks = c.addLocked(key, it, c.opts.Linger)
	}
	if ks != nil {
		c.maybeStartLocked(key, ks)
	}
	c.mu.Unlock()
}

// DoAll submits entries together (see SubmitAll) and waits for their
// results, in order, or for ctx; entries not answered when ctx ends get
// ctx.Err() (joined with the last failure of an entry being retried).
// When ctx ends first the entries are still processed, but not retried.
func (c *Coalescer[E, R]) DoAll(ctx context.Context, key string, entries []E) []Result[R] {
	type indexed struct {
		i int
		r Result[R]
	}
	ch := make(chan indexed, len(entries))
	lasts := make([]atomic.Pointer[error], len(entries))
	c.submitAll(ctx, key, entries, func(i int, v R, err error) { ch <- indexed{i, Result[R]{v, err}} },
		func(i int, err error) { lasts[i].Store(&err) })
	res := make([]Result[R], len(entries))
	got := make([]bool, len(entries))
	for n := 0; n < len(entries); n++ {
		select {
		case x := <-ch:
			x.r.Err = c.final(ctx, x.r.Err)
			res[x.i], got[x.i] = x.r, true
		case <-ctx.Done():
			for i := range res {
				if !got[i] {
					res[i].Err = gaveUp(ctx, lasts[i].Load())
				}
			}
			return res
		}
	}
	return res
}

// addLocked appends a new entry to key's pending batch, in the current
// epoch.
func (c *Coalescer[E, R]) addLocked(key string, it item[E, R], linger time.Duration) *keyState[E, R] {
	it.epoch = c.epoch
	c.open[c.epoch]++
	return c.queueLocked(key, it, linger)
}

// queueLocked appends it to key's pending batch, first starting a call for
// what is pending when it would push that past the byte limit and a call
// slot is free.
func (c *Coalescer[E, R]) queueLocked(key string, it item[E, R], linger time.Duration) *keyState[E, R] {
	ks := c.keyLocked(key)
	size := 0
	if c.opts.Size != nil {
		size = c.opts.Size(it.entry)
	}
	now := c.opts.Clock.Now()
	if c.opts.MaxBytes > 0 && len(ks.pending) > 0 && ks.bytes+size > c.opts.MaxBytes && ks.inFlight < c.opts.MaxInFlight {
		c.startLocked(key, ks, now)
	}
	// The pending batch goes by the earliest due time of its entries; an
	// entry that may not linger makes it due now.
	due := now.Add(max(linger, 0))
	if len(ks.pending) == 0 || due.Before(ks.due) {
		ks.due = due
		c.disarmLocked(ks) // re-armed for the new due time if still lingering
	}
	ks.pending = append(ks.pending, it)
	ks.bytes += size
	if it.urgent {
		ks.urgent++
	}
	return ks
}

// keyLocked returns key's state, made on first use. Making one prunes the
// states of keys idle for idleKeyTTL once there are twice as many as after
// the last pruning, so that a coalescer sending to ever new queues (a
// responder replying to many requesters) keeps only the recent ones.
func (c *Coalescer[E, R]) keyLocked(key string) *keyState[E, R] {
	now := c.opts.Clock.Now()
	ks := c.keys[key]
	if ks == nil {
		if len(c.keys) >= c.pruneAt {
			for k, ks := range c.keys {
				if ks.inFlight == 0 && len(ks.pending) == 0 && ks.timer == nil && now.Sub(ks.used) >= idleKeyTTL {
					delete(c.keys, k)
				}
			}
			c.pruneAt = max(16, 2*len(c.keys))
		}
		ks = &keyState[E, R]{policy: c.opts.Policy()}
		c.keys[key] = ks
	}
	ks.used = now
	return ks
}

// Do submits entry and waits for its result or for ctx.
//
// An entry that goes alone (nothing pending for key, a call slot free, and
// the policy lets it go at once) is sent
// at once by a call on the caller's goroutine under ctx, as a plain SDK call
// would be: handing it to another goroutine would only add a wake-up to its
// latency. Otherwise the entry joins a batch call (Options.CallTimeout
// bounds each); when ctx ends first the entry is still processed, only the wait is
// abandoned.
//
// A failure that Options.Retry accepts is retried in later batches until
// ctx ends; then Do returns ctx.Err() joined with the last failure, so the
// error matches both (errors.Is context.DeadlineExceeded, and the SQS
// error's code through errors.As).
func (c *Coalescer[E, R]) Do(ctx context.Context, key string, entry E) (R, error) {
	ch := make(chan Result[R], 1)
	var last atomic.Pointer[error]
	it := item[E, R]{entry: entry, ctx: ctx, urgent: true,
		done:   func(v R, err error) { ch <- Result[R]{v, err} },
		failed: func(err error) { last.Store(&err) },
	}
	if ks := c.arrive(key, &it); ks != nil {
		c.callInline(ctx, key, ks, it)
	}
	select {
	case r := <-ch:
		return r.Value, c.final(ctx, r.Err)
	case <-ctx.Done():
		select {
		case r := <-ch: // answered as ctx ended: the answer wins
			return r.Value, c.final(ctx, r.Err)
		default:
		}
		var zero R
		return zero, gaveUp(ctx, last.Load())
	}
}

// final is the error a waiting caller gets for its entry's answer err: an
// entry answered with a retryable failure because its caller's context
// ended (the answer and the deadline can arrive together) reports the
// deadline too, as if the caller had given up first.
func (c *Coalescer[E, R]) final(ctx context.Context, err error) error {
	if err == nil || !callbound.Ended(ctx) || c.opts.Retry == nil || errors.Is(err, endErr(ctx)) {
		return err
	}
	if !c.opts.Retry(err) {
		return err
	}
	return gaveUp(ctx, &err)
}

// gaveUp is the error of a wait abandoned when ctx ended, with the last
// failure of the entry's retries, if any.
func gaveUp(ctx context.Context, last *error) error {
	if last == nil {
		return endErr(ctx)
	}
	return fmt.Errorf("%w; still retrying after: %w", endErr(ctx), *last)
}

// endErr is the error of an ended ctx (callbound.Ended): its own, or
// context.DeadlineExceeded when its deadline has come before its timer
// has ended it.
func endErr(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return context.DeadlineExceeded
}

// arrive takes the urgent entry it for key: it notes the arrival for the
// send policy and either queues it (returning nil) or, when it goes alone
// at once, counts its call as started and returns the key's state for
// callInline. After Close, it.done gets ErrClosed at once.
func (c *Coalescer[E, R]) arrive(key string, it *item[E, R]) *keyState[E, R] {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		var zero R
		it.done(zero, ErrClosed) // Do's done only fills a buffered channel
		return nil
	}
	ks := c.keyLocked(key)
	now := c.opts.Clock.Now()
	ks.policy.Arrive(now, c.lat.d)
	if len(ks.pending) == 0 && ks.inFlight < c.opts.MaxInFlight {
		d := ks.policy.Decide(now, State{Pending: 1, InFlight: ks.inFlight, MaxEntries: c.opts.MaxEntries, Latency: c.lat.d, Alone: true})
		if !(d.WaitForCall && ks.inFlight > 0) && !d.At.After(now) {
			it.epoch = c.epoch
			c.open[it.epoch]++
			ks.inFlight++
			c.calls.Add(1)
			return ks
		}
	}
	ks.policy.Join(now)
	ks = c.addLocked(key, *it, 0)
	c.maybeStartLocked(key, ks)
	return nil
}

// callInline makes the call arrive started for it (whose epoch arrive
// set), on the caller's goroutine.
func (c *Coalescer[E, R]) callInline(ctx context.Context, key string, ks *keyState[E, R], it item[E, R]) {
	defer c.calls.Done()
	start := c.opts.Clock.Now()
	ctx, cancel := context.WithTimeout(ctx, c.opts.CallTimeout)
	results, err := c.fn(ctx, key, []E{it.entry})
	cancel()
	c.settle(key, ks, []item[E, R]{it}, results, err, start)
}

// settle hands the results of a call on key to its entries, or schedules
// the retries of those that failed with a retryable error, and then
// accounts for the end of the call.
func (c *Coalescer[E, R]) settle(key string, ks *keyState[E, R], batch []item[E, R], results []Result[R], err error, start time.Time) {
	if err == nil && len(results) != len(batch) {
		err = errors.New("tempqueues: an SQS batch call returned a wrong number of results")
	}
	// answered reuses batch's array: entry i is read before slot i (or an
	// earlier one) is written.
	answered := batch[:0]
	var retry []item[E, R]
	for i, it := range batch {
		var v R
		e := err
		if err == nil {
			v, e = results[i].Value, results[i].Err
		}
		if c.retries(it, e) {
			it.tries++
			it.last = e
			if it.failed != nil {
				it.failed(e)
			}
			retry = append(retry, it)
			continue
		}
		it.done(v, e)
		answered = append(answered, it)
	}
	c.finish(key, ks, answered, retry, start, err == nil)
}

// retries reports whether it, whose attempt failed with err, is tried
// again: when Options.Retry accepts err and, for a caller waiting with a
// deadline, the deadline has not passed, or for any other entry (and for
// every entry once Close began) fewer than MaxRetries retries were made.
func (c *Coalescer[E, R]) retries(it item[E, R], err error) bool {
	if err == nil || c.opts.Retry == nil || errors.Is(err, ErrClosed) {
		return false
	}
	deadline := false
	if it.ctx != nil {
		if callbound.Ended(it.ctx) {
			return false
		}
		_, deadline = it.ctx.Deadline()
	}
	c.mu.Lock()
	closed, abandoned := c.closed, c.abandoned
	c.mu.Unlock()
	if abandoned || (!deadline || closed) && it.tries >= c.opts.MaxRetries {
		return false
	}
	return c.opts.Retry(err)
}

// retryLaterLocked queues it again for key after its backoff, which ends
// no later than its caller's deadline.
func (c *Coalescer[E, R]) retryLaterLocked(key string, it item[E, R]) {
	d := c.opts.RetryBackoff.Delay(it.tries - 1)
	if it.ctx != nil {
		if dl, ok := it.ctx.Deadline(); ok {
			d = min(d, time.Until(dl))
		}
	}
	r := &retry[E, R]{it: it}
	r.timer = time.AfterFunc(d, func() { c.requeue(key, r) })
	c.retrying[r] = struct{}{}
}

// requeue puts an entry back into key's pending batch once its backoff
// ended; an entry whose caller gave up meanwhile is answered with its last
// failure instead.
func (c *Coalescer[E, R]) requeue(key string, r *retry[E, R]) {
	c.mu.Lock()
	if _, ok := c.retrying[r]; !ok {
		c.mu.Unlock()
		return // abandoned by Close
	}
	delete(c.retrying, r)
	it := r.it
	if it.ctx != nil && callbound.Ended(it.ctx) {
		c.mu.Unlock()
		c.answer(it, it.last)
		return
	}
	it.urgent = true // no lingering for company after a backoff
	ks := c.queueLocked(key, it, 0)
	c.maybeStartLocked(key, ks)
	c.mu.Unlock()
}

// answer gives an entry that is in no batch its final error.
func (c *Coalescer[E, R]) answer(it item[E, R], err error) {
	var zero R
	it.done(zero, err)
	c.mu.Lock()
	c.closeOpenLocked(it.epoch)
	c.idle.Broadcast()
	c.mu.Unlock()
}

func (c *Coalescer[E, R]) closeOpenLocked(epoch uint64) {
	if c.open[epoch]--; c.open[epoch] == 0 {
		delete(c.open, epoch)
	}
}

// finish accounts for the end of a call on key, started at start, that
// answered the entries answered and is to retry those of retry, and starts
// the calls of the entries pending meanwhile. A call that succeeded
// (sampled) is a sample of the latency; a failed one may have ended early.
func (c *Coalescer[E, R]) finish(key string, ks *keyState[E, R], answered, retry []item[E, R], start time.Time, sampled bool) {
	c.mu.Lock()
	now := c.opts.Clock.Now()
	if sampled {
		c.lat.add(now.Sub(start))
		c.latNow.Store(int64(c.lat.d))
	}
	for _, it := range answered {
		c.closeOpenLocked(it.epoch)
	}
	var giveUp []item[E, R]
	for _, it := range retry {
		if c.abandoned { // Close gave up while this call ran
			giveUp = append(giveUp, it)
			continue
		}
		c.retryLaterLocked(key, it)
	}
	ks.inFlight--
	c.maybeStartLocked(key, ks)
	c.idle.Broadcast()
	c.mu.Unlock()
	for _, it := range giveUp {
		c.answer(it, it.last)
	}
}

func (c *Coalescer[E, R]) full(ks *keyState[E, R]) bool {
	return len(ks.pending) >= c.opts.MaxEntries || (c.opts.MaxBytes > 0 && ks.bytes >= c.opts.MaxBytes)
}

// maybeStartLocked starts the calls key's pending entries are ready for:
// more while full batches wait and call slots are free; for entries a
// caller waits for, one when a slot is free and the key's policy says so
// (policy.go); for the others, one when no call is in flight and they may
// no longer linger.
func (c *Coalescer[E, R]) maybeStartLocked(key string, ks *keyState[E, R]) {
	for len(ks.pending) > 0 {
		now := c.opts.Clock.Now()
		switch {
		case ks.inFlight < c.opts.MaxInFlight && c.full(ks):
		case ks.urgent > 0:
			// Waiting for a call in flight comes first: entries that
			// wait for it gather company meanwhile.
			if ks.inFlight >= c.opts.MaxInFlight {
				c.disarmLocked(ks) // the call's end starts them
				return
			}
			d := ks.policy.Decide(now, State{Pending: len(ks.pending), InFlight: ks.inFlight, MaxEntries: c.opts.MaxEntries, Latency: c.lat.d})
			if d.WaitForCall && ks.inFlight > 0 {
				c.disarmLocked(ks)
				return
			}
			if c.flushing == 0 && !c.closed && now.Before(d.At) {
				c.armLocked(key, ks, d.At)
				return
			}
		case ks.inFlight == 0 && !c.lingers(ks):
		default:
			if ks.inFlight == 0 {
				c.armLocked(key, ks, ks.due)
			} // else a call in flight starts them when it ends
			return
		}
		c.startLocked(key, ks, now)
	}
	c.disarmLocked(ks)
}

// lingers reports whether key's pending entries may still wait for company.
func (c *Coalescer[E, R]) lingers(ks *keyState[E, R]) bool {
	return c.flushing == 0 && !c.closed && c.opts.Clock.Now().Before(ks.due)
}

// armLocked makes sure key's pending entries are looked at again at the
// latest at at: when lingering entries are due, or gathering ones stop
// waiting for company.
func (c *Coalescer[E, R]) armLocked(key string, ks *keyState[E, R], at time.Time) {
	if ks.timer != nil {
		if !ks.timerAt.After(at) {
			return
		}
		ks.timer.Stop()
	}
	ks.timerAt = at
	var t *time.Timer
	t = time.AfterFunc(c.opts.Clock.Until(at), func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.keys[key] != ks || ks.timer != t {
			return
		}
		ks.timer, ks.timerAt = nil, time.Time{}
		// Waited enough: go.
		ks.due = time.Time{}
		ks.policy.Waited()
		c.maybeStartLocked(key, ks)
	})
	ks.timer = t
}

func (c *Coalescer[E, R]) disarmLocked(ks *keyState[E, R]) {
	if ks.timer != nil {
		ks.timer.Stop()
		ks.timer, ks.timerAt = nil, time.Time{}
	}
}

// startLocked takes up to one batch of pending entries and starts its call
// at now.
func (c *Coalescer[E, R]) startLocked(key string, ks *keyState[E, R], now time.Time) {
	n, bytes := 0, 0
	for n < len(ks.pending) && n < c.opts.MaxEntries {
		s := 0
		if c.opts.Size != nil {
			s = c.opts.Size(ks.pending[n].entry)
		}
		if c.opts.MaxBytes > 0 && n > 0 && bytes+s > c.opts.MaxBytes {
			break
		}
		bytes += s
		n++
	}
	batch := make([]item[E, R], n)
	copy(batch, ks.pending[:n])
	for _, it := range batch {
		if it.urgent {
			ks.urgent--
		}
	}
	if ks.urgent == 0 {
		ks.policy.Sent(now)
	}
	rest := copy(ks.pending, ks.pending[n:])
	clear(ks.pending[rest:])
	ks.pending = ks.pending[:rest]
	ks.bytes -= bytes
	if rest == 0 {
		ks.due = time.Time{}
	}
	ks.inFlight++
	c.calls.Add(1)
	c.pool.Go(func() { c.run(key, ks, batch, now) })
}

func (c *Coalescer[E, R]) run(key string, ks *keyState[E, R], batch []item[E, R], start time.Time) {
	defer c.calls.Done()
	entries := make([]E, len(batch))
	for i, it := range batch {
		entries[i] = it.entry
	}
	ctx, cancel := context.WithTimeout(c.base, c.opts.CallTimeout)
	results, err := c.fn(ctx, key, entries)
	cancel()
	c.settle(key, ks, batch, results, err, start)
}

// Pending returns the number of entries submitted and not yet sent,
// counting those waiting to retry.
func (c *Coalescer[E, R]) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := len(c.retrying)
	for _, ks := range c.keys {
		n += len(ks.pending)
	}
	return n
}

// Flush waits until every entry submitted before the call has its result, or
// until ctx ends. Entries submitted meanwhile are sent without lingering,
// but Flush does not wait for them.
func (c *Coalescer[E, R]) Flush(ctx context.Context) error {
	c.mu.Lock()
	last := c.epoch
	c.epoch++
	c.flushing++
	for key, ks := range c.keys {
		c.maybeStartLocked(key, ks) // nothing lingers while flushing
	}
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.flushing--
		c.mu.Unlock()
	}()
	done := make(chan struct{})
	go func() {
		c.mu.Lock()
		for c.openThroughLocked(last) && ctx.Err() == nil {
			c.idle.Wait()
		}
		c.mu.Unlock()
		close(done)
	}()
	select {
	case <-done:
		return ctx.Err()
	case <-ctx.Done():
		// Wake the waiter so its goroutine ends.
		c.mu.Lock()
		c.idle.Broadcast()
		c.mu.Unlock()
		<-done
		return ctx.Err()
	}
}

// openThroughLocked reports whether entries of epoch last or earlier are
// still unanswered.
func (c *Coalescer[E, R]) openThroughLocked(last uint64) bool {
	for e := range c.open {
		if e <= last {
			return true
		}
	}
	return false
}

// Close refuses new entries, then waits for pending ones to be sent and
// for its goroutines to stop, or for ctx. It is idempotent. When ctx ends
// first, Close abandons what is left: the calls in flight are cancelled,
// and every entry not yet answered (pending, in a call, or waiting to
// retry) is answered with its failure or ErrClosed without being tried
// again; the error, which matches ctx.Err(), says how many were
// abandoned.
func (c *Coalescer[E, R]) Close(ctx context.Context) error {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	err := c.Flush(ctx)
	if err != nil {
		c.mu.Lock()
		c.abandoned = true
		n := 0
		for _, k := range c.open {
			n += k
		}
		var abandoned []item[E, R]
		for r := range c.retrying {
			r.timer.Stop()
			abandoned = append(abandoned, r.it)
		}
		clear(c.retrying)
		c.mu.Unlock()
		c.abandon() // the calls in flight and those still to start fail at once
		for _, it := range abandoned {
			c.answer(it, it.last)
		}
		err = fmt.Errorf("%w: %d %s abandoned", err, n, plural(n, "entry", "entries"))
	}
	c.pool.Close()
	if err == nil {
		c.pool.Wait()
	}
	c.abandon()
	return err
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// Count is a number of entries announced for one key (AnnounceAll).
type Count struct {
	Key string
	N   int
}

// AddCount adds one entry for key to counts.
func AddCount(counts []Count, key string) []Count {
	for i := range counts {
		if counts[i].Key == key {
			counts[i].N++
			return counts
		}
	}
	return append(counts, Count{Key: key, N: 1})
}

// AnnounceAll is Announce for each of counts, within a gather maximum (an
// eighth of the measured call latency).
func (c *Coalescer[E, R]) AnnounceAll(counts []Count) {
	within := c.Latency() / GatherMaxDiv
	for _, n := range counts {
		c.Announce(n.Key, n.N, within)
	}
}

// Announce announces n entries for key that callers will Do within the next
// within: entries of key gathering company wait for them (at most an eighth
// of a call's latency) and go the moment the last arrives, instead of
// guessing from past arrivals. A responder that received several requests
// says so for the queues their replies go to, a requester for the queues
// of the callers a receive wakes. Announcements of which fewer than half
// come true are not heeded.
func (c *Coalescer[E, R]) Announce(key string, n int, within time.Duration) {
	if n <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	ks := c.keyLocked(key)
	now := c.opts.Clock.Now()
	ks.policy.Announce(now, now.Add(within), n)
}

// Latency returns how long a batch call takes, as a moving average of the
// calls made so far; 0 before the first ends. Pollers size themselves by it.
func (c *Coalescer[E, R]) Latency() time.Duration { return time.Duration(c.latNow.Load()) }
