package poll

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"

	"github.com/tempqueues/tempqueues/internal/backoff"
	"github.com/tempqueues/tempqueues/internal/callbound"
	"github.com/tempqueues/tempqueues/internal/clock"
	"github.com/tempqueues/tempqueues/internal/testkit/testtime"
)

// step is one scripted answer of fakeReceiver.
type step struct {
	msgs  int
	err   error
	block bool // wait until the call's context ends or release is closed
}

// fakeReceiver answers receives from a script, then with empty receives.
type fakeReceiver struct {
	mu      sync.Mutex
	script  []step
	calls   int
	asked   []int32
	started chan struct{} // gets a value per call, if set
	release chan struct{} // unblocks a blocking step with its messages
}

func (f *fakeReceiver) ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, _ ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	f.mu.Lock()
	f.calls++
	f.asked = append(f.asked, in.MaxNumberOfMessages)
	var s step
	if len(f.script) > 0 {
		s, f.script = f.script[0], f.script[1:]
	}
	f.mu.Unlock()
	if f.started != nil {
		f.started <- struct{}{}
	}
	if s.block {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-f.release:
		}
	}
	if s.err != nil {
		return nil, s.err
	}
	out := &sqs.ReceiveMessageOutput{}
	for i := range s.msgs {
		out.Messages = append(out.Messages, types.Message{MessageId: aws.String(fmt.Sprint(i))})
	}
	return out, nil
}

func (f *fakeReceiver) callCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

// recorder is a Consumer that asks for a fixed number of messages a fixed
// number of times and records every Result.
type recorder struct {
	l       *Loop
	ask     int
	wants   int // Want calls left before Want returns 0; <0: unlimited
	block   bool
	mu      sync.Mutex
	results []Result
	keep    func(Result) bool // Handle's answer; nil: continue
}

func (r *recorder) Want() int {
	r.mu.Lock()
	if r.wants == 0 {
		r.mu.Unlock()
		return 0
	}
	r.wants--
	r.mu.Unlock()
	if r.block {
		<-r.l.Stopping()
		return 0
	}
	return r.ask
}

func (r *recorder) Handle(res Result) bool {
	r.mu.Lock()
	r.results = append(r.results, res)
	r.mu.Unlock()
	if r.keep != nil {
		return r.keep(res)
	}
	return true
}

func (r *recorder) got() []Result {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Result(nil), r.results...)
}

// fakeClock is a settable clock whose random draws return their maximum.
type fakeClock struct{ now atomic.Int64 }

func (c *fakeClock) clock() clock.Clock {
	return clock.Clock{
		NowFunc:    func() time.Time { return time.Unix(0, c.now.Load()) },
		Int64NFunc: func(n int64) int64 { return n - 1 },
	}
}

var (
	throttled = &smithy.GenericAPIError{Code: "ThrottlingException", Message: "slow down", Fault: smithy.FaultClient}
	denied    = &smithy.GenericAPIError{Code: "AccessDenied", Message: "no", Fault: smithy.FaultClient}
	// A tiny backoff: ceilings of 1ms, 2ms, 4ms, 8ms; a maximal draw each.
	tiny = backoff.Policy{Base: time.Millisecond, Cap: 8 * time.Millisecond}
)

func newLoop(f *fakeReceiver, clk clock.Clock) *Loop {
	return New(context.Background(), Config{
		Client:  f,
		Input:   sqs.ReceiveMessageInput{QueueUrl: aws.String("q"), WaitTimeSeconds: 20},
		Backoff: tiny,
		Clock:   clk,
	})
}

func TestTransientErrorsBackOffAndRecover(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var fc fakeClock
		f := &fakeReceiver{script: []step{{err: throttled}, {err: throttled}, {err: throttled}, {msgs: 3}, {err: throttled}}}
		l := newLoop(f, fc.clock())
		c := &recorder{l: l, ask: 7, wants: 5}
		l.Run(c)
		res := c.got()
		if len(res) != 5 {
			t.Fatalf("%d results, want 5", len(res))
		}
		wantDelay := []time.Duration{time.Millisecond, 2 * time.Millisecond, 4 * time.Millisecond, 0, time.Millisecond}
		for i, r := range res {
			if (r.Err != nil) != (i != 3) || r.Delay != wantDelay[i] || r.Asked != 7 || r.Stopped {
				t.Errorf("result %d = %+v, want delay %v", i, r, wantDelay[i])
			}
			if r.Err != nil && !r.Transient {
				t.Errorf("result %d: throttling not transient", i)
			}
		}
		if len(res[3].Messages) != 3 {
			t.Errorf("success delivered %d messages, want 3", len(res[3].Messages))
		}
		for _, a := range f.asked {
			if a != 7 {
				t.Errorf("asked for %d messages, want 7", a)
			}
		}
		// A failed receive may stay parked on the server for its whole wait.
		if got := l.ParkedUntil(); !got.Equal(time.Unix(0, 0).Add(20 * time.Second)) {
			t.Errorf("ParkedUntil = %v, want 20 s after the failed receives began", got)
		}
	})
}

func TestPermanentErrorReportedAndEndsByChoice(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeReceiver{script: []step{{err: denied}, {err: denied}}}
		l := newLoop(f, clock.Clock{})
		seen := 0
		c := &recorder{l: l, ask: 10, wants: -1, keep: func(r Result) bool {
			seen++
			return seen < 2 // retry the first, give up at the second
		}}
		l.Run(c)
		res := c.got()
		if len(res) != 2 || f.callCount() != 2 {
			t.Fatalf("%d results after %d calls, want 2 and 2", len(res), f.callCount())
		}
		for _, r := range res {
			if !errors.Is(r.Err, denied) || r.Transient {
				t.Errorf("result %+v: want the permanent error, not transient", r)
			}
		}
	})
}

func TestStopLetsTheReceiveInFlightFinishForRelease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeReceiver{script: []step{{msgs: 2, block: true}}, started: make(chan struct{}, 1), release: make(chan struct{})}
		l := newLoop(f, clock.Clock{})
		c := &recorder{l: l, ask: 10, wants: -1}
		done := make(chan struct{})
		go func() { l.Run(c); close(done) }()
		<-f.started
		l.Stop()
		// Past the receive's wait, within its bound (callbound.Timeout more).
		testtime.Advance(30 * time.Second)
		select {
		case <-done:
			t.Fatal("Stop cancelled the receive in flight")
		default:
		}
		close(f.release)
		<-done
		res := c.got()
		if len(res) != 1 || !res[0].Stopped || len(res[0].Messages) != 2 || res[0].Err != nil {
			t.Fatalf("results %+v: want the 2 messages handed over with Stopped", res)
		}
		if !l.ParkedUntil().IsZero() || l.ReleaseDelay() != 0 {
			t.Errorf("a receive that completed counts as parked: %v", l.ParkedUntil())
		}
		if f.callCount() != 1 {
			t.Errorf("%d receives, want none after the stop", f.callCount())
		}
	})
}

func TestAbortCancelsAndTracksTheParkedPoll(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeReceiver{script: []step{{block: true}}, started: make(chan struct{}, 1), release: make(chan struct{})}
		l := newLoop(f, clock.Clock{})
		c := &recorder{l: l, ask: 10, wants: -1}
		done := make(chan struct{})
		start := time.Now()
		go func() { l.Run(c); close(done) }()
		<-f.started
		testtime.Advance(5 * time.Second)
		l.Abort()
		<-done
		res := c.got()
		if len(res) != 1 || !res[0].Stopped || !errors.Is(res[0].Err, context.Canceled) || res[0].Asked != 10 {
			t.Fatalf("results %+v: want one Stopped result with the cancellation and Asked 10", res)
		}
		if want := start.Add(20 * time.Second); !l.ParkedUntil().Equal(want) {
			t.Errorf("ParkedUntil = %v, want %v (start + 20 s wait)", l.ParkedUntil(), want)
		}
		// 15 s left, plus the 2 s margin.
		if d := l.ReleaseDelay(); d != 17*time.Second {
			t.Errorf("ReleaseDelay = %v, want 17s", d)
		}
		testtime.Advance(14*time.Second + 500*time.Millisecond) // 0.5 s left
		if d := l.ReleaseDelay(); d != 2*time.Second {
			t.Errorf("ReleaseDelay near the end = %v, want 2s", d)
		}
		testtime.Advance(5 * time.Second)
		if d := l.ReleaseDelay(); d != 0 {
			t.Errorf("ReleaseDelay after the wait = %v, want 0", d)
		}
	})
}

func TestParentContextAborts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeReceiver{script: []step{{block: true}}, started: make(chan struct{}, 1), release: make(chan struct{})}
		ctx, cancel := context.WithCancel(context.Background())
		l := New(ctx, Config{Client: f, Input: sqs.ReceiveMessageInput{WaitTimeSeconds: 20}})
		c := &recorder{l: l, ask: 1, wants: -1}
		done := make(chan struct{})
		go func() { l.Run(c); close(done) }()
		<-f.started
		cancel()
		<-done
		if res := c.got(); len(res) != 1 || !res[0].Stopped || !l.Stopped() {
			t.Fatalf("results %+v, Stopped %v: want the loop stopped", res, l.Stopped())
		}
		if l.ParkedUntil().IsZero() {
			t.Error("the cancelled receive is not tracked as parked")
		}
	})
}

// TestStopBetweenWantAndReceive: capacity Want reserved comes back through
// Handle even when no receive is made.
func TestStopBetweenWantAndReceive(t *testing.T) {
	f := &fakeReceiver{}
	l := newLoop(f, clock.Clock{})
	c := &recorder{l: l, ask: 4, wants: -1}
	c.keep = nil
	stopper := &stopInWant{recorder: c}
	l.Run(stopper)
	res := c.got()
	if len(res) != 1 || !res[0].Stopped || res[0].Asked != 4 || res[0].Err != nil || f.callCount() != 0 {
		t.Fatalf("results %+v after %d receives: want one Stopped result for Asked 4 and no receive", res, f.callCount())
	}
}

type stopInWant struct{ *recorder }

func (s *stopInWant) Want() int {
	n := s.recorder.Want()
	s.l.Stop()
	return n
}

func TestStopEndsBackoffAndBlockingWant(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeReceiver{script: []step{{err: throttled}}}
		l := New(context.Background(), Config{
			Client:  f,
			Input:   sqs.ReceiveMessageInput{WaitTimeSeconds: 1},
			Backoff: backoff.Policy{Base: time.Hour, Cap: time.Hour},
		})
		c := &recorder{l: l, ask: 1, wants: 1}
		done := make(chan struct{})
		go func() { l.Run(c); close(done) }()
		synctest.Wait()
		if n := len(c.got()); n != 1 {
			t.Fatalf("%d results, want the throttled receive's", n)
		}
		stopped := time.Now()
		l.Stop() // the poller sleeps up to an hour
		<-done
		if d := time.Since(stopped); d != 0 {
			t.Errorf("the poller ended %v after Stop, want at once (its backoff cut short)", d)
		}

		// A Want that blocks until the stop.
		l2 := newLoop(&fakeReceiver{}, clock.Clock{})
		c2 := &recorder{l: l2, ask: 1, wants: -1, block: true}
		done2 := make(chan struct{})
		go func() { l2.Run(c2); close(done2) }()
		l2.Stop()
		<-done2
		if len(c2.got()) != 0 {
			t.Errorf("results %+v after a Want of 0", c2.got())
		}
	})
}

// demand is a demand-driven consumer: pollers run while receivers wait.
type demand struct {
	mu      sync.Mutex
	waiting int
	pollers int
}

func (d *demand) Want() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.waiting == 0 {
		d.pollers--
		return 0
	}
	return min(d.waiting, 10)
}

func (d *demand) Handle(r Result) bool {
	d.mu.Lock()
	d.waiting -= len(r.Messages)
	d.mu.Unlock()
	return true
}

func TestDemandDrivenPollers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeReceiver{script: []step{{msgs: 10}, {msgs: 10}, {msgs: 5}, {msgs: 5}}}
		l := newLoop(f, clock.Clock{})
		d := &demand{waiting: 30, pollers: 3}
		var wg sync.WaitGroup
		for range 3 {
			wg.Add(1)
			go func() { defer wg.Done(); l.Run(d) }()
		}
		wg.Wait()
		if d.waiting > 0 || d.pollers != 0 {
			t.Errorf("demand left %d, pollers %d: want all served and all pollers ended", d.waiting, d.pollers)
		}
	})
}

// staticReceiver returns the same output without allocating.
type staticReceiver struct{ out sqs.ReceiveMessageOutput }

func (s *staticReceiver) ReceiveMessage(context.Context, *sqs.ReceiveMessageInput, ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	return &s.out, nil
}

type countdown struct{ left int }

func (c *countdown) Want() int {
	if c.left == 0 {
		return 0
	}
	c.left--
	return 10
}

func (c *countdown) Handle(Result) bool { return true }

// TestNoAllocationPerReceive: a poller allocates its receive input and
// its receives' bound (a context and a timer) once, whatever the number of
// receives.
func TestNoAllocationPerReceive(t *testing.T) {
	s := &staticReceiver{out: sqs.ReceiveMessageOutput{Messages: make([]types.Message, 3)}}
	l := New(context.Background(), Config{Client: s, Input: sqs.ReceiveMessageInput{WaitTimeSeconds: 20}})
	c := &countdown{}
	allocs := testing.AllocsPerRun(20, func() {
		c.left = 100
		l.Run(c)
	})
	if allocs > 6 {
		t.Errorf("%v allocations per Run of 100 receives, want at most 6", allocs)
	}
}

// hungReceiver's receives never end on their own, as over a connection
// that stopped answering: only their context ends them.
type hungReceiver struct{ calls atomic.Int32 }

func (h *hungReceiver) ReceiveMessage(ctx context.Context, _ *sqs.ReceiveMessageInput, _ ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	h.calls.Add(1)
	<-ctx.Done()
	return nil, ctx.Err()
}

// TestAHungReceiveIsCutOff: a receive that outlasts its wait by
// callbound.Timeout fails, and the poller goes on with a fresh context.
func TestAHungReceiveIsCutOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := &hungReceiver{}
		l := New(context.Background(), Config{Client: h, Input: sqs.ReceiveMessageInput{WaitTimeSeconds: 20}})
		defer l.Abort()
		c := &countdown{left: 2}
		start := time.Now()
		l.Run(c)
		if n := h.calls.Load(); n != 2 {
			t.Errorf("%d receives, want 2", n)
		}
		// Two receives cut off, with a backoff between them.
		if d, least := time.Since(start), 2*(20*time.Second+callbound.Timeout); d < least || d > least+time.Minute {
			t.Errorf("two hung receives took %v, want each cut off after %v", d, 20*time.Second+callbound.Timeout)
		}
	})
}
