package sqstest

import (
	"container/heap"
	"sync"
	"time"
)

// timeSource is where the server reads time. Every time-dependent
// behaviour goes through it: visibility timeouts, delays, message
// retention, the FIFO deduplication window, quotas, timestamps, and the
// deadline of a long poll. It is the real clock unless Options.Clock
// gives a *Clock.
type timeSource interface {
	now() time.Time
	// afterFunc calls f in its own goroutine, or in the goroutine that
	// advances the clock, once d has elapsed. f must not block.
	afterFunc(d time.Duration, f func()) alarm
}

// alarm is a pending call scheduled by afterFunc; *time.Timer is one.
type alarm interface {
	// Stop cancels the call; it reports whether the call was still pending.
	Stop() bool
}

type realTime struct{}

func (realTime) now() time.Time { return time.Now() }

func (realTime) afterFunc(d time.Duration, f func()) alarm { return time.AfterFunc(d, f) }

// Clock is a clock that a test moves: pass one in Options.Clock and the
// server reads time from it instead of the real clock. Advance and Set
// fire, in time order, every timer that falls due, so a long poll parked
// on the server wakes when its wait time or a message's delay or
// visibility timeout passes, exactly as it would in real time, and
// messages past their retention are dropped, without the test sleeping.
//
// The zero value is not usable; create one with NewClock. It is safe for
// concurrent use.
type Clock struct {
	mu     sync.Mutex
	t      time.Time
	seq    uint64
	timers timerHeap
}

// NewClock returns a clock that reads start until moved. A zero start
// means the current real time, which keeps timestamps plausible.
func NewClock(start time.Time) *Clock {
	if start.IsZero() {
		start = time.Now()
	}
	return &Clock{t: start}
}

// Now returns the clock's current time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *Clock) now() time.Time { return c.Now() }

// afterFunc schedules f to run when the clock has advanced by d. A d <= 0
// runs f at once in a new goroutine, like time.AfterFunc.
func (c *Clock) afterFunc(d time.Duration, f func()) alarm {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &manualTimer{clock: c, when: c.t.Add(d), f: f, index: -1}
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
func (c *Clock) Advance(d time.Duration) {
	if d < 0 {
		return
	}
	c.mu.Lock()
	target := c.t.Add(d)
	for len(c.timers) > 0 && !c.timers[0].when.After(target) {
		t := heap.Pop(&c.timers).(*manualTimer)
		// Step time to each timer's instant so that f observes the time
		// it was due, as with a real clock.
		if t.when.After(c.t) {
			c.t = t.when
		}
		c.mu.Unlock()
		t.f()
		c.mu.Lock()
	}
	c.t = target
	c.mu.Unlock()
}

// pending returns the number of scheduled timers.
func (c *Clock) pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}

type manualTimer struct {
	clock *Clock
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
