package reap_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/internal/reap"
	"github.com/tempqueues/tempqueues/internal/testkit/leakcheck"
	"github.com/tempqueues/tempqueues/internal/testkit/testtime"
	"github.com/tempqueues/tempqueues/observe"
	"github.com/tempqueues/tempqueues/sqsapi"
)

func TestOptionsValidatedBeforeAnyCall(t *testing.T) {
	// Not parallel: it checks that invalid options start no goroutine.
	var called atomic.Bool
	client := &panicClient{called: &called}
	bad := []struct {
		param string
		fn    func(*reap.Config)
	}{
		{"Prefix", func(o *reap.Config) { o.Prefix = "has space" }},
		{"Prefix", func(o *reap.Config) { o.Prefix = string(make([]byte, 80)) }},
		{"Period", func(o *reap.Config) { o.Period = time.Second }},
		{"Period", func(o *reap.Config) { o.Period = 13 * time.Hour }},
	}
	for _, b := range bad {
		for name, mk := range map[string]func() error{
			"New":        func() error { _, err := reap.New(client, b.fn); return err },
			"NewSweeper": func() error { _, err := reap.NewSweeper(client, b.fn); return err },
		} {
			err := mk()
			var ie *sqsapi.InvalidInputError
			if !errors.Is(err, sqsapi.ErrInvalidInput) || !errors.As(err, &ie) || ie.Param != b.param {
				t.Errorf("%s with bad %s: err = %v", name, b.param, err)
			}
		}
	}
	if _, err := reap.New(nil); !errors.Is(err, sqsapi.ErrInvalidInput) {
		t.Errorf("New(nil) = %v", err)
	}
	if _, err := reap.NewSweeper(nil); !errors.Is(err, sqsapi.ErrInvalidInput) {
		t.Errorf("NewSweeper(nil) = %v", err)
	}
	leakcheck.Check(t)

	r, err := reap.New(client, func(o *reap.Config) { o.DisableSweeping = true })
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
	if err := r.AddTagged("https://sqs.example/1/q", time.Minute, map[string]string{sqsapi.RetentionTag: "60"}); !errors.Is(err, sqsapi.ErrInvalidInput) {
		t.Errorf("AddTagged without a heartbeat tag = %v", err)
	}
	// With sweeping disabled and no queue, a Reaper runs no goroutine.
	leakcheck.Check(t)
	if err := r.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := r.Add("https://sqs.example/1/q", time.Minute); !errors.Is(err, reap.ErrClosed) || !errors.Is(err, sqsapi.ErrClosed) {
		t.Errorf("Add after Close = %v, want ErrClosed", err)
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
// succeed, the fleet is empty, the coordination queue exists and always holds a hidden token,
// and ReceiveMessage long-polls for 20 s, or until ctx ends, whatever
// WaitTimeSeconds says, so that Close must cancel it to be quick.
type stubClient struct {
	sqsapi.Client
	calls, receiving atomic.Int64
}

func (s *stubClient) TagQueue(context.Context, *sqs.TagQueueInput, ...func(*sqs.Options)) (*sqs.TagQueueOutput, error) {
	s.calls.Add(1)
	return &sqs.TagQueueOutput{}, nil
}

func (s *stubClient) CreateQueue(_ context.Context, in *sqs.CreateQueueInput, _ ...func(*sqs.Options)) (*sqs.CreateQueueOutput, error) {
	s.calls.Add(1)
	return &sqs.CreateQueueOutput{QueueUrl: aws.String("https://sqs.example/1/" + aws.ToString(in.QueueName))}, nil
}

func (s *stubClient) ReceiveMessage(ctx context.Context, _ *sqs.ReceiveMessageInput, _ ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	s.calls.Add(1)
	s.receiving.Add(1)
	defer s.receiving.Add(-1)
	select {
	case <-time.After(20 * time.Second):
		return &sqs.ReceiveMessageOutput{}, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (s *stubClient) ListQueues(context.Context, *sqs.ListQueuesInput, ...func(*sqs.Options)) (*sqs.ListQueuesOutput, error) {
	s.calls.Add(1)
	return &sqs.ListQueuesOutput{}, nil
}

func (s *stubClient) GetQueueAttributes(context.Context, *sqs.GetQueueAttributesInput, ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error) {
	s.calls.Add(1)
	return &sqs.GetQueueAttributesOutput{Attributes: map[string]string{
		"ApproximateNumberOfMessages": "0", "ApproximateNumberOfMessagesNotVisible": "1", "ApproximateNumberOfMessagesDelayed": "0",
	}}, nil
}

// TestCloseIsQuickAndComplete closes a Reaper in the middle of a lease long
// poll: Close cancels it, returns nil within a second, is idempotent, and
// leaves no goroutine and no call behind.
func TestCloseIsQuickAndComplete(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// Not parallel: it checks the process's goroutines.
		client := &stubClient{}
		r, err := reap.New(client, func(o *reap.Config) { o.Period = 2 * time.Second })
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Add("https://sqs.example/1/q", 3*time.Second); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if client.receiving.Load() != 1 || r.Stats().Heartbeats < 1 {
			t.Fatalf("%d lease polls in flight, %d heartbeats: want the first of each", client.receiving.Load(), r.Stats().Heartbeats)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		start := time.Now()
		if err := r.Close(ctx); err != nil {
			t.Fatalf("Close: %v", err)
		}
		if d := time.Since(start); d != 0 {
			t.Errorf("Close took %v during a lease poll, want it at once", d)
		}
		if err := r.Close(ctx); err != nil {
			t.Errorf("second Close: %v", err)
		}
		leakcheck.Check(t)
		n := client.calls.Load()
		testtime.Advance(time.Hour)
		if client.calls.Load() != n {
			t.Error("API calls after Close returned")
		}
		if st := r.Stats(); st.LeaseErrors != 0 || st.HeartbeatErrors != 0 {
			t.Errorf("calls cut short by Close counted as errors: %+v", st)
		}
	})
}

// TestCloseReportsAbandonedWait checks the other half of the lifecycle
// contract: when a goroutine cannot stop before ctx ends (here an
// Observer that blocks on QueueGone), Close returns ctx's error, and a
// later Close returns the same result (internal/lifecycle).
func TestCloseReportsAbandonedWait(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		m := newMemSQS()
		entered, release := make(chan struct{}), make(chan struct{})
		r, err := reap.New(m, func(o *reap.Config) {
			o.DisableSweeping = true
			o.Observer = observe.Func(func(context.Context, observe.Event) func(*types.Message, error) {
				close(entered)
				<-release
				return nil
			})
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Add("https://sqs.example/1/missing", time.Minute); err != nil {
			t.Fatal(err)
		}
		<-entered
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		if err := r.Close(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Close = %v, want DeadlineExceeded", err)
		}
		close(release)
		if err := r.Close(context.Background()); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("second Close = %v, want the first's result", err)
		}
	})
}

// TestDisableSweeping checks a heartbeat-only Reaper makes no lease call.
func TestDisableSweeping(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		client := &stubClient{}
		r, err := reap.New(client, func(o *reap.Config) { o.DisableSweeping = true; o.Period = 2 * time.Second })
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Add("https://sqs.example/1/q", time.Minute); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if n := r.Stats().Heartbeats; n != 1 {
			t.Fatalf("%d heartbeats, want the first at once", n)
		}
		testtime.Advance(10 * time.Second) // less than the heartbeat interval of 20 s (±10%), 5 periods
		if n := client.calls.Load(); n != 1 {
			t.Errorf("%d calls, want the one TagQueue", n)
		}
		if err := r.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		if lc := reap.LeaseCountsOf(r); lc.Checks != 0 {
			t.Errorf("%d lease checks with sweeping disabled", lc.Checks)
		}
	})
}
