package bench

import (
	"context"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/internal/callcount"
	"github.com/tempqueues/tempqueues/internal/testkit/testtime"
	"github.com/tempqueues/tempqueues/internal/wire"
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
	testtime.Until(5*time.Second, func() bool { return runtime.NumGoroutine() <= before })
	if n := runtime.NumGoroutine(); n > before {
		t.Errorf("%d goroutines after close, %d before setup", n, before)
	}
}

// TestParkedReceivers runs the parked-receivers contender on sqstest:
// every RPC answered, one receive per caller on the reply queue, one
// message per receive, deletes one at a time (a stray reply's too), no
// batch call, and every goroutine gone after close.
func TestParkedReceivers(t *testing.T) {
	srv := sqstest.NewServer()
	t.Cleanup(func() { _ = srv.Close(context.Background()) })
	before := runtime.NumGoroutine()
	counter := new(callcount.Counter)
	cfg := &Config{Concurrency: []int{1, 16}}
	cfg.setDefaults()
	p := &parkedReceivers{env: &env{cfg: cfg, prefix: "t-"}, client: srv.Client(func(o *sqs.Options) {
		o.APIOptions = append(slices.Clone(o.APIOptions), counter.Register)
	})}
	ctx := context.Background()
	if err := p.setup(ctx); err != nil {
		t.Fatal(err)
	}
	var rpcs int64
	for _, conc := range cfg.Concurrency {
		w := window(ctx, p, conc, 300*time.Millisecond, 10*time.Second)
		if w.errors != 0 || len(w.lat) < conc {
			t.Fatalf("%d callers: %d RPCs, %d errors, first %v", conc, len(w.lat), w.errors, w.firstErr)
		}
		rpcs += int64(len(w.lat))
		p.mu.Lock()
		waiting, receivers := len(p.waiting), p.receivers
		p.mu.Unlock()
		if waiting != 0 || receivers != conc {
			t.Errorf("%d callers: after the window %d callers waiting, %d receivers", conc, waiting, receivers)
		}
	}
	// A reply whose caller has gone (late, or sent twice) is deleted too.
	if _, err := p.client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &p.replyURL, MessageBody: aws.String("late"),
		MessageAttributes: map[string]types.MessageAttributeValue{correlationIDAttribute: wire.StringAttribute("gone")}}); err != nil {
		t.Fatal(err)
	}
	testtime.Until(10*time.Second, func() bool { return counter.Get("DeleteMessage") >= 2*rpcs+1 })
	if err := p.close(ctx); err != nil {
		t.Fatal(err)
	}
	calls := counter.Snapshot()
	if calls["DeleteMessage"] != 2*rpcs+1 || calls["SendMessage"] != 2*rpcs+1 {
		t.Errorf("calls %v for %d RPCs and a stray reply: want two sends and two deletes per RPC, one more of each for the stray", calls, rpcs)
	}
	for op := range calls {
		if strings.HasSuffix(op, "Batch") {
			t.Errorf("calls %v: a batch call", calls)
		}
	}
	testtime.Until(5*time.Second, func() bool { return runtime.NumGoroutine() <= before })
	if n := runtime.NumGoroutine(); n > before {
		t.Errorf("%d goroutines after close, %d before setup", n, before)
	}
}
