package bench

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go/middleware"

	"github.com/tempqueues/tempqueues/internal/batch"
	"github.com/tempqueues/tempqueues/internal/callcount"
	"github.com/tempqueues/tempqueues/internal/payload"
	"github.com/tempqueues/tempqueues/internal/testkit/testtime"
	"github.com/tempqueues/tempqueues/internal/wire"
	"github.com/tempqueues/tempqueues/sqsapi"
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

// TestLargeBodiesThroughTheStore runs the contenders with a payload store
// on sqstest with bodies over SQS's maximum, both shapes: every RPC
// answered byte for byte, the store called as each design says (the
// extended client: a Put, a Get and a Delete per message over 256 KiB),
// the extended clients' pointers on the wire, and no object left after
// close.
func TestLargeBodiesThroughTheStore(t *testing.T) {
	srv := sqstest.NewServer()
	t.Cleanup(func() { _ = srv.Close(context.Background()) })
	ctx := context.Background()
	for _, name := range []string{ExtendedClient, TempQueuesNoCompression, TempQueues} {
		for _, shape := range []string{ShapeEcho, ShapeReply} {
			t.Run(name+"/"+shape, func(t *testing.T) {
				cfg := &Config{Concurrency: []int{2}}
				cfg.setDefaults()
				store := newMemStore(0)
				e := &env{cfg: cfg, prefix: "t-", stores: map[string]*memStore{name: store}}
				var pointers atomic.Int64
				client := srv.Client(func(o *sqs.Options) {
					o.APIOptions = append(slices.Clone(o.APIOptions), func(st *middleware.Stack) error {
						return st.Initialize.Add(middleware.InitializeMiddlewareFunc("pointers", func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
							if in, ok := in.Parameters.(*sqs.SendMessageInput); ok && strings.HasPrefix(aws.ToString(in.MessageBody), `["`+payload.PointerClass) {
								pointers.Add(1)
							}
							return next.HandleInitialize(ctx, in)
						}), middleware.After)
					})
				})
				c := newContender(name, e, client)
				if err := c.setup(ctx); err != nil {
					t.Fatal(err)
				}
				p := Payload{Kind: PayloadBinary, Bytes: 1 << 20} // 1.4 MB in base64: fits in no message
				if shape == ShapeReply {
					p.Shape = ShapeReply
				}
				e.usePayload(p, 2)
				w := window(ctx, c, 2, 200*time.Millisecond, 20*time.Second)
				e.usePayload(Payload{}, 0)
				if err := c.close(ctx); err != nil {
					t.Fatal(err)
				}
				rpcs := int64(len(w.lat))
				if w.errors != 0 || rpcs < 2 {
					t.Fatalf("%d RPCs, %d errors, first %v", rpcs, w.errors, w.firstErr)
				}
				messages := 2 * rpcs // through the store: the request and the reply
				if shape == ShapeReply {
					messages = rpcs
				}
				calls := store.tally().calls
				if calls["Put"] != messages || calls["Get"] != messages || calls["Delete"] != messages {
					t.Errorf("store calls %v for %d RPCs: want a Put, a Get and a Delete per message through it, %d", calls, rpcs, messages)
				}
				if name == ExtendedClient && pointers.Load() != messages {
					t.Errorf("%d pointers sent for %d messages through the store", pointers.Load(), messages)
				}
				if n := store.left(); n != 0 {
					t.Errorf("%d objects left after close", n)
				}
			})
		}
	}
}

// TestMemStore checks the in-memory S3: objects round-trip as copies, a
// missing one is ErrPayloadNotFound, calls and bytes are counted, and a
// call waits its latency, cut short by its context.
func TestMemStore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newMemStore(20 * time.Millisecond)
		ctx := context.Background()
		body := []byte("large")
		start := time.Now()
		bucket, err := s.Put(ctx, "k", body)
		if err != nil || bucket != benchBucket {
			t.Fatalf("Put: %q, %v", bucket, err)
		}
		if d := time.Since(start); d != 20*time.Millisecond {
			t.Errorf("Put took %v, want the store's latency", d)
		}
		body[0] = 'L'
		if got, err := s.Get(ctx, bucket, "k"); err != nil || string(got) != "large" {
			t.Errorf("Get: %q, %v", got, err)
		}
		if err := s.Delete(ctx, bucket, "k"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Get(ctx, bucket, "k"); !errors.Is(err, sqsapi.ErrPayloadNotFound) {
			t.Errorf("Get after Delete: %v", err)
		}
		if got := s.tally(); got.calls["Put"] != 1 || got.calls["Get"] != 2 || got.calls["Delete"] != 1 || got.bytes != 10 {
			t.Errorf("tally %+v", got)
		}
		cctx, cancel := context.WithTimeout(ctx, 5*time.Millisecond)
		defer cancel()
		if _, err := s.Put(cctx, "k2", body); !errors.Is(err, context.DeadlineExceeded) || s.left() != 0 {
			t.Errorf("Put past its deadline: %v, %d objects", err, s.left())
		}
		if dollars := s3Dollars(map[string]int64{"Put": 2, "Get": 10, "Delete": 3}); dollars != 14 {
			t.Errorf("S3 dollars per million: %v, want 14", dollars)
		}
	})
}

// TestPolicyContenders runs tempqueues under each send policy the bench
// compares on sqstest: every RPC answered, and the policy reaches both
// sides, the requester's sends and the responder's (a key's policy is made
// for the request queue by the one and for the host queue by the other).
func TestPolicyContenders(t *testing.T) {
	srv := sqstest.NewServer()
	t.Cleanup(func() { _ = srv.Close(context.Background()) })
	ctx := context.Background()
	for _, name := range PolicyContenders {
		t.Run(name, func(t *testing.T) {
			cfg := &Config{Concurrency: []int{8}}
			cfg.setDefaults()
			e := &env{cfg: cfg, prefix: "t-", stores: map[string]*memStore{name: newMemStore(0)}}
			tq, ok := newContender(name, e, srv.Client()).(*tempQueues)
			if !ok || tq.policy.new == nil || tq.name() != name {
				t.Fatalf("contender %q: %#v, want tempqueues under a send policy of that name", name, tq)
			}
			var keys atomic.Int64
			made := tq.policy.new
			tq.policy.new = func() batch.Policy { keys.Add(1); return made() }
			if err := tq.setup(ctx); err != nil {
				t.Fatal(err)
			}
			w := window(ctx, tq, 8, 200*time.Millisecond, 20*time.Second)
			if err := tq.close(ctx); err != nil {
				t.Fatal(err)
			}
			if w.errors != 0 || len(w.lat) < 8 {
				t.Fatalf("%d RPCs, %d errors, first %v", len(w.lat), w.errors, w.firstErr)
			}
			if n := keys.Load(); n < 2 {
				t.Errorf("the policy was made for %d keys, want one on each side at least", n)
			}
		})
	}
}
