package integration_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/tempqueues/tempqueues/internal/testkit/faultproxy"
	"github.com/tempqueues/tempqueues/internal/testkit/sqstestenv"
	"github.com/tempqueues/tempqueues/responder"
)

// faultRun is a requester and a responder talking to b through a fault
// proxy, and what a batch of RPCs through them saw.
type faultRun struct {
	e     *env
	proxy *faultproxy.Proxy
	q     string

	mu   sync.Mutex
	runs map[string]int // handler runs per request body
}

// newFaultRun starts the proxy (no faults yet), the request queue and the
// responder. sdkAttempts, when > 0, replaces the SDK's attempts per call.
func newFaultRun(t *testing.T, b *sqstestenv.Backend, seed uint64, sdkAttempts int) *faultRun {
	if b.Endpoint == "" {
		t.Skip("needs an endpoint to put the proxy in front of")
	}
	p := faultproxy.Start(t, b.Endpoint, seed)
	e := newEnv(t, &sqstestenv.Backend{Name: b.Name, Endpoint: p.URL()})
	if sdkAttempts > 0 {
		e.raw = sqs.New(e.raw.Options(), func(o *sqs.Options) { o.RetryMaxAttempts = sdkAttempts })
	}
	f := &faultRun{e: e, proxy: p, runs: make(map[string]int)}
	f.q = e.queue(t, "rpc", nil)
	serve(t, e.raw, f.q, func(_ context.Context, req *responder.Request) (*responder.Reply, error) {
		f.mu.Lock()
		f.runs[req.Body()]++
		f.mu.Unlock()
		return &responder.Reply{Body: "echo " + req.Body()}, nil
	})
	return f
}

// rpcs makes n RPCs from callers goroutines, each with its own deadline,
// and returns the errors and the slowest answer.
func (f *faultRun) rpcs(t *testing.T, n, callers int, deadline time.Duration) (failed []error, slowest time.Duration) {
	r := f.e.requester(t)
	var next atomic.Int64
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := next.Add(1); i <= int64(n); i = next.Add(1) {
				body := fmt.Sprint(i)
				ctx, cancel := context.WithTimeout(context.Background(), deadline)
				start := time.Now()
				m, err := r.SendMessageAndGetResponse(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(f.q), MessageBody: aws.String(body)})
				took := time.Since(start)
				cancel()
				if err == nil && aws.ToString(m.Body) != "echo "+body {
					err = fmt.Errorf("request %s got %q", body, aws.ToString(m.Body))
				}
				mu.Lock()
				if err != nil {
					failed = append(failed, err)
				}
				slowest = max(slowest, took)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	t.Logf("requester stats %+v", r.Stats())
	return failed, slowest
}

// duplicates is the number of handler runs beyond one per request.
func (f *faultRun) duplicates() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	d := 0
	for _, n := range f.runs {
		d += n - 1
	}
	return d
}

// Issue 12 item 5: under 5% throttling of sends (and of deletes and
// visibility changes), no RPC fails. The library makes these calls with
// one SDK attempt each and retries them itself, so every throttle reaches
// its retries; the client's SDK retries are off too, for the receives.
func TestRPCsSurviveThrottling(t *testing.T) {
	t.Parallel()
	sqstestenv.Each(t, func(t *testing.T, b *sqstestenv.Backend) {
		f := newFaultRun(t, b, 12, 1)
		var rules []faultproxy.Rule
		for _, op := range []string{"SendMessageBatch", "SendMessage", "DeleteMessageBatch", "ChangeMessageVisibilityBatch"} {
			rules = append(rules, faultproxy.Rule{Op: op, Kind: faultproxy.Throttle, Share: 0.05})
		}
		f.proxy.SetRules(rules...)
		start := time.Now()
		const n = 500
		// Few callers make small batches: more send calls to throttle.
		failed, slowest := f.rpcs(t, n, 8, 20*time.Second)
		f.proxy.SetRules()
		t.Logf("%d RPCs in %v, slowest %v; %d failed; %d duplicate handler runs; proxy: %s",
			n, time.Since(start).Round(time.Millisecond), slowest.Round(time.Millisecond), len(failed), f.duplicates(), f.proxy.Summary())
		for i, err := range failed {
			if i == 5 {
				break
			}
			t.Errorf("RPC failed: %v", err)
		}
		if got := f.proxy.Injected("SendMessageBatch", faultproxy.Throttle); got < 10 {
			t.Fatalf("only %d throttled SendMessageBatch calls: the test did not exercise throttling", got)
		}
	})
}

// Under 500s and dropped responses on 6% of all calls each, no reply is
// lost: every RPC is answered within its deadline, some after a
// redelivery (a dropped receive hides its messages for their visibility
// timeout; a dropped send is sent again by the SDK: a duplicate request).
func TestRPCsSurviveServerErrorsAndDroppedResponses(t *testing.T) {
	t.Parallel()
	sqstestenv.Each(t, func(t *testing.T, b *sqstestenv.Backend) {
		f := newFaultRun(t, b, 500, 0)
		f.proxy.SetRules(
			faultproxy.Rule{Kind: faultproxy.ServerError, Share: 0.06},
			faultproxy.Rule{Kind: faultproxy.Drop, Share: 0.06},
		)
		start := time.Now()
		const n = 300
		failed, slowest := f.rpcs(t, n, 32, 20*time.Second)
		f.proxy.SetRules()
		t.Logf("%d RPCs in %v, slowest %v; %d failed; %d duplicate handler runs; proxy: %s",
			n, time.Since(start).Round(time.Millisecond), slowest.Round(time.Millisecond), len(failed), f.duplicates(), f.proxy.Summary())
		for i, err := range failed {
			if i == 5 {
				break
			}
			t.Errorf("RPC failed: %v", err)
		}
		if f.proxy.Injected("", faultproxy.Drop) < 5 || f.proxy.Injected("", faultproxy.ServerError) < 5 {
			t.Fatalf("too few faults injected: %s", f.proxy.Summary())
		}
	})
}
