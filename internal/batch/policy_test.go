package batch

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tempqueues/tempqueues/internal/clock"
)

var t0 = time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)

func ms(f float64) time.Duration { return time.Duration(f * float64(time.Millisecond)) }

// feed records arrivals at the given offsets from t0.
func feed(a *arrivals, lat time.Duration, offsets ...time.Duration) {
	for _, o := range offsets {
		a.note(t0.Add(o), lat)
	}
}

// bursts returns the offsets of n bursts of size arrivals each, gap apart
// within a burst and every period.
func bursts(n, size int, gap, period time.Duration) []time.Duration {
	var out []time.Duration
	for b := range n {
		for i := range size {
			out = append(out, time.Duration(b)*period+time.Duration(i)*gap)
		}
	}
	return out
}

func TestArrivalsTellBurstsFromLoneEntries(t *testing.T) {
	lat := ms(10)
	var closedLoop arrivals // 8 callers woken by one receive, every 21 ms
	feed(&closedLoop, lat, bursts(20, 8, ms(0.05), ms(21))...)
	if !closedLoop.bursty() {
		t.Errorf("bursts of 8, 50 µs apart: burst share %.2f, want bursty", closedLoop.burst)
	}
	var lone arrivals // one caller, one send per round trip
	feed(&lone, lat, bursts(40, 1, 0, ms(21))...)
	if lone.bursty() {
		t.Errorf("one send every 21 ms: burst share %.2f, want not bursty", lone.burst)
	}
	if g := lone.gap; g != ms(21) {
		t.Errorf("mean gap = %v, want 21ms", g)
	}
	// Short of CPU, a burst's members come 400 µs apart: the gather gap
	// follows, up to an eighth of a call.
	var late arrivals
	feed(&late, lat, bursts(30, 8, ms(0.4), ms(25))...)
	if !late.bursty() {
		t.Errorf("bursts of 8, 400 µs apart: burst share %.2f, want bursty", late.burst)
	}
	if g := late.gatherGap(lat); g <= ms(0.4) || g > lat/GatherMaxDiv {
		t.Errorf("gather gap = %v, want above the 400 µs within bursts and at most %v", g, lat/GatherMaxDiv)
	}
	// Unknown latency: nothing counts as a burst.
	var unknown arrivals
	feed(&unknown, 0, bursts(20, 8, ms(0.05), ms(21))...)
	if unknown.bursty() {
		t.Error("bursty with an unknown latency")
	}
}

func TestGatherUntil(t *testing.T) {
	lat := ms(10)
	var bursty, lone arrivals
	bursty.burst, lone.burst = 1, 0
	first, last := t0, t0.Add(ms(0.1))
	gap := bursty.gatherGap(lat) // the floor: lat/32
	for _, tc := range []struct {
		name string
		lat  time.Duration
		a    *arrivals
		e    announcement
		now  time.Time
		want time.Time
	}{
		{"latency unknown: at once", 0, &bursty, announcement{}, last, first},
		{"lone arrivals: at once", lat, &lone, announcement{}, last, first},
		{"bursty: a gap after the latest", lat, &bursty, announcement{}, last, last.Add(gap)},
		{"company announced: until it is due", lat, &lone, announcement{n: 3, until: t0.Add(ms(1)), made: true}, last, t0.Add(ms(1))},
		{"announced company late: no longer than an eighth of a call", lat, &lone, announcement{n: 3, until: t0.Add(ms(5)), made: true}, last, first.Add(lat / GatherMaxDiv)},
		{"announced company all came: at once, bursty or not", lat, &bursty, announcement{n: 0, until: t0.Add(ms(1)), made: true}, last, first},
		{"announcement expired: at once", lat, &lone, announcement{n: 2, until: t0.Add(ms(0.05)), made: true}, last, first},
	} {
		if got := gatherUntil(tc.now, first, last, tc.lat, tc.a, &tc.e, true); !got.Equal(tc.want) {
			t.Errorf("%s: gatherUntil = +%v, want +%v", tc.name, got.Sub(t0), tc.want.Sub(t0))
		}
	}
	// A long burst stops gathering an eighth of a call after its first.
	if got := gatherUntil(t0.Add(ms(2)), first, t0.Add(ms(2)), lat, &bursty, &announcement{}, true); !got.Equal(first.Add(lat / GatherMaxDiv)) {
		t.Errorf("long burst: gatherUntil = +%v, want +%v", got.Sub(t0), lat/GatherMaxDiv)
	}
}

func TestWaitForCall(t *testing.T) {
	lat := ms(10)
	for _, tc := range []struct {
		name    string
		gap     time.Duration // mean gap between arrivals
		pending int
		want    bool
	}{
		// 8 callers at 10 ms: about one send per 3 ms. A quarter of a
		// call brings one more: waiting is dear for a batch of two. Go.
		{"sparse", ms(3), 1, false},
		// 64 callers: half a batch arrives within a quarter of a call.
		{"dense", ms(0.5), 1, true},
		{"half a batch pending already", 0, 5, true},
		{"gap unknown, few pending", 0, 2, false},
		{"just under half a batch", ms(2.5 / 3.1), 1, false},
		{"just half a batch", ms(2.5 / 4), 1, true},
	} {
		if got := waitForCall(lat, tc.gap, tc.pending, 10); got != tc.want {
			t.Errorf("%s: waitForCall = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// fakeClock is a clock the test moves by hand.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (f *fakeClock) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

func (f *fakeClock) add(d time.Duration) {
	f.mu.Lock()
	f.now = f.now.Add(d)
	f.mu.Unlock()
}

// waitCalls waits until every goroutine of the test's bubble is blocked and
// checks that r has seen n calls by then.
func waitCalls(t *testing.T, r *recorder, n int) {
	t.Helper()
	synctest.Wait()
	if len(r.calls()) < n {
		t.Fatalf("calls = %v, want %d", r.calls(), n)
	}
}

// TestDoOvertakesACallWhenSparse checks the policy's two outcomes for an
// entry a caller waits for while a call of its key is in flight, on a
// clock the test moves: sparse arrivals start a call of their own, dense
// ones wait for the call in flight and share the next.
func TestDoOvertakesACallWhenSparse(t *testing.T) {
	for _, tc := range []struct {
		name       string
		gap        time.Duration // between the arrivals the coalescer saw before
		fewerCalls bool
		overtakes  bool
	}{
		{"sparse", ms(3), false, true},
		{"dense", ms(0.4), false, false},
		{"sparse, fewer calls preferred", ms(3), true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				clk := &fakeClock{now: t0}
				r := &recorder{}
				c := New(r.fn, Options[int]{MaxInFlight: 8, Clock: clock.Clock{NowFunc: clk.Now}, Policy: Adaptive{NoOvertake: tc.fewerCalls}.New})
				defer c.Close(context.Background())
				SetLatency(c, ms(10))
				// History: lone arrivals tc.gap apart, each answered at once.
				for i := range 20 {
					if _, err := c.Do(context.Background(), "q", i); err != nil {
						t.Fatal(err)
					}
					clk.add(tc.gap)
				}
				SetLatency(c, ms(10))
				base := len(r.calls())

				r.mu.Lock()
				r.hold = make(chan struct{})
				r.mu.Unlock()
				var wg sync.WaitGroup
				var failed atomic.Bool
				do := func(v int) {
					wg.Add(1)
					go func() {
						defer wg.Done()
						if got, err := c.Do(context.Background(), "q", v); err != nil || got != 2*v {
							failed.Store(true)
						}
					}()
				}
				do(100) // goes alone, held in flight
				waitCalls(t, r, base+1)
				clk.add(tc.gap)
				do(101)
				if tc.overtakes {
					waitCalls(t, r, base+2) // its own call, beside the held one
				} else {
					// It waits for the held call: give it the chance to start
					// one of its own, which it must not take.
					synctest.Wait()
					if n := len(r.calls()); n != base+1 {
						t.Fatalf("calls = %d after a dense arrival, want %d: it must wait for the call in flight", n-base, 1)
					}
				}
				close(r.hold)
				wg.Wait()
				if failed.Load() {
					t.Fatal("a Do failed")
				}
				if got := r.calls()[base:]; len(got) != 2 || got[0] != 1 || got[1] != 1 {
					t.Fatalf("calls = %v, want two calls of one entry", got)
				}
			})
		})
	}
}

// TestSubmitUrgentOvertakesACallWhenSparse checks that an entry submitted
// with SubmitUrgent follows Do's policy while a call of its key is in
// flight (sparse arrivals start a call of their own, dense ones wait),
// where a Submit always waits.
func TestSubmitUrgentOvertakesACallWhenSparse(t *testing.T) {
	for _, tc := range []struct {
		name      string
		gap       time.Duration
		urgent    bool
		overtakes bool
	}{
		{"sparse", ms(3), true, true},
		{"dense", ms(0.4), true, false},
		{"sparse, not urgent", ms(3), false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				clk := &fakeClock{now: t0}
				r := &recorder{}
				c := New(r.fn, Options[int]{MaxInFlight: 8, Clock: clock.Clock{NowFunc: clk.Now}})
				defer c.Close(context.Background())
				results := make(chan error, 32)
				submit := func(v int) {
					done := func(got int, err error) {
						if err == nil && got != 2*v {
							err = errors.New("wrong result")
						}
						results <- err
					}
					if tc.urgent {
						c.SubmitUrgent("q", v, done)
					} else {
						c.Submit("q", v, done)
					}
				}
				SetLatency(c, ms(10))
				// History: lone arrivals tc.gap apart, each answered before
				// the next.
				for i := range 20 {
					submit(i)
					if err := <-results; err != nil {
						t.Fatal(err)
					}
					clk.add(tc.gap)
				}
				SetLatency(c, ms(10))
				base := len(r.calls())

				r.mu.Lock()
				r.hold = make(chan struct{})
				r.mu.Unlock()
				submit(100) // goes alone, held in flight
				waitCalls(t, r, base+1)
				clk.add(tc.gap)
				submit(101)
				if tc.overtakes {
					waitCalls(t, r, base+2)
				} else {
					synctest.Wait()
					if n := len(r.calls()); n != base+1 {
						t.Fatalf("calls = %d, want 1: the entry must wait for the call in flight", n-base)
					}
				}
				close(r.hold)
				for range 2 {
					if err := <-results; err != nil {
						t.Fatal(err)
					}
				}
				if got := r.calls()[base:]; len(got) != 2 || got[0] != 1 || got[1] != 1 {
					t.Fatalf("calls = %v, want two calls of one entry", got)
				}
			})
		})
	}
}

// TestExpectSendsTheBurstTogether checks that entries announced with
// Announce share one call, which goes when the last of them arrives.
func TestExpectSendsTheBurstTogether(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := &recorder{}
		c := New(r.fn, Options[int]{})
		defer c.Close(context.Background())
		// A latency so long that the announcement cannot expire during the
		// test: the batch goes because the last one came, not by a timer.
		SetLatency(c, time.Hour)
		c.Announce("q", 3, time.Hour)
		var wg sync.WaitGroup
		for i := range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if got, err := c.Do(context.Background(), "q", i); err != nil || got != 2*i {
					t.Errorf("Do(%d) = %d, %v", i, got, err)
				}
			}()
		}
		wg.Wait()
		if got := r.calls(); len(got) != 1 || got[0] != 3 {
			t.Fatalf("calls = %v, want one call of 3", got)
		}
	})
}

func TestExpectationTrust(t *testing.T) {
	var e announcement
	at := t0
	// A requester announces a caller's next request after each reply, and
	// the caller never sends one (it does not loop).
	for range 20 {
		e.announce(at, at.Add(ms(1)), 1)
		at = at.Add(ms(5))
	}
	if e.expecting(at) || e.trusted() {
		t.Fatalf("after 20 unfulfilled announcements: trust %.2f, still heeded", e.trust)
	}
	e.announce(at, at.Add(ms(1)), 2)
	if e.expecting(at) || e.made {
		t.Fatal("an untrusted announcement makes the entries wait")
	}
	// Callers that loop fulfil them: trust comes back.
	for range 30 {
		e.announce(at, at.Add(ms(1)), 2)
		e.arrived(at.Add(ms(0.1)))
		e.arrived(at.Add(ms(0.2)))
		at = at.Add(ms(5))
	}
	if !e.trusted() {
		t.Fatalf("after 30 fulfilled announcements: trust %.2f, not heeded", e.trust)
	}
	e.announce(at, at.Add(ms(1)), 2)
	if !e.expecting(at) {
		t.Fatal("a trusted announcement is not waited for")
	}
	e.arrived(at)
	e.arrived(at)
	if e.expecting(at) || !e.made {
		t.Fatal("all announced entries came: the batch must go at once")
	}
}

// TestFlushAfterALoneDoAfterAFlush is the regression test of an accounting
// bug: a lone Do after a Flush counted its entry in the new epoch and
// answered it in epoch 0, so the next Flush (and Close) waited for ever.
func TestFlushAfterALoneDoAfterAFlush(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := &recorder{}
		c := New(r.fn, Options[int]{})
		ctx := context.Background()
		if err := c.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		if v, err := c.Do(ctx, "q", 21); err != nil || v != 42 {
			t.Fatalf("Do = %v, %v", v, err)
		}
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if err := c.Close(cctx); err != nil {
			t.Fatalf("Close after a lone Do after a Flush: %v", err)
		}
	})
}

// TestPolicyPieces checks each piece of the adaptive policy through
// Decide, switched on and off one at a time, and the simple policy beside
// them: gathering a burst, waiting for announced company, and waiting for
// a call in flight rather than overtaking it.
func TestPolicyPieces(t *testing.T) {
	const lat = 10 * time.Millisecond
	now := t0.Add(time.Second)
	alone := State{Pending: 1, MaxEntries: 10, Latency: lat, Alone: true}
	inFlight := State{Pending: 1, InFlight: 1, MaxEntries: 10, Latency: lat}
	bursty := func(p Policy) {
		for _, o := range bursts(20, 4, ms(0.05), ms(21)) {
			p.Arrive(t0.Add(o), lat)
		}
	}
	sparse := func(p Policy) {
		for i := range 20 {
			p.Arrive(t0.Add(time.Duration(i)*ms(5)), lat)
		}
	}
	announced := func(p Policy) {
		sparse(p)
		p.Announce(now, now.Add(ms(1)), 3)
	}
	waits := func(d Decision) bool { return d.WaitForCall }
	gathers := func(d Decision) bool { return d.At.After(now) }
	for _, tc := range []struct {
		name    string
		history func(Policy)
		s       State
		asked   func(Decision) bool
		on, off Adaptive
	}{
		{"a burst gathers", bursty, alone, gathers, Adaptive{}, Adaptive{NoGather: true}},
		{"announced company is waited for", announced, alone, gathers, Adaptive{}, Adaptive{NoAnnounce: true}},
		{"sparse sends overtake a call in flight", sparse, inFlight, func(d Decision) bool { return !d.WaitForCall }, Adaptive{}, Adaptive{NoOvertake: true}},
	} {
		on, off := tc.on.New(), tc.off.New()
		tc.history(on)
		tc.history(off)
		if !tc.asked(on.Decide(now, tc.s)) {
			t.Errorf("%s: not with %+v", tc.name, tc.on)
		}
		if tc.asked(off.Decide(now, tc.s)) {
			t.Errorf("%s: still with %+v", tc.name, tc.off)
		}
		simple := Simple()
		tc.history(simple)
		if d := simple.Decide(now, tc.s); gathers(d) || waits(d) != (tc.s.InFlight > 0) {
			t.Errorf("%s: the simple policy decides %+v, want at once, or the next call while one is in flight", tc.name, d)
		}
	}
}

// TestSimplePolicyRidesTheNextCall checks the simple policy in a
// coalescer: a lone Do goes at once, and those that come while its call is
// in flight wait for it and share the next call, however sparse they are.
func TestSimplePolicyRidesTheNextCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := &recorder{hold: make(chan struct{})}
		c := New(r.fn, Options[int]{MaxInFlight: 8, Policy: Simple})
		defer c.Close(context.Background())
		SetLatency(c, ms(10))
		var wg sync.WaitGroup
		for i := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if got, err := c.Do(context.Background(), "q", i); err != nil || got != 2*i {
					t.Errorf("Do(%d) = %d, %v", i, got, err)
				}
			}()
			synctest.Wait() // one at a time: the first is alone
		}
		if got := r.calls(); len(got) != 1 || got[0] != 1 {
			t.Fatalf("calls = %v while the first is in flight, want one call of 1", got)
		}
		close(r.hold)
		wg.Wait()
		if got := r.calls(); len(got) != 2 || got[1] != 3 {
			t.Fatalf("calls = %v, want the other 3 in the next call", got)
		}
	})
}
