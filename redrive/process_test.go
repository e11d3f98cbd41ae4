package redrive_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/internal/clock"
	"github.com/tempqueues/tempqueues/internal/testkit/observetest"
	"github.com/tempqueues/tempqueues/internal/testkit/sqstestenv"
	"github.com/tempqueues/tempqueues/redrive"
	"github.com/tempqueues/tempqueues/sqsapi"
)

// TestProcessDecidesAsDrain sends the same messages to two dead-letter
// queues, drains one and gives the other's messages to Process, under the
// same clock: every message gets the same action, attempt and delay.
func TestProcessDecidesAsDrain(t *testing.T) {
	t.Parallel()
	sqstestenv.Each(t, func(t *testing.T, b *sqstestenv.Backend) {
		client, _ := b.Client(t)
		now := time.Now()
		clk := clock.Clock{NowFunc: func() time.Time { return now }, Int64NFunc: func(n int64) int64 { return n - 1 }}
		attempts := []string{"", "1", "2", "3", "x"} // 3 = MaxAttempts: park; x: malformed
		results := make([]map[string]event, 2)
		for run := range 2 {
			dlq := createQueue(t, client, fmt.Sprint("pdlq", run), nil)
			target := createQueue(t, client, fmt.Sprint("ptarget", run), nil)
			parking := createQueue(t, client, fmt.Sprint("pparking", run), nil)
			for i, a := range attempts {
				attrs := map[string]types.MessageAttributeValue{sqsapi.RequestIDAttribute: strAttr(fmt.Sprint("r", i))}
				if a != "" {
					attrs[sqsapi.RedriveAttemptAttribute] = strAttr(a)
				}
				sendMsg(t, client, dlq, fmt.Sprint("m", i), attrs)
			}
			var rec observetest.Recorder
			rd, err := redrive.New(client, dlq, func(o *redrive.Options) {
				o.Target, o.ParkingQueue, o.Observer = target, parking, &rec
				o.MaxAttempts = 3
				o.BackoffBase, o.BackoffCap = 300*time.Second, 2400*time.Second // attempt 2 and 3 go beyond 900 s
			}, redrive.WithClock(clk))
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]event{}
			if run == 0 {
				if _, err := rd.Drain(context.Background()); err != nil {
					t.Fatal(err)
				}
				for _, ev := range redriven(t, &rec) {
					got[ev.RequestID] = ev
				}
			} else {
				msgs := receiveAll(t, client, dlq, 5*time.Second)
				if len(msgs) != len(attempts) {
					t.Fatalf("received %d of %d", len(msgs), len(attempts))
				}
				done, err := rd.Process(context.Background(), msgs)
				if err != nil {
					t.Fatal(err)
				}
				events := redriven(t, &rec)
				if len(done) != len(msgs) || len(events) != len(msgs) {
					t.Fatalf("Process: %d results, %d events for %d messages", len(done), len(events), len(msgs))
				}
				for i, ev := range events {
					if ev.MessageID != aws.ToString(msgs[i].MessageId) {
						t.Errorf("event %d is for %s, message %s", i, ev.MessageID, aws.ToString(msgs[i].MessageId))
					}
					if !done[i] {
						t.Errorf("message of event %+v not done", ev)
					}
					got[ev.RequestID] = ev
				}
				if c := counts(t, client, dlq); c[0]+c[1] != 0 {
					t.Errorf("dead-letter queue holds %v after Process, want only the delayed scheduled copies", c)
				}
			}
			results[run] = got
		}
		for id, d := range results[0] {
			p := results[1][id]
			if d.Action != p.Action || d.Attempt != p.Attempt || d.Delay != p.Delay || !errors.Is(p.Reason, d.Reason) {
				t.Errorf("%s: Drain %s/%d/%v/%v, Process %s/%d/%v/%v", id, d.Action, d.Attempt, d.Delay, d.Reason, p.Action, p.Attempt, p.Delay, p.Reason)
			}
		}
		if len(results[0]) != len(attempts) || len(results[1]) != len(attempts) {
			t.Errorf("events: Drain %d, Process %d, want %d each", len(results[0]), len(results[1]), len(attempts))
		}
	})
}
