package batch

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tempqueues/tempqueues/internal/callbound"
)

// hangs is a batch Func whose calls on key "hung" never end on their own,
// as over a connection that stopped answering: only their context ends
// them. Calls on other keys succeed at once.
type hangs struct{ hung, done atomic.Int32 }

func (h *hangs) fn(ctx context.Context, key string, es []int) ([]Result[int], error) {
	if key == "hung" && h.hung.Add(1) <= 2 {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	h.done.Add(1)
	return make([]Result[int], len(es)), nil
}

// TestAHungCallStallsNothing hangs both of a key's call slots: other keys
// go on at once, the key's later entries go once the calls' bound
// (callbound.Timeout) ends them, and a Close whose context ends while a
// call hangs returns by its deadline and says what it abandoned.
func TestAHungCallStallsNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := &hangs{}
		c := New(h.fn, Options[int]{MaxInFlight: 2})
		start := time.Now()
		first := make(chan error, 2)
		for range 2 {
			c.SubmitUrgent("hung", 1, func(_ int, err error) { first <- err })
			synctest.Wait()
		}
		if n := h.hung.Load(); n != 2 {
			t.Fatalf("%d calls hang, want both slots taken", n)
		}
		if _, err := c.Do(context.Background(), "other", 1); err != nil || time.Since(start) != 0 {
			t.Fatalf("another key's entry: %v after %v, want it sent at once", err, time.Since(start))
		}
		if _, err := c.Do(context.Background(), "hung", 2); err != nil {
			t.Fatalf("a later entry of the hung key: %v", err)
		}
		if waited := time.Since(start); waited != callbound.Timeout {
			t.Errorf("the later entry waited %v, want the calls' bound %v", waited, callbound.Timeout)
		}
		for range 2 {
			if err := <-first; !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("an entry of a hung call got %v, want its deadline", err)
			}
		}

		// A Close whose context ends while a call hangs returns then.
		h.hung.Store(1) // one more call hangs
		abandoned := make(chan error, 1)
		c.Submit("hung", 3, func(_ int, err error) { abandoned <- err })
		synctest.Wait()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		closing := time.Now()
		err := c.Close(ctx)
		if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "1 entry abandoned") {
			t.Errorf("Close = %v, want its deadline and one entry abandoned", err)
		}
		if d := time.Since(closing); d != time.Second {
			t.Errorf("Close took %v, want its context's 1s", d)
		}
		if err := <-abandoned; err == nil {
			t.Error("the abandoned entry was answered without an error")
		}
		synctest.Wait() // the hung call's goroutine ended: the bubble would not end otherwise
	})
}
