package responder

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"

	"github.com/tempqueues/tempqueues/internal/testkit/observetest"
	"github.com/tempqueues/tempqueues/internal/testkit/sqstestenv"
	"github.com/tempqueues/tempqueues/internal/testkit/testtime"
	"github.com/tempqueues/tempqueues/internal/wire"
	"github.com/tempqueues/tempqueues/observe"
	"github.com/tempqueues/tempqueues/sqsapi"
	"github.com/tempqueues/tempqueues/sqstest"
)

// waitFor is testtime.Eventually with the patience of the responder's
// tests (20 s).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testtime.Eventually(t, 20*time.Second, what, cond)
}

// TestRoundTripJavaWireFormat is the interop test: a raw-SDK requester
// speaking only the documented attributes, as the Java client does.
func TestRoundTripJavaWireFormat(t *testing.T) {
	t.Parallel()
	sqstestenv.Each(t, func(t *testing.T, be *sqstestenv.Backend) {
		t.Parallel()
		e := newEnv(t, be)
		host := e.replyQueue("host", nil)
		reqQ := e.queue("req", nil)
		r := newResponder(t, e.client, func(o *Options) { o.PollWaitTime = time.Second })
		var seen *Request
		var mu sync.Mutex
		serve(t, r, reqQ, HandlerFunc(func(_ context.Context, req *Request) (*Reply, error) {
			mu.Lock()
			seen = req
			mu.Unlock()
			return &Reply{Body: "re:" + req.Body(), Attributes: map[string]types.MessageAttributeValue{"Status": wire.StringAttribute("ok")}}, nil
		}))

		e.request(reqQ, "login alice", host+"#reply-1", "rid-1")
		got := e.replies(host, 1, 10*time.Second)
		if len(got) != 1 {
			t.Fatalf("got %d replies, want 1", len(got))
		}
		m := got[0]
		if aws.ToString(m.Body) != "re:login alice" || attr(m, sqsapi.VirtualQueueNameAttribute) != "reply-1" ||
			attr(m, sqsapi.CorrelationIDAttribute) != "rid-1" || attr(m, "Status") != "ok" {
			t.Fatalf("reply body %q attributes %v", aws.ToString(m.Body), m.MessageAttributes)
		}
		if dt := aws.ToString(m.MessageAttributes[sqsapi.VirtualQueueNameAttribute].DataType); dt != "String" {
			t.Errorf("routing attribute DataType %q, want String", dt)
		}
		mu.Lock()
		if seen.ID != "rid-1" || seen.ReceiveCount != 1 || seen.Message.Attributes["SentTimestamp"] == "" || !seen.ResponseRequested() {
			t.Errorf("request %+v: want id rid-1, receive count 1, system attributes", seen)
		}
		mu.Unlock()
		waitFor(t, "request deleted", func() bool { return r.stats.Deleted.Load() == 1 })
		if v, f := e.depth(reqQ); v != "0" || f != "0" {
			t.Errorf("request queue: %s visible, %s in flight", v, f)
		}
		// A Java requester sets no request id: the MessageId correlates.
		e.request(reqQ, "bob", host+"#reply-2", "")
		got = e.replies(host, 1, 10*time.Second)
		if len(got) != 1 || attr(got[0], sqsapi.CorrelationIDAttribute) == "" || attr(got[0], sqsapi.VirtualQueueNameAttribute) != "reply-2" {
			t.Fatalf("reply to a request without id: %v", got)
		}
	})
}

func TestPlainResponseQueueAndFireAndForget(t *testing.T) {
	t.Parallel()
	sqstestenv.Each(t, func(t *testing.T, be *sqstestenv.Backend) {
		t.Parallel()
		e := newEnv(t, be)
		replyQ := e.replyQueue("reply", nil)
		reqQ := e.queue("req", nil)
		var rec observetest.Recorder
		r := newResponder(t, e.client, func(o *Options) { o.PollWaitTime = time.Second; o.Observer = &rec })
		var runs atomic.Int32
		serve(t, r, reqQ, HandlerFunc(func(ctx context.Context, req *Request) (*Reply, error) {
			runs.Add(1)
			return echo(ctx, req)
		}))
		e.request(reqQ, "plain", replyQ, "rid-p")
		got := e.replies(replyQ, 1, 10*time.Second)
		if len(got) != 1 || aws.ToString(got[0].Body) != "re:plain" || attr(got[0], sqsapi.CorrelationIDAttribute) != "rid-p" {
			t.Fatalf("replies %v", got)
		}
		if _, routed := got[0].MessageAttributes[sqsapi.VirtualQueueNameAttribute]; routed {
			t.Error("reply to a plain queue carries the routing attribute")
		}
		// The reply can be received before the responder counts its send.
		waitFor(t, "the reply counted", func() bool { return replied(&rec) == 1 })
		e.request(reqQ, "fire", "", "rid-f")
		waitFor(t, "both requests deleted", func() bool { return r.stats.Deleted.Load() == 2 })
		if runs.Load() != 2 || replied(&rec) != 1 || rec.Count(observe.Reply, "") != 1 {
			t.Errorf("fire-and-forget: %d runs, %d replies", runs.Load(), replied(&rec)-1)
		}
	})
}

// TestManyConcurrentRequests answers 300 requests with 32 handlers at
// once. It runs in a bubble, where every call takes 10 ms of the bubble's
// clock: the send-batching policy coalesces by the latency it measures,
// and in a bubble calls otherwise take none.
func TestManyConcurrentRequests(t *testing.T) {
	t.Parallel()
	inBubble(t, func(t *testing.T, be *sqstestenv.Backend) {
		be.Server.InjectFault(sqstest.Latency("", 10*time.Millisecond, 0))
		e := newEnv(t, be)
		host := e.replyQueue("host", nil)
		reqQ := e.queue("req", nil)
		rc := newEnv(t, be) // the responder's own client and counter
		r := newResponder(t, rc.client, func(o *Options) { o.MaxConcurrency = 32; o.PollWaitTime = time.Second })
		const n = 300
		e.requests(reqQ, n, host)
		var maxPollers atomic.Int64
		serve(t, r, reqQ, HandlerFunc(func(ctx context.Context, req *Request) (*Reply, error) {
			if p := r.Stats().Pollers; p > maxPollers.Load() {
				maxPollers.Store(p) // racy max, good enough for a lower bound
			}
			testtime.Pause(5 * time.Millisecond) // the handler's work
			return echo(ctx, req)
		}))
		got := e.replies(host, n, 30*time.Second)
		seen := map[string]bool{}
		for _, m := range got {
			id := attr(m, sqsapi.CorrelationIDAttribute)
			var i int
			fmt.Sscanf(id, "id-%d", &i)
			if attr(m, sqsapi.VirtualQueueNameAttribute) != fmt.Sprintf("vq-%d", i) || aws.ToString(m.Body) != fmt.Sprintf("re:req-%d", i) {
				t.Fatalf("reply %q to %q routed to %q", aws.ToString(m.Body), id, attr(m, sqsapi.VirtualQueueNameAttribute))
			}
			seen[id] = true
		}
		if len(seen) != n {
			t.Fatalf("%d distinct replies, want %d", len(seen), n)
		}
		waitFor(t, "all deleted", func() bool { return r.stats.Deleted.Load() == n })
		calls := rc.counter.Snapshot()
		t.Logf("%d requests: %v (%.2f calls per request), up to %d pollers", n, calls, float64(rc.counter.Total())/n, maxPollers.Load())
		if maxPollers.Load() < 2 || maxPollers.Load() > 4 {
			t.Errorf("%d pollers under a backlog, want 2 to 4 (MaxConcurrency 32)", maxPollers.Load())
		}
		if calls["DeleteMessageBatch"] >= n/2 || calls["SendMessageBatch"] >= n {
			t.Errorf("deletes/sends did not coalesce: %v", calls)
		}
	})
}

func TestSlowHandlerKeptHiddenByExtensions(t *testing.T) {
	t.Parallel()
	inBubble(t, func(t *testing.T, be *sqstestenv.Backend) {
		e := newEnv(t, be)
		host := e.replyQueue("host", nil)
		reqQ := e.queue("req", map[string]string{"VisibilityTimeout": "1"})
		r := newResponder(t, e.client, func(o *Options) {
			o.VisibilityTimeout = time.Second
			o.PollWaitTime = time.Second
			o.MaxConcurrency = 4
		})
		var runs atomic.Int32
		serve(t, r, reqQ, HandlerFunc(func(ctx context.Context, req *Request) (*Reply, error) {
			runs.Add(1)
			select {
			case <-time.After(4 * time.Second): // four visibility timeouts
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			return echo(ctx, req)
		}))
		e.request(reqQ, "slow", host+"#vq", "rid-slow")
		got := e.replies(host, 1, 15*time.Second)
		if len(got) != 1 || runs.Load() != 1 {
			t.Fatalf("%d replies, %d handler runs; want 1 and 1 (the request was redelivered?)", len(got), runs.Load())
		}
		s := r.Stats()
		if r.stats.Extended.Load() < 3 || s.Received != 1 {
			t.Errorf("stats %+v: want at least 3 extensions and 1 receive", s)
		}
	})
}

func TestVisibilityLimitCancelsHandler(t *testing.T) {
	t.Parallel()
	sqstestenv.Each(t, func(t *testing.T, be *sqstestenv.Backend) {
		t.Parallel()
		e := newEnv(t, be)
		reqQ := e.queue("req", map[string]string{"VisibilityTimeout": "1"})
		r := newResponder(t, e.client, func(o *Options) { o.VisibilityTimeout = time.Second; o.PollWaitTime = time.Second })
		r.maxVisibility = 4 * time.Second // stands for SQS's 12 hours
		causes := make(chan error, 1)
		serve(t, r, reqQ, HandlerFunc(func(ctx context.Context, req *Request) (*Reply, error) {
			<-ctx.Done()
			select {
			case causes <- context.Cause(ctx):
			default:
			}
			return nil, ctx.Err()
		}))
		e.request(reqQ, "forever", "", "rid-forever")
		select {
		case c := <-causes:
			if !errors.Is(c, ErrVisibilityLimit) {
				t.Fatalf("handler cancelled with %v, want ErrVisibilityLimit", c)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("handler not cancelled at the visibility limit")
		}
		waitFor(t, "the failure recorded", func() bool { return r.Stats().Failed >= 1 })
		if s := r.Stats(); r.stats.VisibilityLimits.Load() != 1 || r.stats.Extended.Load() < 1 {
			t.Errorf("stats %+v", s)
		}
	})
}

func TestHandlerErrorsReachDLQ(t *testing.T) {
	t.Parallel()
	sqstestenv.Each(t, func(t *testing.T, be *sqstestenv.Backend) {
		t.Parallel()
		e := newEnv(t, be)
		dlq := e.queue("dlq", nil)
		reqQ := e.queue("req", map[string]string{
			"VisibilityTimeout": "1",
			"RedrivePolicy":     fmt.Sprintf(`{"deadLetterTargetArn":%q,"maxReceiveCount":"3"}`, e.queueARN(dlq)),
		})
		var rec observetest.Recorder
		r := newResponder(t, e.client, func(o *Options) {
			o.VisibilityTimeout = time.Second
			o.PollWaitTime = time.Second
			o.BackoffBase = -1 // at once
			o.Observer = &rec
		})
		serve(t, r, reqQ, HandlerFunc(func(context.Context, *Request) (*Reply, error) {
			return nil, errors.New("poison")
		}))
		e.request(reqQ, "poison", "", "rid-poison")
		got := e.replies(dlq, 1, 15*time.Second)
		if len(got) != 1 || attr(got[0], sqsapi.RequestIDAttribute) != "rid-poison" {
			t.Fatalf("DLQ holds %v, want the poison request with its request id", got)
		}
		// The server can move the request to the DLQ before the client has
		// counted the release that made it visible for the last time.
		waitFor(t, "the third release counted", func() bool { return r.Stats().Released >= 3 })
		if s := r.Stats(); s.Failed != 3 || s.Released != 3 || len(failures(&rec)) != 3 || rec.Count(observe.Released, "failed") != 3 || r.stats.Deleted.Load() != 0 {
			t.Errorf("stats %+v (observer saw %d failures): want 3 failures and releases, no delete", s, len(failures(&rec)))
		}
	})
}

func TestPanicRecoveredAndRetried(t *testing.T) {
	t.Parallel()
	sqstestenv.Each(t, func(t *testing.T, be *sqstestenv.Backend) {
		t.Parallel()
		e := newEnv(t, be)
		host := e.replyQueue("host", nil)
		reqQ := e.queue("req", map[string]string{"VisibilityTimeout": "1"})
		var rec observetest.Recorder
		r := newResponder(t, e.client, func(o *Options) {
			o.VisibilityTimeout = time.Second
			o.PollWaitTime = time.Second
			o.BackoffBase = time.Second
			o.BackoffBase = 100 * time.Millisecond
			o.Observer = &rec
		})
		serve(t, r, reqQ, HandlerFunc(func(ctx context.Context, req *Request) (*Reply, error) {
			if req.ReceiveCount == 1 {
				panic("boom")
			}
			return echo(ctx, req)
		}))
		e.request(reqQ, "p", host+"#vq", "rid-p")
		got := e.replies(host, 1, 10*time.Second)
		if len(got) != 1 {
			t.Fatal("no reply after the panic")
		}
		var pe *PanicError
		if errs := failures(&rec); len(errs) != 1 || !errors.As(errs[0], &pe) || pe.Value != "boom" || len(pe.Stack) == 0 {
			t.Errorf("observer saw %v, want one *PanicError", errs)
		}
		waitFor(t, "the retry counted", func() bool { return r.Stats().Handled >= 1 })
		if s := r.Stats(); s.Failed != 1 || s.Handled != 1 {
			t.Errorf("stats %+v", s)
		}
	})
}

// TestCrashedResponderMidRequest: responder A dies while its handler runs;
// B answers after the visibility timeout, and the requester sees one reply.
func TestCrashedResponderMidRequest(t *testing.T) {
	t.Parallel()
	inBubble(t, func(t *testing.T, be *sqstestenv.Backend) {
		e := newEnv(t, be)
		host := e.replyQueue("host", nil)
		reqQ := e.queue("req", map[string]string{"VisibilityTimeout": "1"})
		store := NewMemoryStore()
		var dead atomic.Bool
		fa := &faultClient{Client: e.client}
		opts := func(o *Options) { o.VisibilityTimeout = time.Second; o.PollWaitTime = time.Second }
		a := newResponder(t, fa, opts, func(o *Options) { o.Store = crashStore{store, &dead}; o.DrainTimeout = 200 * time.Millisecond })
		started := make(chan struct{})
		serve(t, a, reqQ, HandlerFunc(func(ctx context.Context, _ *Request) (*Reply, error) {
			close(started)
			<-ctx.Done() // hangs, as a crashed process would
			return nil, ctx.Err()
		}))
		e.request(reqQ, "work", host+"#vq", "rid-crash")
		<-started
		fa.dead.Store(true) // nothing A does reaches SQS or the store any more
		dead.Store(true)
		crashedAt := time.Now()

		b := newResponder(t, e.client, opts, func(o *Options) { o.Store = store; o.InProgressDelay = time.Second })
		var runs atomic.Int32
		serve(t, b, reqQ, HandlerFunc(func(ctx context.Context, req *Request) (*Reply, error) {
			runs.Add(1)
			return echo(ctx, req)
		}))
		got := e.replies(host, 1, 15*time.Second)
		if len(got) != 1 || attr(got[0], sqsapi.CorrelationIDAttribute) != "rid-crash" {
			t.Fatalf("replies %v", got)
		}
		t.Logf("answered %v after the crash", time.Since(crashedAt).Round(time.Millisecond))
		if extra := e.replies(host, 1, 2*time.Second); len(extra) != 0 || runs.Load() != 1 {
			t.Errorf("%d extra replies, %d runs on B", len(extra), runs.Load())
		}
	})
}

// TestCrashBeforeDeleteRepliesFromStore: A answers but dies before deleting
// the request; B gets the redelivery and replays the stored reply without
// running the handler again.
func TestCrashBeforeDeleteRepliesFromStore(t *testing.T) {
	t.Parallel()
	inBubble(t, func(t *testing.T, be *sqstestenv.Backend) {
		e := newEnv(t, be)
		host := e.replyQueue("host", nil)
		reqQ := e.queue("req", map[string]string{"VisibilityTimeout": "1"})
		store := NewMemoryStore()
		var runs atomic.Int32
		h := HandlerFunc(func(_ context.Context, req *Request) (*Reply, error) {
			return &Reply{Body: fmt.Sprintf("run %d", runs.Add(1))}, nil
		})
		opts := func(o *Options) { o.VisibilityTimeout = time.Second; o.PollWaitTime = time.Second; o.Store = store }
		fa := &faultClient{Client: e.client, deleteBatch: func() error { return errCrashed }}
		a := newResponder(t, fa, opts)
		stopA := serve(t, a, reqQ, h)
		e.request(reqQ, "once", host+"#vq", "rid-once")
		first := e.replies(host, 1, 10*time.Second)
		waitFor(t, "A's failed delete", func() bool { return a.stats.DeleteErrors.Load() == 1 })
		fa.dead.Store(true)
		_ = stopA()

		b := newResponder(t, e.client, opts)
		serve(t, b, reqQ, h)
		second := e.replies(host, 1, 10*time.Second)
		if len(first) != 1 || len(second) != 1 || aws.ToString(second[0].Body) != "run 1" || runs.Load() != 1 {
			t.Fatalf("replies %v then %v, %d runs: want the stored reply replayed, handler run once", first, second, runs.Load())
		}
		waitFor(t, "B deletes", func() bool { return b.stats.Deleted.Load() == 1 })
		if s := b.Stats(); s.Dropped != 1 || s.Handled != 0 {
			t.Errorf("B stats %+v", s)
		}
	})
}

func TestDuplicateInProgressNotRunTwice(t *testing.T) {
	t.Parallel()
	inBubble(t, func(t *testing.T, be *sqstestenv.Backend) {
		e := newEnv(t, be)
		host := e.replyQueue("host", nil)
		reqQ := e.queue("req", map[string]string{"VisibilityTimeout": "1"})
		var runs atomic.Int32
		var rec observetest.Recorder
		r := newResponder(t, e.client, func(o *Options) {
			o.VisibilityTimeout = time.Second
			o.PollWaitTime = time.Second
			o.Store = NewMemoryStore()
			o.InProgressDelay = time.Second
			o.Observer = &rec
		})
		serve(t, r, reqQ, HandlerFunc(func(ctx context.Context, req *Request) (*Reply, error) {
			runs.Add(1)
			testtime.Pause(1500 * time.Millisecond)
			return echo(ctx, req)
		}))
		// Two deliveries of one request (SQS duplicate, or a redriven copy).
		e.request(reqQ, "dup", host+"#vq", "rid-dup")
		e.request(reqQ, "dup", host+"#vq", "rid-dup")
		got := e.replies(host, 2, 15*time.Second)
		if len(got) != 2 || runs.Load() != 1 {
			t.Fatalf("%d replies, %d runs: want the handler once and both deliveries answered", len(got), runs.Load())
		}
		waitFor(t, "both deleted", func() bool { return r.stats.Deleted.Load() == 2 })
		if s := r.Stats(); rec.Count(observe.Released, "in-progress") < 1 || rec.Count(observe.Dropped, "duplicate") != 1 || s.Dropped != 1 {
			t.Errorf("stats %+v, events %+v", s, rec.Events())
		}
	})
}

func TestBatchingUnderLoad(t *testing.T) {
	t.Parallel()
	inBubble(t, func(t *testing.T, be *sqstestenv.Backend) {
		e := newEnv(t, be)
		reqQ := e.queue("req", map[string]string{"VisibilityTimeout": "1"})
		rc := newEnv(t, be)
		r := newResponder(t, rc.client, func(o *Options) {
			o.VisibilityTimeout = time.Second
			o.PollWaitTime = time.Second
			o.MaxConcurrency = 30
			o.Logger = testLogger(t)
		})
		const n = 30
		e.requests(reqQ, n, "")
		serve(t, r, reqQ, HandlerFunc(func(ctx context.Context, _ *Request) (*Reply, error) {
			testtime.Pause(2500 * time.Millisecond)
			return nil, nil
		}))
		waitFor(t, "all deleted", func() bool { return r.stats.Deleted.Load() == n })
		s, calls := r.Stats(), rc.counter.Snapshot()
		t.Logf("stats %+v calls %v", s, calls)
		if s.Handled != n || r.stats.Extended.Load() < n {
			t.Fatalf("stats %+v: want %d handled, each extended", s, n)
		}
		if calls["ChangeMessageVisibilityBatch"]*3 > r.stats.Extended.Load() || calls["DeleteMessageBatch"]*3 > n {
			t.Errorf("extensions (%d in %d calls) or deletes (%d calls) did not coalesce", r.stats.Extended.Load(), calls["ChangeMessageVisibilityBatch"], calls["DeleteMessageBatch"])
		}
	})
}

func TestThrottlingBacksOffAndLosesNothing(t *testing.T) {
	t.Parallel()
	inBubble(t, func(t *testing.T, be *sqstestenv.Backend) {
		e := newEnv(t, be)
		host := e.replyQueue("host", nil)
		reqQ := e.queue("req", map[string]string{"VisibilityTimeout": "1"})
		failUntil := time.Now().Add(1500 * time.Millisecond)
		var deleteFailures atomic.Int32
		fc := &faultClient{Client: e.client,
			receive: func() error {
				if time.Now().Before(failUntil) {
					return &smithy.GenericAPIError{Code: "ThrottlingException", Message: "Rate exceeded", Fault: smithy.FaultServer}
				}
				return nil
			},
			deleteBatch: func() error {
				if deleteFailures.Add(1) <= 2 {
					return &smithy.GenericAPIError{Code: "InternalError", Message: "500", Fault: smithy.FaultServer}
				}
				return nil
			},
		}
		r := newResponder(t, fc, func(o *Options) {
			o.VisibilityTimeout = time.Second
			o.PollWaitTime = time.Second
			o.MaxConcurrency = 20
		})
		const n = 20
		e.requests(reqQ, n, host)
		serve(t, r, reqQ, echo)
		got := e.replies(host, n, 20*time.Second)
		ids := map[string]bool{}
		for _, m := range got {
			ids[attr(m, sqsapi.CorrelationIDAttribute)] = true
		}
		if len(ids) != n {
			t.Fatalf("%d distinct replies, want %d", len(ids), n)
		}
		waitFor(t, "queue drained", func() bool { v, f := e.depth(reqQ); return v == "0" && f == "0" })
		fc.receiveTimes.Lock()
		during := 0
		for _, at := range fc.receiveTimes.at {
			if at.Before(failUntil) {
				during++
			}
		}
		fc.receiveTimes.Unlock()
		t.Logf("%d receive attempts during 1.5s of throttling; %d replies for %d requests; stats %+v", during, len(got), n, r.Stats())
		if during > 25 || during < 2 {
			t.Errorf("%d receive attempts while throttled: want a few (backoff), not a hot loop", during)
		}
		if r.stats.ReceiveErrors.Load() < 2 {
			t.Errorf("stats %+v: receive faults not seen", r.Stats())
		}
		// The library retries a delete's server fault itself: the two
		// failed DeleteMessageBatch calls are tried again, and no delete
		// is left failed.
		if n := deleteFailures.Load(); n < 3 || r.stats.DeleteErrors.Load() != 0 {
			t.Errorf("%d DeleteMessageBatch calls, stats %+v: want the 2 failed ones retried and no delete error", n, r.Stats())
		}
	})
}

func TestGracefulShutdownLosesNothing(t *testing.T) {
	inBubble(t, func(t *testing.T, be *sqstestenv.Backend) {
		e := newEnv(t, be)
		host := e.replyQueue("host", nil)
		reqQ := e.queue("req", map[string]string{"VisibilityTimeout": "30"})
		var rec observetest.Recorder
		r, err := New(e.client, func(o *Options) { o.PollWaitTime = time.Second; o.MaxConcurrency = 5; o.Observer = &rec })
		if err != nil {
			t.Fatal(err)
		}
		const n = 20
		e.requests(reqQ, n, host)
		var started, finished atomic.Int32
		errc := make(chan error, 1)
		go func() {
			errc <- r.Serve(context.Background(), reqQ, HandlerFunc(func(ctx context.Context, req *Request) (*Reply, error) {
				started.Add(1)
				testtime.Pause(300 * time.Millisecond)
				finished.Add(1)
				return echo(ctx, req)
			}))
		}()
		waitFor(t, "handlers running", func() bool { return started.Load() >= 5 })
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := r.Shutdown(ctx); err != nil {
			t.Fatalf("Shutdown: %v", err)
		}
		if err := <-errc; err != nil {
			t.Fatalf("Serve: %v", err)
		}
		if err := r.Shutdown(ctx); err != nil {
			t.Errorf("second Shutdown: %v", err)
		}
		if err := r.Serve(ctx, reqQ, echo); !errors.Is(err, sqsapi.ErrClosed) {
			t.Errorf("Serve after Shutdown = %v, want sqsapi.ErrClosed", err)
		}
		if err := r.SendResponseMessage(ctx, reqQ, msgWith(map[string]string{sqsapi.ResponseQueueURLAttribute: host + "#x"}), &Reply{Body: "x"}); !errors.Is(err, sqsapi.ErrClosed) {
			t.Errorf("SendResponseMessage after Shutdown = %v, want sqsapi.ErrClosed", err)
		}
		s := r.Stats()
		if started.Load() != finished.Load() || int64(finished.Load()) != r.stats.Deleted.Load() || int64(replied(&rec)) != r.stats.Deleted.Load() || s.InFlight != 0 || s.Pollers != 0 {
			t.Fatalf("started %d finished %d, stats %+v: every started request must be answered and deleted", started.Load(), finished.Load(), s)
		}
		// Nothing lost: the requests not handled are still visible, at once.
		v, f := e.depth(reqQ)
		if v != fmt.Sprint(n-int(r.stats.Deleted.Load())) || f != "0" {
			t.Errorf("after shutdown %s visible, %s in flight; want %d visible", v, f, n-int(r.stats.Deleted.Load()))
		}
		if leaks := leakedGoroutines(); len(leaks) > 0 {
			t.Errorf("%d goroutines left after Shutdown:\n%s", len(leaks), leaks[0])
		}
	})
}

func TestShutdownDeadlineReleasesUnfinished(t *testing.T) {
	inBubble(t, func(t *testing.T, be *sqstestenv.Backend) {
		e := newEnv(t, be)
		reqQ := e.queue("req", map[string]string{"VisibilityTimeout": "30"})
		// One slot, held by the stuck handler: no long poll is in flight when
		// the deadline aborts receives (an aborted poll may swallow the release
		// for a visibility timeout, on SQS as on fauxqs).
		var rec observetest.Recorder
		r, err := New(e.client, func(o *Options) {
			o.PollWaitTime = time.Second
			o.MaxConcurrency = 1
			o.Store = NewMemoryStore()
			o.Observer = &rec
		})
		if err != nil {
			t.Fatal(err)
		}
		e.request(reqQ, "stuck", "", "rid-stuck")
		causes := make(chan error, 1)
		started := make(chan struct{})
		errc := make(chan error, 1)
		go func() {
			errc <- r.Serve(context.Background(), reqQ, HandlerFunc(func(ctx context.Context, _ *Request) (*Reply, error) {
				close(started)
				<-ctx.Done()
				causes <- context.Cause(ctx)
				return nil, ctx.Err()
			}))
		}()
		<-started
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if err := r.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Shutdown = %v, want DeadlineExceeded", err)
		}
		if err := <-errc; err != nil {
			t.Errorf("Serve = %v", err)
		}
		if c := <-causes; !errors.Is(c, sqsapi.ErrClosed) {
			t.Errorf("handler cancelled with %v, want sqsapi.ErrClosed", c)
		}
		// Released with visibility 0: visible again at once, not after 30s.
		out, err := e.client.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: &reqQ, WaitTimeSeconds: 2})
		if err != nil || len(out.Messages) != 1 {
			t.Fatalf("unfinished request not released: %v %v", out, err)
		}
		if s := r.Stats(); s.Released != 1 || r.stats.Deleted.Load() != 0 || rec.Count(observe.Released, "stopping") != 1 {
			t.Errorf("stats %+v, events %+v: want one release at the stop, told", s, rec.Events())
		}
		if leaks := leakedGoroutines(); len(leaks) > 0 {
			t.Errorf("%d goroutines left after Shutdown:\n%s", len(leaks), leaks[0])
		}
	})
}

// TestShutdownReturnsByItsDeadline: a handler that ignores its cancelled
// context holds Shutdown at most finalTimeout past its context's deadline,
// and its request is released at the deadline.
func TestShutdownReturnsByItsDeadline(t *testing.T) {
	inBubble(t, func(t *testing.T, be *sqstestenv.Backend) {
		e := newEnv(t, be)
		reqQ := e.queue("req", map[string]string{"VisibilityTimeout": "30"})
		r, err := New(e.client, func(o *Options) { o.PollWaitTime = time.Second; o.MaxConcurrency = 1 })
		if err != nil {
			t.Fatal(err)
		}
		e.request(reqQ, "deaf", "", "rid-deaf")
		started, unblock := make(chan struct{}), make(chan struct{})
		errc := make(chan error, 1)
		go func() {
			errc <- r.Serve(context.Background(), reqQ, HandlerFunc(func(context.Context, *Request) (*Reply, error) {
				close(started)
				<-unblock // deaf to its context
				return nil, errors.New("too late")
			}))
		}()
		<-started
		const budget = 1500 * time.Millisecond
		ctx, cancel := context.WithTimeout(context.Background(), budget)
		defer cancel()
		begun := time.Now()
		err = r.Shutdown(ctx)
		took := time.Since(begun)
		close(unblock)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Shutdown = %v, want DeadlineExceeded", err)
		}
		// The deaf handler gets finalTimeout, the flush at most as much.
		if took > budget+2*finalTimeout {
			t.Errorf("Shutdown took %v with a %v deadline", took, budget)
		}
		if err := <-errc; err != nil {
			t.Errorf("Serve = %v", err)
		}
		out, err := e.client.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: &reqQ, WaitTimeSeconds: 2})
		if err != nil || len(out.Messages) != 1 {
			t.Fatalf("the deaf handler's request was not released by the deadline: %v %v", out, err)
		}
	})
}

func TestServeStopsOnMissingQueue(t *testing.T) {
	t.Parallel()
	sqstestenv.Each(t, func(t *testing.T, be *sqstestenv.Backend) {
		t.Parallel()
		e := newEnv(t, be)
		gone := e.replyQueue("gone", nil)
		if _, err := e.client.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: &gone}); err != nil {
			t.Fatal(err)
		}
		r := newResponder(t, e.client)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		err := r.Serve(ctx, gone, echo)
		var qdne *types.QueueDoesNotExist
		if !errors.As(err, &qdne) {
			t.Fatalf("Serve on a missing queue = %v, want *types.QueueDoesNotExist", err)
		}
		if err := r.Serve(ctx, gone+"#v", echo); !errors.Is(err, sqsapi.ErrInvalidInput) {
			t.Errorf("Serve on a virtual URL = %v, want ErrInvalidInput", err)
		}
	})
}

// visOrderClient holds the first visibility extension it sees until hold is
// closed, and records every release (timeout 0) that goes out in the same
// call as an extension of its request, or while one is unanswered.
type visOrderClient struct {
	Client
	hold      chan struct{}
	holdOnce  sync.Once
	mu        sync.Mutex
	extending map[string]int // receipt handle -> unanswered extension calls
	overtaken []string       // releases that could reach SQS before an extension
	releases  int
}

func (c *visOrderClient) ChangeMessageVisibilityBatch(ctx context.Context, in *sqs.ChangeMessageVisibilityBatchInput, o ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error) {
	var exts []string
	c.mu.Lock()
	for _, e := range in.Entries {
		if e.VisibilityTimeout > 0 {
			exts = append(exts, aws.ToString(e.ReceiptHandle))
		}
	}
	for _, e := range in.Entries {
		h := aws.ToString(e.ReceiptHandle)
		if e.VisibilityTimeout == 0 {
			c.releases++
			if c.extending[h] > 0 || slices.Contains(exts, h) {
				c.overtaken = append(c.overtaken, h)
			}
		}
	}
	for _, h := range exts {
		c.extending[h]++
	}
	c.mu.Unlock()
	if len(exts) > 0 {
		first := false
		c.holdOnce.Do(func() { first = true })
		if first {
			<-c.hold
		}
	}
	out, err := c.Client.ChangeMessageVisibilityBatch(ctx, in, o...)
	c.mu.Lock()
	for _, h := range exts {
		c.extending[h]--
	}
	c.mu.Unlock()
	return out, err
}

// TestReleaseNeverOvertakesAnExtension: a request whose handler fails while
// its heartbeat extension waits for a batch call must not be released in
// that same call (or before it is answered): SQS could apply the release
// first and the extension would hide the request for a visibility timeout.
// Request B's extension is held in flight, so request A's extension, made a
// tick later, waits in the coalescer when A's handler fails. The test runs
// in a synctest bubble, where those ticks come on the bubble's clock, and
// checks that the race is reached: when A's handler fails, B's extension is
// in flight and A's waits.
func TestReleaseNeverOvertakesAnExtension(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, sqstestenv.InProcess(t))
		reqQ := e.queue("req", map[string]string{"VisibilityTimeout": "4"})
		c := &visOrderClient{Client: e.client, hold: make(chan struct{}), extending: make(map[string]int)}
		var holdOnce sync.Once
		unhold := func() { holdOnce.Do(func() { close(c.hold) }) }
		t.Cleanup(unhold)
		// Extensions every second, for requests with 2 s or less left.
		r := newResponder(t, c, func(o *Options) {
			o.VisibilityTimeout = 4 * time.Second
			o.PollWaitTime = time.Second
			o.BackoffBase = -1 // at once
		})
		failedA, stopB := make(chan struct{}), make(chan struct{})
		var runsA atomic.Int32
		var heldB, waitingA int
		serve(t, r, reqQ, HandlerFunc(func(ctx context.Context, req *Request) (*Reply, error) {
			switch req.Body() {
			case "B":
				<-stopB // in flight, extended, until the test ends
				return &Reply{Body: "ok"}, nil
			case "A":
				if runsA.Add(1) == 1 {
					// Past A's first extension tick (2 to 3 s after receipt),
					// on the bubble's clock.
					testtime.Pause(3500 * time.Millisecond)
					c.mu.Lock()
					for _, n := range c.extending {
						heldB += n
					}
					c.mu.Unlock()
					waitingA = r.vis.Pending()
					close(failedA)
					return nil, errors.New("A fails once")
				}
			}
			return &Reply{Body: "ok"}, nil
		}))
		t.Cleanup(func() { close(stopB) }) // runs before serve's cleanup stops Serve
		e.request(reqQ, "B", "", "rid-b")
		testtime.Advance(1200 * time.Millisecond)
		e.request(reqQ, "A", "", "rid-a")
		<-failedA
		if heldB != 1 || waitingA != 1 {
			t.Fatalf("when A's handler failed: %d extension calls in flight, %d extensions waiting; want B's held and A's waiting, or the race is not reached", heldB, waitingA)
		}
		synctest.Wait() // A's release is submitted
		unhold()
		testtime.Eventually(t, time.Minute, "A run again after its release", func() bool { return runsA.Load() >= 2 })
		c.mu.Lock()
		defer c.mu.Unlock()
		if len(c.overtaken) > 0 || c.releases == 0 {
			t.Fatalf("%d releases, %d sent with or before an unanswered extension of their request", c.releases, len(c.overtaken))
		}
	})
}
