package reaper_test

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"

	"github.com/tempqueues/tempqueues/internal/sqstestenv"
	"github.com/tempqueues/tempqueues/reaper"
	"github.com/tempqueues/tempqueues/sqsapi"
)

func TestHeartbeaterRefreshesAtFraction(t *testing.T) {
	t.Parallel()
	sqstestenv.Each(t, func(t *testing.T, b *sqstestenv.Backend) {
		t.Parallel()
		client, counter := b.Client(t)
		prefix := testPrefix(t)
		u := createQueue(t, client, hostName(prefix, 0), nil)
		counter.Reset()

		h, err := reaper.NewHeartbeater(client)
		if err != nil {
			t.Fatal(err)
		}
		if err := h.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = h.Close(context.Background()) }()
		if err := h.Add(u, 3*time.Second); err != nil { // interval 1 s ±10%
			t.Fatal(err)
		}
		time.Sleep(2500 * time.Millisecond)
		n := counter.Get("TagQueue")
		if n < 2 || n > 4 {
			t.Errorf("%d TagQueue calls in 2.5 s at a 1 s interval, want 3 (2-4)", n)
		}
		if got := tagsOf(t, client, u)[sqsapi.RetentionTag]; got != "3" {
			t.Errorf("retention tag %q, want \"3\"", got)
		}
		// Adding again with the same retention keeps the schedule.
		if err := h.Add(u, 3*time.Second); err != nil {
			t.Fatal(err)
		}
		h.Remove(u)
		n = counter.Get("TagQueue")
		time.Sleep(1300 * time.Millisecond)
		if got := counter.Get("TagQueue"); got != n {
			t.Errorf("%d TagQueue calls after Remove", got-n)
		}
		if h.Len() != 0 {
			t.Errorf("Len = %d after Remove", h.Len())
		}
	})
}

func TestHeartbeaterAddTaggedSkipsFirstTag(t *testing.T) {
	t.Parallel()
	sqstestenv.Each(t, func(t *testing.T, b *sqstestenv.Backend) {
		t.Parallel()
		client, counter := b.Client(t)
		prefix := testPrefix(t)
		now := time.Now()
		out, err := client.CreateQueue(context.Background(), &sqs.CreateQueueInput{
			QueueName: aws.String(hostName(prefix, 0)),
			Tags:      reaper.QueueTags(3*time.Second, now),
		})
		if err != nil {
			t.Fatal(err)
		}
		u := aws.ToString(out.QueueUrl)
		t.Cleanup(func() { _, _ = client.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: out.QueueUrl}) })
		counter.Reset()

		h, err := reaper.NewHeartbeater(client)
		if err != nil {
			t.Fatal(err)
		}
		if err := h.AddTagged(u, 3*time.Second, now); err != nil {
			t.Fatal(err)
		}
		if err := h.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = h.Close(context.Background()) }()
		time.Sleep(700 * time.Millisecond)
		if got := counter.Get("TagQueue"); got != 0 {
			t.Errorf("%d TagQueue calls before the first interval of a pre-tagged queue", got)
		}
		eventually(t, 2*time.Second, "the first refresh", func() bool { return counter.Get("TagQueue") == 1 })
	})
}

func TestHeartbeaterReportsDeletedQueue(t *testing.T) {
	t.Parallel()
	sqstestenv.Each(t, func(t *testing.T, b *sqstestenv.Backend) {
		t.Parallel()
		client, counter := b.Client(t)
		prefix := testPrefix(t)
		u := createQueue(t, client, hostName(prefix, 0), nil)
		if _, err := client.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: aws.String(u)}); err != nil {
			t.Fatal(err)
		}
		counter.Reset()

		gone := make(chan error, 1)
		h, err := reaper.NewHeartbeater(client, func(o *reaper.Options) {
			o.OnQueueGone = func(queueURL string, err error) {
				if queueURL != u {
					t.Errorf("OnQueueGone(%q), want %q", queueURL, u)
				}
				gone <- err
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := h.Add(u, 3*time.Second); err != nil {
			t.Fatal(err)
		}
		if err := h.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = h.Close(context.Background()) }()
		select {
		case err := <-gone:
			var qdne *types.QueueDoesNotExist
			if !errors.As(err, &qdne) {
				t.Errorf("OnQueueGone error %v is not a *types.QueueDoesNotExist", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("OnQueueGone not called")
		}
		time.Sleep(1200 * time.Millisecond)
		if got := counter.Get("TagQueue"); got != 1 {
			t.Errorf("%d TagQueue calls, want 1: a deleted queue must be dropped", got)
		}
		if st := h.Stats(); st.QueuesGone != 1 || h.Len() != 0 {
			t.Errorf("stats %+v, Len %d", st, h.Len())
		}
	})
}

// throttlingTagger fails TagQueue with a throttling error until its
// deadline, and records when it was called.
type throttlingTagger struct {
	sqsapi.Tagger // nil: only TagQueue is called
	until         time.Time

	mu    sync.Mutex
	calls []time.Time
	fails int
}

func (f *throttlingTagger) TagQueue(ctx context.Context, in *sqs.TagQueueInput, _ ...func(*sqs.Options)) (*sqs.TagQueueOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := time.Now()
	f.calls = append(f.calls, now)
	if now.Before(f.until) {
		f.fails++
		return nil, &smithy.GenericAPIError{Code: "ThrottlingException", Message: "Rate exceeded", Fault: smithy.FaultClient}
	}
	return &sqs.TagQueueOutput{}, nil
}

func TestHeartbeaterBacksOffWhenThrottled(t *testing.T) {
	t.Parallel()
	const throttled = 1500 * time.Millisecond
	f := &throttlingTagger{until: time.Now().Add(throttled)}
	h, err := reaper.NewHeartbeater(f)
	if err != nil {
		t.Fatal(err)
	}
	// Retention 2 s: interval 667 ms, retries between 25 ms and 667 ms.
	if err := h.Add("https://sqs.example/123/q", 2*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := h.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = h.Close(context.Background()) }()
	eventually(t, throttled+2*time.Second, "a heartbeat after throttling ends", func() bool { return h.Stats().Heartbeats >= 1 })

	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fails < 2 {
		t.Fatalf("only %d throttled calls: the test did not exercise backoff", f.fails)
	}
	// Exponential backoff: a handful of retries in 1.5 s, not a hot loop.
	if f.fails > 15 {
		t.Errorf("%d TagQueue calls while throttled for %v: hot loop", f.fails, throttled)
	}
	for i := 1; i < len(f.calls); i++ {
		if gap := f.calls[i].Sub(f.calls[i-1]); gap < 20*time.Millisecond {
			t.Errorf("retry %d came %v after the previous call", i, gap)
		}
	}
	if st := h.Stats(); st.Failures != int64(f.fails) || h.Len() != 1 {
		t.Errorf("stats %+v, Len %d; want %d failures and the queue kept", st, h.Len(), f.fails)
	}
}

func TestOptionsValidatedBeforeAnyCall(t *testing.T) {
	t.Parallel()
	var called atomic.Bool
	client := &panicClient{called: &called}
	bad := []struct {
		param string
		fn    func(*reaper.Options)
	}{
		{"Prefix", func(o *reaper.Options) { o.Prefix = "" }},
		{"Prefix", func(o *reaper.Options) { o.Prefix = "has space" }},
		{"Prefix", func(o *reaper.Options) { o.Prefix = string(make([]byte, 80)) }},
		{"Period", func(o *reaper.Options) { o.Period = time.Second }},
		{"Period", func(o *reaper.Options) { o.Period = 13 * time.Hour }},
		{"HeartbeatFraction", func(o *reaper.Options) { o.HeartbeatFraction = 0.9 }},
		{"HeartbeatFraction", func(o *reaper.Options) { o.HeartbeatFraction = -1 }},
		{"SweepConcurrency", func(o *reaper.Options) { o.SweepConcurrency = 0 }},
		{"CallTimeout", func(o *reaper.Options) { o.CallTimeout = -1 }},
	}
	for _, b := range bad {
		_, err := reaper.New(client, b.fn)
		var ie *sqsapi.InvalidInputError
		if !errors.Is(err, sqsapi.ErrInvalidInput) || !errors.As(err, &ie) || ie.Param != b.param {
			t.Errorf("New with bad %s: err = %v", b.param, err)
		}
	}
	if _, err := reaper.New(nil); !errors.Is(err, sqsapi.ErrInvalidInput) {
		t.Errorf("New(nil) = %v", err)
	}
	r, err := reaper.New(client)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		url string
		ret time.Duration
	}{{"", time.Minute}, {"https://sqs.example/1/q", 500 * time.Millisecond}, {"https://sqs.example/1/q", 1500 * time.Millisecond}} {
		if err := r.Add(tc.url, tc.ret); !errors.Is(err, sqsapi.ErrInvalidInput) {
			t.Errorf("Add(%q, %v) = %v, want invalid input", tc.url, tc.ret, err)
		}
	}
	if err := r.AddTagged("https://sqs.example/1/q", time.Minute, time.Time{}); !errors.Is(err, sqsapi.ErrInvalidInput) {
		t.Errorf("AddTagged with a zero time = %v", err)
	}
	if err := r.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := r.Add("https://sqs.example/1/q", time.Minute); !errors.Is(err, reaper.ErrClosed) {
		t.Errorf("Add after Close = %v, want ErrClosed", err)
	}
	if err := r.Run(context.Background()); !errors.Is(err, reaper.ErrClosed) {
		t.Errorf("Run after Close = %v, want ErrClosed", err)
	}
	if called.Load() {
		t.Error("an API call was made")
	}
}

// panicClient records that it was called; tests that must make no call use
// it. Calling any method through the nil embedded interface panics.
type panicClient struct {
	sqsapi.Client
	called *atomic.Bool
}

// stubClient answers the calls of an idle Reaper without a server: tags
// succeed, the coordination queue exists and always holds a hidden token,
// and ReceiveMessage long-polls until its wait or ctx ends.
type stubClient struct {
	sqsapi.Client
	calls atomic.Int64
}

func (s *stubClient) TagQueue(context.Context, *sqs.TagQueueInput, ...func(*sqs.Options)) (*sqs.TagQueueOutput, error) {
	s.calls.Add(1)
	return &sqs.TagQueueOutput{}, nil
}

func (s *stubClient) CreateQueue(_ context.Context, in *sqs.CreateQueueInput, _ ...func(*sqs.Options)) (*sqs.CreateQueueOutput, error) {
	s.calls.Add(1)
	return &sqs.CreateQueueOutput{QueueUrl: aws.String("https://sqs.example/1/" + aws.ToString(in.QueueName))}, nil
}

func (s *stubClient) ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, _ ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	s.calls.Add(1)
	select {
	case <-time.After(time.Duration(in.WaitTimeSeconds) * time.Second):
		return &sqs.ReceiveMessageOutput{}, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (s *stubClient) GetQueueAttributes(context.Context, *sqs.GetQueueAttributesInput, ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error) {
	s.calls.Add(1)
	return &sqs.GetQueueAttributesOutput{Attributes: map[string]string{
		"ApproximateNumberOfMessages": "0", "ApproximateNumberOfMessagesNotVisible": "1", "ApproximateNumberOfMessagesDelayed": "0",
	}}, nil
}

func TestCloseLeavesNoGoroutine(t *testing.T) {
	// Not parallel: it counts the process's goroutines.
	base := runtime.NumGoroutine()
	for _, viaRun := range []bool{false, true} {
		client := &stubClient{}
		r, err := reaper.New(client, func(o *reaper.Options) { o.Period = 2 * time.Second })
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Add("https://sqs.example/1/q", 3*time.Second); err != nil {
			t.Fatal(err)
		}
		runErr := make(chan error, 1)
		if viaRun {
			go func() { runErr <- r.Run(context.Background()) }()
		} else if err := r.Start(); err != nil {
			t.Fatal(err)
		}
		eventually(t, 5*time.Second, "the first lease poll and heartbeat", func() bool {
			st := r.Stats()
			return st.LeaseChecks >= 1 && st.Heartbeats >= 1
		})
		if viaRun {
			// A second Run while one is active is refused.
			if err := r.Run(context.Background()); !errors.Is(err, reaper.ErrRunning) {
				t.Errorf("second Run = %v, want ErrRunning", err)
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		if err := r.Close(ctx); err != nil {
			t.Fatalf("Close: %v", err)
		}
		cancel()
		if viaRun {
			if err := <-runErr; err != nil {
				t.Errorf("Run after Close returned %v, want nil", err)
			}
		}
		n := client.calls.Load()
		time.Sleep(50 * time.Millisecond)
		if client.calls.Load() != n {
			t.Error("API calls after Close returned")
		}
	}
	eventually(t, 2*time.Second, "goroutines back to the baseline", func() bool { return runtime.NumGoroutine() <= base })
}

func TestRunReturnsContextError(t *testing.T) {
	t.Parallel()
	r, err := reaper.New(&stubClient{}, func(o *reaper.Options) { o.DisableSweeping = true })
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	time.Sleep(50 * time.Millisecond)
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Run = %v, want context.Canceled", err)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("Run did not return after cancellation")
	}
	if st := r.Stats(); st.LeaseChecks != 0 {
		t.Errorf("%d lease checks with sweeping disabled", st.LeaseChecks)
	}
}
