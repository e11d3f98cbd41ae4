package consume

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
	"github.com/aws/smithy-go"

	"github.com/tempqueues/tempqueues/internal/testkit/testtime"
)

// runAlone runs the engine in batch mode until it stops by itself, which
// it must do within a bound.
func (g *rig) runAlone(t *testing.T, h BatchHandler) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- RunBatch(context.Background(), g.cfg, h) }()
	select {
	case err := <-done:
		return err
	case <-time.After(30 * time.Second):
		t.Fatal("the run did not stop by itself")
		return nil
	}
}

// TestBatchHandlesEachReceiveBeforeTheNext checks the batch mode with one
// poller: each receive's messages go to one handler call, no two calls
// overlap nor does a receive go while one runs, each is carried out, and StopWhenEmpty ends the run when the
// queue is drained.
func TestBatchHandlesEachReceiveBeforeTheNext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newRig(t, 30*time.Second)
		g.cfg.MaxPollers, g.cfg.MaxConcurrency, g.cfg.StopWhenEmpty = 1, 10, true
		for i := range 25 {
			g.send(t, fmt.Sprint("m", i))
		}
		var running, overlaps, early atomic.Int32
		g.cfg.Pace = func(context.Context) error {
			if running.Load() > 0 {
				early.Add(1) // a receive about to go while a batch runs
			}
			return nil
		}
		var mu sync.Mutex
		var sizes []int
		seen := map[string]int{}
		err := g.runAlone(t, func(_ context.Context, ds []*Delivery) []Outcome {
			if running.Add(1) > 1 {
				overlaps.Add(1)
			}
			defer running.Add(-1)
			testtime.Pause(50 * time.Millisecond) // room for a receive that should not come
			mu.Lock()
			defer mu.Unlock()
			sizes = append(sizes, len(ds))
			outs := make([]Outcome, len(ds))
			for i, d := range ds {
				seen[aws.ToString(d.Message.Body)]++
				outs[i] = Outcome{Action: Delete}
			}
			return outs
		})
		if err != nil {
			t.Fatal(err)
		}
		if overlaps.Load() != 0 || early.Load() != 0 {
			t.Errorf("%d batches ran while another did, %d receives went while a batch ran", overlaps.Load(), early.Load())
		}
		total := 0
		for _, n := range sizes {
			if n < 1 || n > 10 {
				t.Errorf("a batch of %d", n)
			}
			total += n
		}
		if total != 25 || len(seen) != 25 {
			t.Errorf("batches %v handled %d messages, %d distinct; want 25", sizes, total, len(seen))
		}
		if v, f := g.depth(t); v != "0" || f != "0" {
			t.Errorf("queue: %s visible, %s in flight; want empty", v, f)
		}
		n := g.cfg.Counters
		if n.Deleted.Load() != 25 || n.EmptyReceives.Load() != 1 || n.Receives.Load() != int64(len(sizes))+1 {
			t.Errorf("counters: deleted %d, receives %d (%d empty) for %d batches; want 25 deleted and one empty receive after the batches",
				n.Deleted.Load(), n.Receives.Load(), n.EmptyReceives.Load(), len(sizes))
		}
	})
}

// TestBatchPollersShareSlots checks the batch mode with several pollers
// and slots for one and a half receives: each batch waits for its 10 slots
// (no more messages run at once than MaxConcurrency), and two pollers
// waiting together cannot each hold a part and wait for ever.
func TestBatchPollersShareSlots(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newRig(t, 30*time.Second)
		g.cfg.MaxPollers, g.cfg.MaxConcurrency, g.cfg.StopWhenEmpty = 3, 15, true
		const total = 60
		for i := range total {
			g.send(t, fmt.Sprint("m", i))
		}
		var running, most, handled atomic.Int32
		err := g.runAlone(t, func(_ context.Context, ds []*Delivery) []Outcome {
			n := running.Add(int32(len(ds)))
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			testtime.Pause(20 * time.Millisecond)
			running.Add(-int32(len(ds)))
			handled.Add(int32(len(ds)))
			outs := make([]Outcome, len(ds))
			for i := range outs {
				outs[i] = Outcome{Action: Delete}
			}
			return outs
		})
		if err != nil {
			t.Fatal(err)
		}
		if handled.Load() != total || most.Load() > 15 {
			t.Errorf("handled %d of %d, at most %d at once; want all, at most 15", handled.Load(), total, most.Load())
		}
	})
}

// TestHoldReleasesAtTheEnd checks that held messages stay hidden for the
// rest of the run, so each is handled once, and are visible again when it
// ends.
func TestHoldReleasesAtTheEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newRig(t, 60*time.Second)
		g.cfg.MaxPollers, g.cfg.MaxConcurrency, g.cfg.StopWhenEmpty = 1, 10, true
		g.send(t, "a", "b", "c")
		var handled atomic.Int32
		err := g.runAlone(t, func(_ context.Context, ds []*Delivery) []Outcome {
			handled.Add(int32(len(ds)))
			outs := make([]Outcome, len(ds))
			for i := range outs {
				outs[i].Action = Hold
			}
			return outs
		})
		if err != nil {
			t.Fatal(err)
		}
		if n := handled.Load(); n != 3 {
			t.Errorf("%d messages handled, want each of 3 once", n)
		}
		if v, f := g.depth(t); v != "3" || f != "0" {
			t.Errorf("queue: %s visible, %s in flight; want the 3 held messages visible", v, f)
		}
		if n := g.cfg.Counters.Released.Load(); n != 3 {
			t.Errorf("%d released, want 3", n)
		}
	})
}

// TestPaceWaitsBeforeEachReceive checks that Pace runs before every
// receive, and that a stop ends its wait and the run.
func TestPaceWaitsBeforeEachReceive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newRig(t, 30*time.Second)
		var paces atomic.Int32
		waiting := make(chan struct{})
		g.cfg.Pace = func(ctx context.Context) error {
			if paces.Add(1) < 3 {
				return nil
			}
			close(waiting)
			<-ctx.Done()
			return ctx.Err()
		}
		stop := g.run(func(context.Context, *Delivery) Outcome { return Outcome{} })
		select {
		case <-waiting:
		case <-time.After(20 * time.Second):
			t.Fatal("Pace was not called before a third receive")
		}
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		if n := g.cfg.Counters.Receives.Load(); n != 2 {
			t.Errorf("%d receives after 3 paces, the last stopped; want 2", n)
		}
	})
}

// deniedClient fails every receive with a non-transient error.
type deniedClient struct{ *sqs.Client }

func (deniedClient) ReceiveMessage(context.Context, *sqs.ReceiveMessageInput, ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	return nil, &smithy.GenericAPIError{Code: "AccessDenied", Message: "denied", Fault: smithy.FaultClient}
}

// TestGiveUpEndsTheRun checks that a failed receive GiveUp accepts ends
// the run with its error, and that those before it were retried.
func TestGiveUpEndsTheRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newRig(t, 30*time.Second)
		g.cfg.Client = deniedClient{g.client}
		g.cfg.GiveUp = func(err error, transient bool, failures int) bool { return !transient && failures >= 3 }
		done := make(chan error, 1)
		go func() {
			done <- Run(context.Background(), g.cfg, func(context.Context, *Delivery) Outcome { return Outcome{} })
		}()
		var res error
		select {
		case res = <-done:
		case <-time.After(20 * time.Second):
			t.Fatal("the run did not give up")
		}
		var api smithy.APIError
		if !errors.As(res, &api) || api.ErrorCode() != "AccessDenied" {
			t.Fatalf("Run = %v, want the receive's AccessDenied", res)
		}
		if n := g.cfg.Counters.ReceiveErrors.Load(); n != 2 {
			t.Errorf("%d receive errors retried before giving up, want 2", n)
		}
	})
}
