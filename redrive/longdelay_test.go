package redrive_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/tempqueues/tempqueues/internal/clock"
	"github.com/tempqueues/tempqueues/internal/testkit/observetest"
	"github.com/tempqueues/tempqueues/redrive"
	"github.com/tempqueues/tempqueues/sqsapi"
	"github.com/tempqueues/tempqueues/sqstest"
)

// TestDelayBeyond900Seconds replays with a 20-hour delay on sqstest's
// manual clock: the message waits on the dead-letter queue (a delayed copy,
// then visibility hops of at most 12 hours) and reaches the target when
// due, without a call SQS would reject.
func TestDelayBeyond900Seconds(t *testing.T) {
	t.Parallel()
	clk := sqstest.NewClock(time.Unix(1_767_225_600, 0))
	srv := sqstest.Start(t, func(o *sqstest.Options) { o.Clock = clk })
	client := srv.Client()
	dlq := createQueue(t, client, "dlq", nil)
	target := createQueue(t, client, "target", nil)
	parking := createQueue(t, client, "parking", nil)
	sendMsg(t, client, dlq, "late", nil)
	start := clk.Now()
	const delay = 20 * time.Hour

	var rec observetest.Recorder
	rd, err := redrive.New(client, dlq, func(o *redrive.Options) {
		o.Target, o.ParkingQueue = target, parking
		o.BackoffBase, o.BackoffCap = delay, delay
		o.Observer = &rec
	}, redrive.WithClock(clock.Clock{NowFunc: clk.Now, Int64NFunc: func(n int64) int64 { return n - 1 }}))
	if err != nil {
		t.Fatal(err)
	}
	// drain runs Drain, moving the clock one second whenever its final
	// long poll is parked, so that it ends.
	drain := func() redrive.Report {
		t.Helper()
		done := make(chan struct{})
		var rep redrive.Report
		var err error
		go func() { rep, err = rd.Drain(context.Background()); close(done) }()
		for {
			select {
			case <-done:
				if err != nil {
					t.Fatal(err)
				}
				return rep
			case <-time.After(5 * time.Millisecond):
				if srv.Parked() > 0 {
					clk.Advance(time.Second)
				}
			}
		}
	}
	total := redrive.Report{}
	for i := 0; i < 10 && total.Replayed == 0; i++ {
		rep := drain()
		total.Scheduled += rep.Scheduled
		total.Waiting += rep.Waiting
		total.Replayed += rep.Replayed
		total.Failed += rep.Failed
		if rep.Failed > 0 {
			t.Fatalf("a call failed: %v", rep.Errors)
		}
		// Jump to when the dead-letter queue shows a message again.
		if total.Replayed == 0 {
			next := clk.Now().Add(12 * time.Hour)
			events := redriven(t, &rec)
			for _, ev := range events[len(events)-rep.Received:] {
				switch ev.Action {
				case "schedule":
					next = clk.Now().Add(min(900*time.Second, ev.Delay-900*time.Second))
				case "wait":
					// Hidden until 900 s before due, 12 h (less a minute) at most.
					next = clk.Now().Add(min(ev.Delay-900*time.Second, 12*time.Hour-time.Minute))
				}
			}
			clk.Advance(next.Add(time.Second).Sub(clk.Now()))
		}
	}
	events := redriven(t, &rec)
	if total.Scheduled != 1 || total.Waiting != 2 || total.Replayed != 1 {
		t.Fatalf("totals %+v, events %+v", total, events)
	}
	last := events[len(events)-1]
	if arrival := clk.Now().Add(last.Delay); arrival.Sub(start) < delay || arrival.Sub(start) > delay+time.Minute {
		t.Fatalf("the replay arrives %v after the start, want %v", arrival.Sub(start), delay)
	}
	clk.Advance(last.Delay)
	out, err := client.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(target), MaxNumberOfMessages: 10, MessageAttributeNames: []string{"All"}})
	if err != nil {
		t.Fatal(err)
	}
	got := out.Messages
	if len(got) != 1 || aws.ToString(got[0].Body) != "late" || attrValue(got[0], sqsapi.RedriveAttemptAttribute) != "1" {
		t.Fatalf("target holds %+v", got)
	}
}
