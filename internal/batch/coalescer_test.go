package batch

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// recorder is a batch Func that records call sizes and can be held.
type recorder struct {
	mu    sync.Mutex
	sizes []int
	hold  chan struct{} // when non-nil, each call waits on it
	fail  error
}

func (r *recorder) fn(ctx context.Context, key string, es []int) ([]Result[int], error) {
	r.mu.Lock()
	r.sizes = append(r.sizes, len(es))
	hold := r.hold
	r.mu.Unlock()
	if hold != nil {
		<-hold
	}
	if r.fail != nil {
		return nil, r.fail
	}
	res := make([]Result[int], len(es))
	for i, e := range es {
		if e < 0 {
			res[i].Err = errors.New("negative")
			continue
		}
		res[i].Value = e * 2
	}
	return res, nil
}

func (r *recorder) calls() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]int(nil), r.sizes...)
}

func TestLoneEntryIsNotDelayed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := &recorder{}
		c := New(r.fn, Options[int]{})
		defer c.Close(context.Background())
		start := time.Now()
		v, err := c.Do(context.Background(), "q", 21)
		if err != nil || v != 42 {
			t.Fatalf("Do = %v, %v", v, err)
		}
		// The bubble's clock moves only when everything waits on it: any
		// wait for company would show here.
		if d := time.Since(start); d != 0 {
			t.Fatalf("lone entry took %v; it must be flushed at once", d)
		}
		if got := r.calls(); len(got) != 1 || got[0] != 1 {
			t.Fatalf("calls = %v, want [1]", got)
		}
	})
}

func TestEntriesCoalesceWhileACallIsInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := &recorder{hold: make(chan struct{})}
		c := New(r.fn, Options[int]{MaxInFlight: 2})
		var wg sync.WaitGroup
		var sum atomic.Int64
		submit := func(v int) {
			wg.Add(1)
			c.Submit("q", v, func(got int, err error) {
				if err != nil {
					t.Errorf("entry %d: %v", v, err)
				}
				sum.Add(int64(got))
				wg.Done()
			})
		}
		submit(1) // starts call 1 at once, which is held
		synctest.Wait()
		if len(r.calls()) != 1 {
			t.Fatalf("calls = %v after a lone entry, want its call started", r.calls())
		}
		for i := 2; i <= 26; i++ {
			submit(i)
		}
		// 25 entries wait: one full batch of 10 may start (second slot), the rest
		// wait for a call to end.
		close(r.hold)
		wg.Wait()
		if want := int64(26 * 27); sum.Load() != want {
			t.Fatalf("sum = %d, want %d", sum.Load(), want)
		}
		sizes := r.calls()
		total := 0
		for _, s := range sizes {
			if s > 10 {
				t.Fatalf("batch of %d entries", s)
			}
			total += s
		}
		if total != 26 || len(sizes) > 5 {
			t.Fatalf("calls = %v: want 26 entries in at most 5 calls", sizes)
		}
		if sizes[0] != 1 || sizes[1] != 10 {
			t.Fatalf("calls = %v: want the lone first entry, then a full batch in the second slot", sizes)
		}
		c.Close(context.Background())
	})
}

func TestPerEntryAndWholeCallErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := &recorder{}
		c := New(r.fn, Options[int]{})
		if _, err := c.Do(context.Background(), "q", -1); err == nil || err.Error() != "negative" {
			t.Fatalf("per-entry error = %v", err)
		}
		r.fail = errors.New("boom")
		if _, err := c.Do(context.Background(), "q", 1); err == nil || err.Error() != "boom" {
			t.Fatalf("whole-call error = %v", err)
		}
		c.Close(context.Background())
	})
}

func TestByteLimitSplitsBatches(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := &recorder{hold: make(chan struct{})}
		c := New(r.fn, Options[int]{MaxBytes: 100, Size: func(int) int { return 40 }, MaxInFlight: 1})
		var wg sync.WaitGroup
		for i := 0; i < 7; i++ {
			wg.Add(1)
			c.Submit("q", i, func(int, error) { wg.Done() })
		}
		close(r.hold)
		wg.Wait()
		total := 0
		for _, s := range r.calls() {
			if s*40 > 100 && s > 1 {
				t.Fatalf("calls = %v exceed the byte limit", r.calls())
			}
			total += s
		}
		// Two entries fit in 100 bytes, so the 7 go in 4 calls, not one each:
		// the byte limit splits batches without ending batching.
		if total != 7 || len(r.calls()) != 4 {
			t.Fatalf("calls = %v: want 7 entries in 4 calls of at most 2", r.calls())
		}
		c.Close(context.Background())
	})
}

func TestCloseFlushesAndRefuses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := &recorder{hold: make(chan struct{})}
		c := New(r.fn, Options[int]{})
		var done atomic.Int32
		for i := 0; i < 5; i++ {
			c.Submit("q", i, func(int, error) { done.Add(1) })
		}
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		if err := c.Close(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Close with held calls = %v, want deadline exceeded", err)
		}
		cancel()
		close(r.hold)
		if err := c.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		if done.Load() != 5 {
			t.Fatalf("%d of 5 entries answered after Close", done.Load())
		}
		if _, err := c.Do(context.Background(), "q", 1); !errors.Is(err, ErrClosed) {
			t.Fatalf("Do after Close = %v, want ErrClosed", err)
		}
		if c.Pending() != 0 {
			t.Fatal("pending entries after Close")
		}
	})
}

func TestKeysAreIndependent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := &recorder{hold: make(chan struct{})}
		c := New(r.fn, Options[int]{})
		var wg sync.WaitGroup
		for _, k := range []string{"a", "b", "c"} {
			wg.Add(1)
			c.Submit(k, 1, func(int, error) { wg.Done() })
		}
		// Each key gets its own immediate call even though all are held.
		synctest.Wait()
		if n := len(r.calls()); n != 3 {
			t.Fatalf("%d calls started for 3 keys, want 3", n)
		}
		close(r.hold)
		wg.Wait()
		c.Close(context.Background())
	})
}

func TestDoAllSharesBatchCalls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := &recorder{}
		c := New(r.fn, Options[int]{})
		defer c.Close(context.Background())
		entries := []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, -1}
		res := c.DoAll(context.Background(), "q", entries)
		for i, e := range entries {
			if e < 0 {
				if res[i].Err == nil {
					t.Errorf("entry %d: no error", i)
				}
				continue
			}
			if res[i].Err != nil || res[i].Value != 2*e {
				t.Errorf("entry %d = %+v", i, res[i])
			}
		}
		if got := r.calls(); len(got) != 2 || got[0] != 10 || got[1] != 3 {
			t.Fatalf("call sizes %v, want [10 3]", got)
		}
		if err := c.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		res = c.DoAll(context.Background(), "q", []int{1, 2})
		if !errors.Is(res[0].Err, ErrClosed) || !errors.Is(res[1].Err, ErrClosed) {
			t.Fatalf("after Close: %+v", res)
		}
	})
}

func TestLingerWaitsForCompanyThenGoes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := &recorder{}
		c := New(r.fn, Options[int]{Linger: 30 * time.Millisecond})
		defer c.Close(context.Background())
		got := make(chan int, 3)
		start := time.Now()
		for i := range 3 {
			c.Submit("q", i, func(v int, err error) {
				if err != nil {
					t.Error(err)
				}
				got <- v
			})
		}
		for range 3 {
			select {
			case <-got:
			case <-time.After(5 * time.Second):
				t.Fatal("lingering entries were never sent")
			}
		}
		if calls := r.calls(); len(calls) != 1 || calls[0] != 3 {
			t.Fatalf("calls %v, want one call of 3 entries", calls)
		}
		if d := time.Since(start); d != 30*time.Millisecond {
			t.Fatalf("the entries went after %v, want the linger of 30ms", d)
		}
	})
}

func TestLingerNeverDelaysAFullBatchACallerFlushOrClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := &recorder{}
		c := New(r.fn, Options[int]{Linger: time.Hour})
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()

		// A full batch goes at once.
		var sent sync.WaitGroup
		sent.Add(10)
		for i := range 10 {
			c.Submit("full", i, func(int, error) { sent.Done() })
		}
		sent.Wait()

		// A waiting caller takes the lingering entries along.
		var lingered atomic.Bool
		c.Submit("q", 1, func(int, error) { lingered.Store(true) })
		if n := c.Pending(); n != 1 {
			t.Fatalf("%d pending, want the lingering entry", n)
		}
		if v, err := c.Do(ctx, "q", 2); err != nil || v != 4 {
			t.Fatalf("Do = %v, %v", v, err)
		}
		if !lingered.Load() {
			t.Error("the lingering entry did not ride with the caller's")
		}

		// Flush and Close send what lingers.
		c.Submit("a", 3, nil)
		if err := c.Flush(ctx); err != nil {
			t.Fatalf("Flush: %v", err)
		}
		c.Submit("b", 4, nil)
		if err := c.Close(ctx); err != nil {
			t.Fatalf("Close: %v", err)
		}
		if calls := r.calls(); len(calls) != 4 || calls[0] != 10 || calls[1] != 2 || calls[2] != 1 || calls[3] != 1 {
			t.Fatalf("calls %v, want [10 2 1 1]", calls)
		}
	})
}

// TestFlushWaitsOnlyForEntriesSubmittedBeforeIt checks that entries
// submitted after Flush began, on another key or on the same one, cannot
// keep it waiting: under steady traffic it would never return.
func TestFlushWaitsOnlyForEntriesSubmittedBeforeIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		early, late := make(chan struct{}), make(chan struct{})
		c := New(func(_ context.Context, _ string, es []int) ([]Result[int], error) {
			if es[0] >= 100 {
				<-late
			} else {
				<-early
			}
			return make([]Result[int], len(es)), nil
		}, Options[int]{})
		defer func() {
			close(late)
			if err := c.Close(context.Background()); err != nil {
				t.Error(err)
			}
		}()
		var answered atomic.Int32
		c.Submit("a", 1, func(int, error) { answered.Add(1) })
		flushed := make(chan error, 1)
		go func() { flushed <- c.Flush(context.Background()) }()
		synctest.Wait()
		c.mu.Lock()
		started := c.epoch == 1
		c.mu.Unlock()
		if !started {
			t.Fatal("Flush did not start")
		}
		c.Submit("b", 100, nil) // another key: its call starts and is held
		c.Submit("a", 101, nil) // the same key: rides the call after the held one
		synctest.Wait()
		select {
		case err := <-flushed:
			t.Fatalf("Flush returned (%v) before the entry submitted before it was answered", err)
		default:
		}
		close(early)
		select {
		case err := <-flushed:
			if err != nil {
				t.Fatalf("Flush = %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("Flush still waits for entries submitted after it began")
		}
		if n := answered.Load(); n != 1 {
			t.Fatalf("%d answers for the entry before Flush, want 1", n)
		}
	})
}

// An entry with a long wait shares the call of a later one with a short
// wait: the batch goes when the earliest wait ends, not the first entry's.
func TestSubmitWithinGoesAtTheEarliestDue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := &recorder{}
		c := New(r.fn, Options[int]{})
		defer c.Close(context.Background())
		done := make(chan int, 2)
		start := time.Now()
		c.SubmitWithin("q", 1, time.Hour, func(v int, err error) { done <- v })
		c.SubmitWithin("q", 2, 20*time.Millisecond, func(v int, err error) { done <- v })
		for range 2 {
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("the batch did not go when its earliest entry was due")
			}
		}
		if got := r.calls(); len(got) != 1 || got[0] != 2 {
			t.Fatalf("calls = %v, want one call of 2", got)
		}
		if d := time.Since(start); d != 20*time.Millisecond {
			t.Fatalf("the batch went after %v, want the earliest wait of 20ms", d)
		}
	})
}

// Lingering entries go out on Flush without waiting for their due time.
func TestSubmitWithinFlushes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := &recorder{}
		c := New(r.fn, Options[int]{})
		defer c.Close(context.Background())
		var got atomic.Int64
		c.SubmitWithin("q", 5, time.Hour, func(v int, err error) { got.Store(int64(v)) })
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := c.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		if got.Load() != 10 {
			t.Fatalf("result %d after Flush, want 10", got.Load())
		}
	})
}

func TestDeleteWithin(t *testing.T) {
	for _, tc := range []struct{ left, want time.Duration }{
		{0, DeleteLinger},
		{50 * time.Millisecond, DeleteLinger},
		{5 * time.Second, 500 * time.Millisecond},
		{30 * time.Second, 2 * time.Second},
	} {
		if got := DeleteWithin(tc.left); got != tc.want {
			t.Errorf("DeleteWithin(%v) = %v, want %v", tc.left, got, tc.want)
		}
	}
}
