package sqstest

import (
	"container/heap"
	"sync"
	"time"
)

// Clock is the server's source of time. Every time-dependent behaviour reads
// it: visibility timeouts, delays, message retention, the FIFO deduplication
// window, timestamps, and the deadline of a long poll. The default is the
// real clock; a test passes a *ManualClock to move time without sleeping.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// AfterFunc calls f in its own goroutine, or in the goroutine that
	// advances the clock, once d has elapsed. f must not block.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a pending call scheduled by Clock.AfterFunc.
type Timer interface {
	// Stop cancels the call; it reports whether the call was still pending.
	Stop() bool
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }

// ManualClock is a Clock that moves only when told to. Advance fires, in
// time order, every timer that falls due, so a long poll parked on the
// server wakes when its wait time or a message's delay or visibility
// timeout passes, exactly as it would in real time.
//
// The zero value is not usable; create one with NewManualClock. It is safe
// for concurrent use.
type ManualClock struct {
	mu     sync.Mutex
	now    time.Time
	seq    uint64
	timers timerHeap
}

// NewManualClock returns a clock that reads start until advanced. A zero
// start means the current real time, which keeps timestamps plausible.
func NewManualClock(start time.Time) *ManualClock {
	if start.IsZero() {
		start = time.Now()
	}
	return &ManualClock{now: start}
}

// Now returns the clock's current time.
func (c *ManualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// AfterFunc schedules f to run when the clock has advanced by d. A d <= 0
// runs f at once in a new goroutine, like time.AfterFunc.
func (c *ManualClock) AfterFunc(d time.Duration, f func()) Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &manualTimer{clock: c, when: c.now.Add(d), f: f, index: -1}
	if d <= 0 {
		go f()
		return t
	}
	c.seq++
	t.seq = c.seq
	heap.Push(&c.timers, t)
	return t
}

// Advance moves the clock forward by d and runs, in order, the timers that
// fall due. It returns after they have run. Negative d is ignored: time
// never goes back.
func (c *ManualClock) Advance(d time.Duration) {
	if d < 0 {
		return
	}
	c.mu.Lock()
	target := c.now.Add(d)
	for len(c.timers) > 0 && !c.timers[0].when.After(target) {
		t := heap.Pop(&c.timers).(*manualTimer)
		// Step time to each timer's instant so that f observes the time
		// it was due, as with a real clock.
		if t.when.After(c.now) {
			c.now = t.when
		}
		c.mu.Unlock()
		t.f()
		c.mu.Lock()
	}
	c.now = target
	c.mu.Unlock()
}

// Set moves the clock to t, running due timers as Advance does. A t before
// the current time is ignored.
func (c *ManualClock) Set(t time.Time) {
	c.Advance(t.Sub(c.Now()))
}

// Pending returns the number of scheduled timers, which lets a test wait
// until a server goroutine has parked before advancing the clock.
func (c *ManualClock) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}

type manualTimer struct {
	clock *ManualClock
	when  time.Time
	seq   uint64 // orders timers due at the same instant by creation
	f     func()
	index int // position in the heap; -1 when not scheduled
}

func (t *manualTimer) Stop() bool {
	c := t.clock
	c.mu.Lock()
	defer c.mu.Unlock()
	if t.index < 0 {
		return false
	}
	heap.Remove(&c.timers, t.index)
	return true
}

type timerHeap []*manualTimer

func (h timerHeap) Len() int { return len(h) }
func (h timerHeap) Less(i, j int) bool {
	if h[i].when.Equal(h[j].when) {
		return h[i].seq < h[j].seq
	}
	return h[i].when.Before(h[j].when)
}
func (h timerHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index = i
	h[j].index = j
}
func (h *timerHeap) Push(x any) {
	t := x.(*manualTimer)
	t.index = len(*h)
	*h = append(*h, t)
}
func (h *timerHeap) Pop() any {
	old := *h
	t := old[len(old)-1]
	old[len(old)-1] = nil
	t.index = -1
	*h = old[:len(old)-1]
	return t
}
