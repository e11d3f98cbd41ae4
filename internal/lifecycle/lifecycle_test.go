package lifecycle

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

func TestOnceRunsStopOnceAndLaterCallersWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var o Once
		release := make(chan struct{})
		stopErr := errors.New("stop failed")
		runs := 0
		first := make(chan error, 1)
		go func() {
			first <- o.Do(context.Background(), func() error { runs++; <-release; return stopErr })
		}()
		synctest.Wait()
		if !o.Started() {
			t.Fatal("Started is false while the first stop runs")
		}
		// A later caller whose context ends first returns then.
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if err := o.Do(ctx, func() error { runs++; return nil }); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("a later caller's Do = %v, want its deadline", err)
		}
		later := make(chan error, 1)
		go func() { later <- o.Do(context.Background(), func() error { runs++; return nil }) }()
		close(release)
		if err, err2 := <-first, <-later; err != stopErr || err2 != stopErr {
			t.Errorf("Do = %v and %v, want the first stop's error for both", err, err2)
		}
		if runs != 1 {
			t.Errorf("stop ran %d times, want once", runs)
		}
	})
}

// TestAPanickingStopBlocksNobody: the first caller's panic goes on, and
// the next caller gets an error at once instead of waiting forever.
func TestAPanickingStopBlocksNobody(t *testing.T) {
	var o Once
	func() {
		defer func() {
			if p := recover(); p != "boom" {
				t.Errorf("the first caller recovered %v, want the stop's panic", p)
			}
		}()
		_ = o.Do(context.Background(), func() error { panic("boom") })
	}()
	err := o.Do(context.Background(), func() error { return nil })
	if !errors.Is(err, ErrStopPanicked) {
		t.Errorf("the next caller got %v, want ErrStopPanicked", err)
	}
}

func TestWaitHonoursItsContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var wg sync.WaitGroup
		wg.Add(1)
		release := make(chan struct{})
		go func() { defer wg.Done(); <-release }()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		start := time.Now()
		if err := Wait(ctx, &wg); !errors.Is(err, context.DeadlineExceeded) || time.Since(start) != time.Second {
			t.Errorf("Wait = %v after %v, want its deadline after 1s", err, time.Since(start))
		}
		close(release)
		if err := Wait(context.Background(), &wg); err != nil {
			t.Errorf("Wait once the goroutine ended = %v", err)
		}
	})
}
