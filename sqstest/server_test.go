package sqstest_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/internal/testkit/testtime"
	"github.com/tempqueues/tempqueues/sqstest"
)

// Tests of the test controls, which only sqstest has.

func newQueue(t *testing.T, c *sqs.Client, name string, attrs map[string]string) string {
	t.Helper()
	out, err := c.CreateQueue(context.Background(), &sqs.CreateQueueInput{QueueName: &name, Attributes: attrs})
	if err != nil {
		t.Fatal(err)
	}
	return *out.QueueUrl
}

// receiveAsync starts a long poll and returns the channel its result
// arrives on.
func receiveAsync(c *sqs.Client, url string, wait int32) <-chan *sqs.ReceiveMessageOutput {
	ch := make(chan *sqs.ReceiveMessageOutput, 1)
	go func() {
		out, _ := c.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: &url, WaitTimeSeconds: wait})
		ch <- out
	}()
	return ch
}

func waitParked(t *testing.T, srv *sqstest.Server, n int) {
	t.Helper()
	if !testtime.Until(5*time.Second, func() bool { return srv.Parked() >= n }) {
		t.Fatalf("%d of %d receives parked", srv.Parked(), n)
	}
}

func wantPending(t *testing.T, ch <-chan *sqs.ReceiveMessageOutput) {
	t.Helper()
	select {
	case out := <-ch:
		t.Fatalf("receive returned early: %+v", out)
	case <-time.After(50 * time.Millisecond):
	}
}

func wantResult(t *testing.T, ch <-chan *sqs.ReceiveMessageOutput, messages int) *sqs.ReceiveMessageOutput {
	t.Helper()
	select {
	case out := <-ch:
		if out == nil || len(out.Messages) != messages {
			t.Fatalf("receive gave %+v, want %d messages", out, messages)
		}
		return out
	case <-time.After(5 * time.Second):
		t.Fatal("receive did not return")
	}
	return nil
}

func TestClockEndsLongPoll(t *testing.T) {
	clock := sqstest.NewClock(time.Time{})
	srv := sqstest.Start(t, func(o *sqstest.Options) { o.Clock = clock })
	c := srv.Client()
	url := newQueue(t, c, "q", nil)
	ch := receiveAsync(c, url, 20)
	waitParked(t, srv, 1)
	clock.Advance(19 * time.Second)
	wantPending(t, ch)
	clock.Advance(time.Second)
	wantResult(t, ch, 0)
}

func TestClockDelayedMessageWakesPoll(t *testing.T) {
	clock := sqstest.NewClock(time.Time{})
	srv := sqstest.Start(t, func(o *sqstest.Options) { o.Clock = clock })
	c := srv.Client()
	url := newQueue(t, c, "q", nil)
	ch := receiveAsync(c, url, 20)
	waitParked(t, srv, 1)
	if _, err := c.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String("later"), DelaySeconds: 5}); err != nil {
		t.Fatal(err)
	}
	waitParked(t, srv, 1) // the send makes the poll re-arm for the delay
	clock.Advance(4 * time.Second)
	wantPending(t, ch)
	clock.Advance(time.Second)
	wantResult(t, ch, 1)
}

func TestClockVisibilityExpiryWakesPoll(t *testing.T) {
	clock := sqstest.NewClock(time.Time{})
	srv := sqstest.Start(t, func(o *sqstest.Options) { o.Clock = clock })
	c := srv.Client()
	url := newQueue(t, c, "q", map[string]string{"VisibilityTimeout": "10"})
	ctx := context.Background()
	c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String("m")})
	if out, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &url}); err != nil || len(out.Messages) != 1 {
		t.Fatal(err)
	}
	ch := receiveAsync(c, url, 20)
	waitParked(t, srv, 1)
	clock.Advance(9 * time.Second)
	wantPending(t, ch)
	clock.Advance(time.Second)
	wantResult(t, ch, 1)
}

func TestClockRetention(t *testing.T) {
	clock := sqstest.NewClock(time.Time{})
	srv := sqstest.Start(t, func(o *sqstest.Options) { o.Clock = clock })
	c := srv.Client()
	url := newQueue(t, c, "q", map[string]string{"MessageRetentionPeriod": "60"})
	ctx := context.Background()
	c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String("m")})
	clock.Advance(59 * time.Second)
	count := func() string {
		out, err := c.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: &url, AttributeNames: []types.QueueAttributeName{"ApproximateNumberOfMessages"}})
		if err != nil {
			t.Fatal(err)
		}
		return out.Attributes["ApproximateNumberOfMessages"]
	}
	if n := count(); n != "1" {
		t.Fatalf("before retention: %s messages", n)
	}
	clock.Advance(time.Second)
	if n := count(); n != "0" {
		t.Fatalf("after retention: %s messages", n)
	}
}

func TestClockTimers(t *testing.T) {
	start := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := sqstest.NewClock(start)
	var mu sync.Mutex
	var order []string
	var seen []time.Time
	rec := func(name string) func() {
		return func() {
			mu.Lock()
			order = append(order, name)
			seen = append(seen, clock.Now())
			mu.Unlock()
		}
	}
	sqstest.AfterFunc(clock, 3*time.Second, rec("c"))
	sqstest.AfterFunc(clock, time.Second, rec("a"))
	stop := sqstest.AfterFunc(clock, 2*time.Second, rec("b"))
	if !stop() || stop() {
		t.Fatal("Stop should report true once")
	}
	clock.Advance(5 * time.Second)
	if strings.Join(order, "") != "ac" {
		t.Fatalf("fired %v", order)
	}
	if !seen[0].Equal(start.Add(time.Second)) || !clock.Now().Equal(start.Add(5*time.Second)) || sqstest.PendingTimers(clock) != 0 {
		t.Fatalf("times %v, now %v", seen, clock.Now())
	}
}

func TestFaultThrottle(t *testing.T) {
	srv := sqstest.Start(t)
	c := srv.Client(func(o *sqs.Options) { o.RetryMaxAttempts = 1 })
	url := newQueue(t, c, "q", nil)
	remove := srv.InjectFault(sqstest.Fail("SendMessage", "RequestThrottled"))
	_, err := c.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String("m")})
	var thr *types.RequestThrottled
	if !errors.As(err, &thr) {
		t.Fatalf("err = %v, want *types.RequestThrottled", err)
	}
	// Other operations are not affected.
	if _, err := c.GetQueueUrl(context.Background(), &sqs.GetQueueUrlInput{QueueName: aws.String("q")}); err != nil {
		t.Fatal(err)
	}
	remove()
	if _, err := c.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String("m")}); err != nil {
		t.Fatal(err)
	}
	if n := srv.Calls()["SendMessage"]; n != 2 {
		t.Fatalf("SendMessage calls = %d, want 2 (failed calls count)", n)
	}
}

func TestFaultFailNextNRetriedBySDK(t *testing.T) {
	srv := sqstest.Start(t)
	// The SDK's standard retryer (3 attempts), with backoff shortened so
	// the test does not wait for it.
	c := srv.Client(func(o *sqs.Options) {
		o.Retryer = retry.AddWithMaxBackoffDelay(retry.NewStandard(), time.Millisecond)
	})
	url := newQueue(t, c, "q", nil)
	srv.InjectFault(sqstest.Fail("SendMessage", "InternalFailure").Times(2))
	if _, err := c.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String("m")}); err != nil {
		t.Fatalf("after 2 transient failures the 3rd attempt should succeed: %v", err)
	}
	if n := srv.Calls()["SendMessage"]; n != 3 {
		t.Fatalf("SendMessage attempts = %d, want 3", n)
	}
	remove := srv.InjectFault(sqstest.Fail("", "ServiceUnavailable").Times(5))
	_, err := c.ListQueues(context.Background(), &sqs.ListQueuesInput{})
	if err == nil || !strings.Contains(err.Error(), "503") {
		t.Fatalf("err = %v, want a 503", err)
	}
	remove()
	if _, err := c.ListQueues(context.Background(), &sqs.ListQueuesInput{}); err != nil {
		t.Fatalf("after remove: %v", err)
	}
}

func TestFaultLatency(t *testing.T) {
	srv := sqstest.Start(t)
	c := srv.Client()
	srv.InjectFault(sqstest.Latency("ListQueues", 100*time.Millisecond, 0))
	start := time.Now()
	if _, err := c.ListQueues(context.Background(), &sqs.ListQueuesInput{}); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 100*time.Millisecond {
		t.Fatalf("call took %v, want >= 100ms", d)
	}
}

// A fault with Times applies to the next n calls and then removes itself;
// Fail with an SQS error shape reaches the SDK typed, as a 400; the zero
// Fault does nothing.
func TestFaultTimesAndShapes(t *testing.T) {
	srv := sqstest.Start(t)
	c := srv.Client(func(o *sqs.Options) { o.RetryMaxAttempts = 1 })
	ctx := context.Background()
	srv.InjectFault(sqstest.Fault{}) // changes nothing, and hides no later fault
	srv.InjectFault(sqstest.Fail("ListQueues", "RequestThrottled").Times(1))
	var thr *types.RequestThrottled
	if _, err := c.ListQueues(ctx, &sqs.ListQueuesInput{}); !errors.As(err, &thr) {
		t.Fatalf("first ListQueues: err = %v, want throttled", err)
	}
	if _, err := c.ListQueues(ctx, &sqs.ListQueuesInput{}); err != nil {
		t.Fatalf("second ListQueues (the fault applied once): %v", err)
	}
	remove := srv.InjectFault(sqstest.Fail("GetQueueUrl", "QueueDoesNotExist"))
	_, err := c.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String("q")})
	var gone *types.QueueDoesNotExist
	var re interface{ HTTPStatusCode() int }
	if !errors.As(err, &gone) || !errors.As(err, &re) || re.HTTPStatusCode() != http.StatusBadRequest {
		t.Fatalf("GetQueueUrl: err = %v, want a typed QueueDoesNotExist, 400", err)
	}
	remove()
	remove() // removing twice is harmless
}

func TestCalls(t *testing.T) {
	srv := sqstest.Start(t)
	c := srv.Client()
	url := newQueue(t, c, "q", nil)
	ctx := context.Background()
	for i := 0; i < 3; i++ {
		c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String("m")})
	}
	c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &url})
	got := srv.Calls()
	if len(got) != 3 || got["CreateQueue"] != 1 || got["SendMessage"] != 3 || got["ReceiveMessage"] != 1 {
		t.Fatalf("counts %v", got)
	}
	got["SendMessage"] = 100
	if n := srv.Calls()["SendMessage"]; n != 3 {
		t.Fatalf("changing the map Calls returned changed the count to %d", n)
	}
}

func TestCloseEndsParkedPolls(t *testing.T) {
	srv := sqstest.NewServer()
	c := srv.Client(func(o *sqs.Options) { o.RetryMaxAttempts = 1 })
	url := newQueue(t, c, "q", nil)
	errc := make(chan error, 1)
	go func() {
		_, err := c.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: &url, WaitTimeSeconds: 20})
		errc <- err
	}()
	waitParked(t, srv, 1)
	start := time.Now()
	if err := srv.Close(context.Background()); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := srv.Close(context.Background()); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	select {
	case err := <-errc:
		if err == nil {
			t.Fatal("parked receive succeeded on a closed server")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("parked receive outlived Close")
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("Close took %v", d)
	}
	// A closed server answers in-process calls with a 503 and opens no
	// queue.
	_, err := c.GetQueueUrl(context.Background(), &sqs.GetQueueUrlInput{QueueName: aws.String("q")})
	var re interface{ HTTPStatusCode() int }
	if !errors.As(err, &re) || re.HTTPStatusCode() != http.StatusServiceUnavailable {
		t.Fatalf("call after Close: %v, want HTTP 503", err)
	}
}

// Close gives up at ctx's deadline when a request does not end, says so,
// and a later Close returns nil once it has.
func TestCloseAbandonsAtDeadline(t *testing.T) {
	srv := sqstest.NewServer()
	c := srv.Client(func(o *sqs.Options) { o.RetryMaxAttempts = 1 })
	unlock := sqstest.LockState(srv) // the next request blocks inside its handler
	errc := make(chan error, 1)
	go func() {
		_, err := c.ListQueues(context.Background(), &sqs.ListQueuesInput{})
		errc <- err
	}()
	testtime.Eventually(t, 5*time.Second, "the request running", func() bool { return sqstest.Running(srv) > 0 })
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := srv.Close(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Close with a request stuck = %v, want DeadlineExceeded", err)
	}
	unlock()
	if err := srv.Close(context.Background()); err != nil {
		t.Fatalf("Close once the request ended = %v", err)
	}
	if err := <-errc; err != nil {
		t.Fatalf("the request that was running when Close began: %v", err)
	}
}

func TestClientGoneUnparks(t *testing.T) {
	srv := sqstest.Start(t)
	c := srv.Client()
	url := newQueue(t, c, "q", nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &url, WaitTimeSeconds: 20})
	}()
	waitParked(t, srv, 1)
	cancel()
	<-done
	testtime.Eventually(t, 5*time.Second, "the receive unparked after its client gave up", func() bool { return srv.Parked() == 0 })
}

func TestNewHandler(t *testing.T) {
	h, err := sqstest.NewHandler()
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(context.Background())
	hs := httptest.NewServer(h)
	defer hs.Close()
	c := sqs.New(sqs.Options{Region: "us-east-1", BaseEndpoint: aws.String(hs.URL)})
	url := newQueue(t, c, "q", nil)
	if !strings.HasPrefix(url, hs.URL+"/000000000000/") {
		t.Fatalf("queue URL %s does not use the request's host", url)
	}
	// Requests that are not SQS get an SQS-shaped error.
	resp, err := http.Post(hs.URL, "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || resp.Header.Get("x-amzn-query-error") == "" {
		t.Fatalf("status %d, headers %v", resp.StatusCode, resp.Header)
	}
}

func TestUnsupportedOperation(t *testing.T) {
	srv := sqstest.Start(t)
	c := srv.Client()
	url := newQueue(t, c, "q", nil)
	_, err := c.AddPermission(context.Background(), &sqs.AddPermissionInput{QueueUrl: &url, Label: aws.String("l"),
		AWSAccountIds: []string{"111111111111"}, Actions: []string{"SendMessage"}})
	var u *types.UnsupportedOperation
	if !errors.As(err, &u) {
		t.Fatalf("err = %v", err)
	}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestIdleParkedPollsCostNoCPU parks 50 long polls and measures the CPU the
// whole test process (server and clients) uses while they wait: a busy
// loop anywhere would show up as a large fraction of a core.
func TestIdleParkedPollsCostNoCPU(t *testing.T) {
	clock := sqstest.NewClock(time.Time{})
	srv := sqstest.Start(t, func(o *sqstest.Options) { o.Clock = clock })
	c := srv.Client()
	url := newQueue(t, c, "q", nil)
	var chans []<-chan *sqs.ReceiveMessageOutput
	for i := 0; i < 50; i++ {
		chans = append(chans, receiveAsync(c, url, 20))
	}
	waitParked(t, srv, 50)
	// A real sleep: the test measures the process's CPU over real time.
	const window = time.Second
	before := cpuTime()
	time.Sleep(window)
	used := cpuTime() - before
	share := float64(used) / float64(window)
	t.Logf("CPU with 50 parked long polls: %v in %v (%.2f%% of a core)", used, window, 100*share)
	if share > 0.05 {
		t.Fatalf("%.1f%% of a core used while idle: something is polling", 100*share)
	}
	clock.Advance(20 * time.Second)
	for _, ch := range chans {
		wantResult(t, ch, 0)
	}
}
