package backlog_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/backlog"
	"github.com/tempqueues/tempqueues/internal/awserr"
	"github.com/tempqueues/tempqueues/internal/testkit/sqstestenv"
	"github.com/tempqueues/tempqueues/observe"
	"github.com/tempqueues/tempqueues/sqsapi"
)

func TestCompute(t *testing.T) {
	c := backlog.Counts{Visible: 1000, InFlight: 40, Delayed: 60}
	cases := []struct {
		name string
		fn   func(*backlog.Options)
		want backlog.Figures
	}{
		{"aws recipe", func(o *backlog.Options) {
			o.Workers, o.AcceptableLatency, o.ProcessingTime = 4, 10*time.Second, 100*time.Millisecond
		}, backlog.Figures{Messages: 1000, Workers: 4, BacklogPerWorker: 250, TargetBacklogPerWorker: 100, DesiredWorkers: 10}},
		{"in flight and delayed", func(o *backlog.Options) {
			o.IncludeInFlight, o.IncludeDelayed = true, true
			o.Workers, o.AcceptableLatency, o.ProcessingTime = 4, 10*time.Second, 100*time.Millisecond
		}, backlog.Figures{Messages: 1100, Workers: 4, BacklogPerWorker: 275, TargetBacklogPerWorker: 100, DesiredWorkers: 11}},
		{"concurrency", func(o *backlog.Options) {
			o.Workers, o.MaxConcurrency, o.AcceptableLatency, o.ProcessingTime = 2, 10, time.Second, 100*time.Millisecond
		}, backlog.Figures{Messages: 1000, Workers: 2, BacklogPerWorker: 500, TargetBacklogPerWorker: 100, DesiredWorkers: 10}},
		{"clamped to max", func(o *backlog.Options) {
			o.Workers, o.AcceptableLatency, o.ProcessingTime, o.MaxWorkers = 4, time.Second, 100*time.Millisecond, 50
		}, backlog.Figures{Messages: 1000, Workers: 4, BacklogPerWorker: 250, TargetBacklogPerWorker: 10, DesiredWorkers: 50}},
		{"latency below processing time", func(o *backlog.Options) {
			o.Workers, o.AcceptableLatency, o.ProcessingTime = 1, 50*time.Millisecond, 200*time.Millisecond
		}, backlog.Figures{Messages: 1000, Workers: 1, BacklogPerWorker: 1000, TargetBacklogPerWorker: 0.25, DesiredWorkers: 4000}},
		{"no workers", func(o *backlog.Options) {
			o.AcceptableLatency, o.ProcessingTime = 10*time.Second, 100*time.Millisecond
		}, backlog.Figures{Messages: 1000, BacklogPerWorker: 1000, TargetBacklogPerWorker: 100, DesiredWorkers: 10}},
		{"unknown processing time", func(o *backlog.Options) {
			o.AcceptableLatency = time.Second
		}, backlog.Figures{Messages: 1000, BacklogPerWorker: 1000, DesiredWorkers: 1}},
	}
	for _, tc := range cases {
		got, err := backlog.Compute(c, tc.fn)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		tc.want.Counts = c
		got.ProcessingTime = 0
		if got != tc.want {
			t.Errorf("%s:\n got %+v\nwant %+v", tc.name, got, tc.want)
		}
	}
	empty, _ := backlog.Compute(backlog.Counts{}, func(o *backlog.Options) {
		o.Workers, o.AcceptableLatency, o.ProcessingTime, o.MinWorkers = 3, time.Second, time.Second, 2
	})
	if empty.DesiredWorkers != 2 || empty.BacklogPerWorker != 0 {
		t.Errorf("empty queue: %+v, want the minimum", empty)
	}
	for name, fn := range map[string]func(*backlog.Options){
		"negative workers": func(o *backlog.Options) { o.Workers = -1 },
		"min > max":        func(o *backlog.Options) { o.MinWorkers, o.MaxWorkers = 5, 2 },
		"negative latency": func(o *backlog.Options) { o.AcceptableLatency = -time.Second },
	} {
		if _, err := backlog.Compute(c, fn); !errors.Is(err, sqsapi.ErrInvalidInput) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestMeasureKnownQueueStates puts 7 visible, 2 in-flight and 3 delayed
// messages in a queue and checks the counts and figures on each server.
func TestMeasureKnownQueueStates(t *testing.T) {
	sqstestenv.Each(t, func(t *testing.T, b *sqstestenv.Backend) {
		client, counter := b.Client(t)
		ctx := context.Background()
		out, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(sqstestenv.QueueName(t, "q"))})
		if err != nil {
			t.Fatal(err)
		}
		q := aws.ToString(out.QueueUrl)
		defer client.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: out.QueueUrl})
		for i := range 12 {
			var delay int32
			if i >= 9 {
				delay = 600
			}
			if _, err := client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &q, MessageBody: aws.String("m"), DelaySeconds: delay}); err != nil {
				t.Fatal(err)
			}
		}
		got, err := client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &q, MaxNumberOfMessages: 2, VisibilityTimeout: 600})
		if err != nil || len(got.Messages) != 2 {
			t.Fatalf("receive: %v, %d messages", err, len(got.Messages))
		}
		counter.Reset()
		f, err := backlog.Measure(ctx, client, q, func(o *backlog.Options) {
			o.Workers, o.AcceptableLatency, o.ProcessingTime = 2, time.Second, 500*time.Millisecond
		})
		if err != nil {
			t.Fatal(err)
		}
		if f.Counts != (backlog.Counts{Visible: 7, InFlight: 2, Delayed: 3}) || f.Messages != 7 || f.BacklogPerWorker != 3.5 ||
			f.TargetBacklogPerWorker != 2 || f.DesiredWorkers != 4 {
			t.Errorf("figures %+v", f)
		}
		if n := counter.Total(); n != 1 {
			t.Errorf("Measure made %d calls, want 1 GetQueueAttributes", n)
		}
		f, err = backlog.Measure(ctx, client, q, func(o *backlog.Options) {
			o.IncludeInFlight, o.IncludeDelayed = true, true
			o.Workers, o.AcceptableLatency, o.ProcessingTime = 2, time.Second, 500*time.Millisecond
		})
		if err != nil || f.Messages != 12 || f.DesiredWorkers != 6 {
			t.Errorf("all counted: %+v, %v", f, err)
		}
		_, err = backlog.Measure(ctx, client, q+"-missing")
		if !awserr.IsQueueDoesNotExist(err) {
			t.Errorf("missing queue: %v", err)
		}
	})
}

// TestMonitor measures through a Monitor with a changing processing time
// and reads the figures through its Observer, Last and the expvar.
func TestMonitor(t *testing.T) {
	b := sqstestenv.SQSTest(t)
	client, _ := b.Client(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("work")})
	if err != nil {
		t.Fatal(err)
	}
	for range 30 {
		if _, err := client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: out.QueueUrl, MessageBody: aws.String("m")}); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	processing := 100 * time.Millisecond
	got := make(chan backlog.Figures, 10)
	m, err := backlog.NewMonitor(client, *out.QueueUrl, func(o *backlog.MonitorOptions) {
		o.Period = time.Second
		o.Inputs = func() backlog.Options {
			mu.Lock()
			defer mu.Unlock()
			return backlog.Options{AcceptableLatency: time.Second, ProcessingTime: processing, Workers: 3}
		}
		o.Observer = observe.Func(func(_ context.Context, e observe.Event) func(*types.Message, error) {
			if e.Kind != observe.Measured || e.Queue != *out.QueueUrl || e.Err != nil {
				t.Errorf("event %+v", e)
			}
			got <- e.Detail.(backlog.Figures)
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	first := <-got
	if first.Messages != 30 || first.Workers != 3 || first.TargetBacklogPerWorker != 10 || first.DesiredWorkers != 3 {
		t.Fatalf("first figures %+v", first)
	}
	mu.Lock()
	processing = 500 * time.Millisecond
	mu.Unlock()
	second := <-got
	if second.TargetBacklogPerWorker != 2 || second.DesiredWorkers != 15 {
		t.Fatalf("second figures %+v", second)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	last, at, err := m.Last()
	if err != nil || at.IsZero() || last.DesiredWorkers != 15 {
		t.Fatalf("Last = %+v, %v, %v", last, at, err)
	}
	var v map[string]any
	if err := json.Unmarshal([]byte(m.Var().String()), &v); err != nil {
		t.Fatal(err)
	}
	if v["desired_workers"] != float64(15) || v["counted"] != "visible" || v["visible"] != float64(30) || v["measured_at"] == "" || v["queue_url"] != *out.QueueUrl {
		t.Fatalf("expvar value %v", v)
	}
}

// NewMonitor validates its own fields and the figures' Options.
func TestNewMonitorRejectsBadOptions(t *testing.T) {
	for name, fn := range map[string]func(*backlog.MonitorOptions){
		"short period": func(o *backlog.MonitorOptions) { o.Period = time.Millisecond },
		"negative workers": func(o *backlog.MonitorOptions) {
			o.Inputs = func() backlog.Options { return backlog.Options{Workers: -1} }
		},
	} {
		if _, err := backlog.NewMonitor(sqs.New(sqs.Options{Region: "us-east-1"}), "https://sqs.us-east-1.amazonaws.com/123456789012/q", fn); !errors.Is(err, sqsapi.ErrInvalidInput) {
			t.Errorf("%s: err = %v, want ErrInvalidInput", name, err)
		}
	}
}
