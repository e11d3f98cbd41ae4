// Package batch coalesces single SQS operations (send, delete, change
// visibility) from many goroutines into the batch APIs, without delaying a
// lone call: a queue's pending entries are flushed at once when no batch call
// is in flight for that queue, and otherwise when a full batch (10 entries, or
// the byte limit) is waiting and fewer than MaxInFlight calls run. Entries
// that arrive while a call is in flight ride on the next call, so batches
// grow with load and the call count per entry falls towards 1/10. A lone
// entry waited for with Do is sent on the caller's own goroutine.
package batch

import (
	"context"
	"errors"
	"sync"
	"time"

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
	MaxEntries  int                    // entries per call, at most 10
	MaxBytes    int                    // bytes per call as measured by Size; 0 = no limit
	Size        func(E) int            // size of an entry, used with MaxBytes
	MaxInFlight int                    // concurrent calls per key
	Context     func() context.Context // context of each batch call; default Background
	// Linger lets entries that nobody waits for (Submit, SubmitAll) wait up
	// to this long for company when no call is in flight, instead of going
	// out at once: a full batch, an entry waited for with Do, Flush and
	// Close still send at once. For deletes after a round trip, where a
	// few milliseconds cost nothing and one call per entry costs an API
	// call and the CPU to make it. 0 means no lingering.
	Linger time.Duration
}

// Coalescer batches entries per key. It is safe for concurrent use. Batch
// calls run on pooled goroutines (a fresh goroutine would grow its stack for
// every SDK call) that stop when idle and by Close.
type Coalescer[E, R any] struct {
	fn   Func[E, R]
	opts Options[E]
	pool *workers.Pool

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
}

type keyState[E, R any] struct {
	pending  []item[E, R]
	bytes    int
	inFlight int
	due      time.Time   // when the oldest lingering entry must go; zero when none
	timer    *time.Timer // armed for due while entries linger
}

type item[E, R any] struct {
	entry E
	done  func(R, error)
	epoch uint64
}

// New returns a Coalescer that performs batch calls with fn.
func New[E, R any](fn Func[E, R], opts Options[E]) *Coalescer[E, R] {
	if opts.MaxEntries <= 0 || opts.MaxEntries > sqsapi.MaxBatchEntries {
		opts.MaxEntries = sqsapi.MaxBatchEntries
	}
	if opts.MaxInFlight <= 0 {
		opts.MaxInFlight = 2
	}
	if opts.Context == nil {
		opts.Context = context.Background
	}
	c := &Coalescer[E, R]{fn: fn, opts: opts, pool: workers.New(0), keys: make(map[string]*keyState[E, R]), open: make(map[uint64]int)}
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
	c.submit(key, entry, within, done, false)
}

// submit queues entry for key to wait up to linger for company; urgent (a
// caller waits) keeps it from lingering. After Close, done gets ErrClosed at
// once.
func (c *Coalescer[E, R]) submit(key string, entry E, linger time.Duration, done func(R, error), urgent bool) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		var zero R
		done(zero, ErrClosed)
		return
	}
	ks := c.addLocked(key, entry, linger, done)
	c.maybeStartLocked(key, ks, urgent)
	c.mu.Unlock()
}

// SubmitAll queues entries for key together and calls done(i, ...) with the
// result of entries[i]. Unlike a loop of Submit, where the first entry goes
// out alone when no call is in flight, entries submitted together share
// batch calls from the start: 10 entries make one call. After Close, done is
// called at once with ErrClosed for every entry.
func (c *Coalescer[E, R]) SubmitAll(key string, entries []E, done func(i int, v R, err error)) {
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
		ks = c.addLocked(key, e, c.opts.Linger, func(v R, err error) { done(i, v, err) })
	}
	if ks != nil {
		c.maybeStartLocked(key, ks, false)
	}
	c.mu.Unlock()
}

// DoAll submits entries together (see SubmitAll) and waits for their
// results, in order, or for ctx; entries not answered when ctx ends get
// ctx.Err(). When ctx ends first the entries are still processed.
func (c *Coalescer[E, R]) DoAll(ctx context.Context, key string, entries []E) []Result[R] {
	type indexed struct {
		i int
		r Result[R]
	}
	ch := make(chan indexed, len(entries))
	c.SubmitAll(key, entries, func(i int, v R, err error) { ch <- indexed{i, Result[R]{v, err}} })
	res := make([]Result[R], len(entries))
	got := make([]bool, len(entries))
	for n := 0; n < len(entries); n++ {
		select {
		case x := <-ch:
			res[x.i], got[x.i] = x.r, true
		case <-ctx.Done():
			for i := range res {
				if !got[i] {
					res[i].Err = ctx.Err()
				}
			}
			return res
		}
	}
	return res
}

// addLocked appends one entry to key's pending batch, first starting a call
// for what is pending when the entry would push it past the byte limit and a
// call slot is free.
func (c *Coalescer[E, R]) addLocked(key string, entry E, linger time.Duration, done func(R, error)) *keyState[E, R] {
	ks := c.keys[key]
	if ks == nil {
		ks = &keyState[E, R]{}
		c.keys[key] = ks
	}
	size := 0
	if c.opts.Size != nil {
		size = c.opts.Size(entry)
	}
	if c.opts.MaxBytes > 0 && len(ks.pending) > 0 && ks.bytes+size > c.opts.MaxBytes && ks.inFlight < c.opts.MaxInFlight {
		c.startLocked(key, ks)
	}
	// The pending batch goes by the earliest due time of its entries; an
	// entry that may not linger makes it due now.
	due := time.Now().Add(max(linger, 0))
	if len(ks.pending) == 0 || due.Before(ks.due) {
		ks.due = due
		c.disarmLocked(ks) // re-armed for the new due time if still lingering
	}
	ks.pending = append(ks.pending, item[E, R]{entry: entry, done: done, epoch: c.epoch})
	c.open[c.epoch]++
	ks.bytes += size
	return ks
}

// Do submits entry and waits for its result or for ctx.
//
// A lone entry (no call in flight and nothing pending for key) is sent at
// once by a call on the caller's goroutine under ctx, as a plain SDK call
// would be: handing it to another goroutine would only add a wake-up to its
// latency. Entries submitted meanwhile wait for that call and ride on the
// next. Otherwise the entry joins a batch call under Options.Context; when
// ctx ends first the entry is still processed, only the wait is abandoned.
func (c *Coalescer[E, R]) Do(ctx context.Context, key string, entry E) (R, error) {
	if r, ok := c.doInline(ctx, key, entry); ok {
		return r.Value, r.Err
	}
	ch := make(chan Result[R], 1)
	c.submit(key, entry, 0, func(v R, err error) { ch <- Result[R]{v, err} }, true)
	select {
	case r := <-ch:
		return r.Value, r.Err
	case <-ctx.Done():
		var zero R
		return zero, ctx.Err()
	}
}

// doInline makes the call for entry on the caller's goroutine if entry is
// alone for key; ok is false when it is not (or the coalescer is closed).
func (c *Coalescer[E, R]) doInline(ctx context.Context, key string, entry E) (r Result[R], ok bool) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return r, false
	}
	ks := c.keys[key]
	if ks != nil && (ks.inFlight > 0 || len(ks.pending) > 0) {
		c.mu.Unlock()
		return r, false
	}
	if ks == nil {
		ks = &keyState[E, R]{}
		c.keys[key] = ks
	}
	ks.inFlight++
	c.calls.Add(1)
	it := item[E, R]{epoch: c.epoch}
	c.open[it.epoch]++
	c.mu.Unlock()
	defer c.calls.Done()

	results, err := c.fn(ctx, key, []E{entry})
	switch {
	case err != nil:
		r.Err = err
	case len(results) != 1:
		r.Err = errors.New("batch: call returned a wrong number of results")
	default:
		r = results[0]
	}
	c.finish(key, ks, []item[E, R]{it})
	return r, true
}

// finish accounts for the end of a call on key that answered batch, and
// starts the calls of the entries pending meanwhile.
func (c *Coalescer[E, R]) finish(key string, ks *keyState[E, R], batch []item[E, R]) {
	c.mu.Lock()
	for _, it := range batch {
		if c.open[it.epoch]--; c.open[it.epoch] == 0 {
			delete(c.open, it.epoch)
		}
	}
	ks.inFlight--
	c.maybeStartLocked(key, ks, false)
	if ks.inFlight == 0 && len(ks.pending) == 0 {
		delete(c.keys, key)
	}
	c.idle.Broadcast()
	c.mu.Unlock()
}

func (c *Coalescer[E, R]) full(ks *keyState[E, R]) bool {
	return len(ks.pending) >= c.opts.MaxEntries || (c.opts.MaxBytes > 0 && ks.bytes >= c.opts.MaxBytes)
}

// maybeStartLocked starts the calls key's pending entries are ready for:
// one when no call is in flight (unless the entries may linger), more while
// full batches wait and call slots are free. urgent means a caller waits.
func (c *Coalescer[E, R]) maybeStartLocked(key string, ks *keyState[E, R], urgent bool) {
	for len(ks.pending) > 0 {
		switch {
		case ks.inFlight < c.opts.MaxInFlight && c.full(ks):
		case ks.inFlight == 0 && (urgent || !c.lingers(ks)):
		default:
			c.armLocked(key, ks)
			return
		}
		c.startLocked(key, ks)
	}
	c.disarmLocked(ks)
}

// lingers reports whether key's pending entries may still wait for company.
func (c *Coalescer[E, R]) lingers(ks *keyState[E, R]) bool {
	return c.flushing == 0 && !c.closed && time.Now().Before(ks.due)
}

// armLocked makes sure lingering entries of key go out by their due time.
func (c *Coalescer[E, R]) armLocked(key string, ks *keyState[E, R]) {
	if ks.inFlight > 0 || ks.timer != nil {
		return // a call in flight starts them when it ends
	}
	ks.timer = time.AfterFunc(time.Until(ks.due), func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.keys[key] != ks || ks.timer == nil {
			return
		}
		ks.timer = nil
		ks.due = time.Time{} // waited enough: go
		c.maybeStartLocked(key, ks, false)
	})
}

func (c *Coalescer[E, R]) disarmLocked(ks *keyState[E, R]) {
	if ks.timer != nil {
		ks.timer.Stop()
		ks.timer = nil
	}
}

// startLocked takes up to one batch of pending entries and starts its call.
func (c *Coalescer[E, R]) startLocked(key string, ks *keyState[E, R]) {
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
	rest := copy(ks.pending, ks.pending[n:])
	clear(ks.pending[rest:])
	ks.pending = ks.pending[:rest]
	ks.bytes -= bytes
	if rest == 0 {
		ks.due = time.Time{}
	}
	ks.inFlight++
	c.calls.Add(1)
	c.pool.Go(func() { c.run(key, ks, batch) })
}

func (c *Coalescer[E, R]) run(key string, ks *keyState[E, R], batch []item[E, R]) {
	defer c.calls.Done()
	entries := make([]E, len(batch))
	for i, it := range batch {
		entries[i] = it.entry
	}
	results, err := c.fn(c.opts.Context(), key, entries)
	if err == nil && len(results) != len(batch) {
		err = errors.New("batch: call returned a wrong number of results")
	}
	for i, it := range batch {
		if err != nil {
			var zero R
			it.done(zero, err)
			continue
		}
		it.done(results[i].Value, results[i].Err)
	}
	c.finish(key, ks, batch)
}

// Pending returns the number of entries submitted and not yet answered.
func (c *Coalescer[E, R]) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
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
		c.maybeStartLocked(key, ks, false) // nothing lingers while flushing
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

// Close refuses new entries, then waits for pending ones to be sent (or ctx)
// and for its goroutines to stop. It is idempotent. Calls still running when
// ctx ends keep running until the batch function returns; Close does not
// abandon their results, and their goroutines stop after them.
func (c *Coalescer[E, R]) Close(ctx context.Context) error {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	err := c.Flush(ctx)
	c.pool.Close()
	if err == nil {
		c.pool.Wait()
	}
	return err
}
