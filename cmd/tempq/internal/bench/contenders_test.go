package bench

import (
	"context"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/tempqueues/tempqueues/internal/callcount"
	"github.com/tempqueues/tempqueues/sqstest"
)

// TestStaticReplyQueue runs the hand-written static reply queue on sqstest:
// every RPC answered, deletes only in batches on both queues, no reply
// poller while nobody waits, and every goroutine gone after close.
func TestStaticReplyQueue(t *testing.T) {
	srv := sqstest.NewServer()
	t.Cleanup(func() { _ = srv.Close(context.Background()) })
	before := runtime.NumGoroutine()
	counter := new(callcount.Counter)
	cfg := &Config{Concurrency: []int{1, 16}}
	cfg.setDefaults()
	s := &staticReply{env: &env{cfg: cfg, prefix: "t-"}, client: srv.Client(func(o *sqs.Options) {
		o.APIOptions = append(slices.Clone(o.APIOptions), counter.Register)
	})}
	ctx := context.Background()
	if err := s.setup(ctx); err != nil {
		t.Fatal(err)
	}
	for _, conc := range cfg.Concurrency {
		w := window(ctx, s, conc, 300*time.Millisecond, 10*time.Second)
		if w.errors != 0 || len(w.lat) < conc {
			t.Fatalf("%d callers: %d RPCs, %d errors, first %v", conc, len(w.lat), w.errors, w.firstErr)
		}
		s.mu.Lock()
		waiting, pollers := len(s.waiting), s.pollers
		s.mu.Unlock()
		if waiting != 0 || pollers > replyPollers {
			t.Errorf("%d callers: after the window %d callers waiting, %d reply pollers", conc, waiting, pollers)
		}
	}
	if err := s.close(ctx); err != nil {
		t.Fatal(err)
	}
	calls := counter.Snapshot()
	if calls["DeleteMessage"] != 0 || calls["DeleteMessageBatch"] == 0 {
		t.Errorf("calls %v: want deletes in batches only", calls)
	}
	// Each RPC's two messages are deleted: a batch per ten at most, and
	// close flushes the rest, so about a fifth of a call per RPC.
	rpcs := calls["SendMessage"] / 2
	if got := calls["DeleteMessageBatch"]; got*10 < rpcs*2 || got > rpcs {
		t.Errorf("%d DeleteMessageBatch calls for %d RPCs", got, rpcs)
	}
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		t.Errorf("%d goroutines after close, %d before setup", n, before)
	}
}
