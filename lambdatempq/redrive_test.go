package lambdatempq_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/internal/testkit/sqstestenv"
	"github.com/tempqueues/tempqueues/lambdatempq"
	"github.com/tempqueues/tempqueues/observe"
	"github.com/tempqueues/tempqueues/redrive"
	"github.com/tempqueues/tempqueues/sqsapi"
)

// TestRedriveMovesABatch is the acceptance test of the redrive function: a
// dead-letter batch goes back to its target with the attempt counts and
// delays of redrive.Run, counts written as sqs-dlq-replay-nb go on, a
// message past MaxAttempts is parked, and a scheduled copy received before
// it is due stays on the dead-letter queue, reported as a failure so the
// event source mapping does not delete it.
func TestRedriveMovesABatch(t *testing.T) {
	sqstestenv.Each(t, func(t *testing.T, b *sqstestenv.Backend) {
		ctx := context.Background()
		client, _ := b.Client(t)
		qs := newQueues(t, client)
		dlq, dlqARN := qs.create("ldlq")
		target, _ := qs.create("ltarget")
		parking, _ := qs.create("lparking")
		due := time.Now().Add(5 * time.Hour).UnixMilli()
		cases := []struct {
			body  string
			attrs map[string]types.MessageAttributeValue
		}{
			{"fresh", nil},
			{"ours-1", map[string]types.MessageAttributeValue{sqsapi.RedriveAttemptAttribute: str("1")}},
			{"aws-1", map[string]types.MessageAttributeValue{lambdatempq.ReplayCountAttribute: {DataType: aws.String("Number"), StringValue: aws.String("1")}}},
			{"aws-3", map[string]types.MessageAttributeValue{lambdatempq.ReplayCountAttribute: {DataType: aws.String("Number"), StringValue: aws.String("3")}}},
			{"scheduled", map[string]types.MessageAttributeValue{sqsapi.RedriveAttemptAttribute: str(fmt.Sprintf("2@%d", due))}},
		}
		for _, c := range cases {
			if _, err := client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &dlq, MessageBody: aws.String(c.body), MessageAttributes: c.attrs}); err != nil {
				t.Fatal(err)
			}
		}
		var events []observe.Event // Process tells its observer on the function's goroutine
		fn, err := lambdatempq.NewRedrive(client, dlq, func(o *redrive.Options) {
			o.Target, o.ParkingQueue = target, parking
			o.MaxAttempts = 3
			o.BackoffBase, o.BackoffCap = time.Second, 2*time.Second
			o.Observer = observe.Func(func(_ context.Context, e observe.Event) func(*types.Message, error) {
				events = append(events, e)
				return nil
			})
		})
		if err != nil {
			t.Fatal(err)
		}
		msgs := receive(t, client, dlq, len(cases), 10*time.Second)
		if len(msgs) != len(cases) {
			t.Fatalf("received %d of %d", len(msgs), len(cases))
		}
		resp, err := fn.HandleSQSEvent(ctx, lambdatempq.Event(dlqARN, msgs))
		if err != nil {
			t.Fatal(err)
		}
		var scheduledID string
		for _, m := range msgs {
			if aws.ToString(m.Body) == "scheduled" {
				scheduledID = aws.ToString(m.MessageId)
			}
		}
		if len(resp.BatchItemFailures) != 1 || resp.BatchItemFailures[0].ItemIdentifier != scheduledID {
			t.Errorf("batch item failures %v, want only the scheduled copy %s", resp.BatchItemFailures, scheduledID)
		}
		// What went where, with which count and delay ceiling.
		want := map[string]struct {
			action  string
			attempt int
		}{
			"fresh": {"replay", 1}, "ours-1": {"replay", 2}, "aws-1": {"replay", 2},
			"aws-3": {"park", 3}, "scheduled": {"wait", 2},
		}
		if len(events) != len(cases) {
			t.Fatalf("%d events, want %d", len(events), len(cases))
		}
		for i, ev := range events {
			body := aws.ToString(msgs[i].Body)
			w := want[body]
			d, _ := ev.Detail.(redrive.Detail)
			if ev.Kind != observe.Redriven || ev.Reason != w.action || d.Attempt != w.attempt || ev.Err != nil {
				t.Errorf("%s: %v %s attempt %d err %v, want %s attempt %d", body, ev.Kind, ev.Reason, d.Attempt, ev.Err, w.action, w.attempt)
			}
			if ceiling := time.Second << (w.attempt - 1); ev.Reason == "replay" && ev.Duration > min(ceiling, 2*time.Second) {
				t.Errorf("%s: delay %v above the full-jitter ceiling", body, ev.Duration)
			}
		}
		replayed := receive(t, client, target, 3, 15*time.Second)
		got := map[string]string{}
		for _, m := range replayed {
			got[aws.ToString(m.Body)] = attr(m, sqsapi.RedriveAttemptAttribute) + "/" + attr(m, lambdatempq.ReplayCountAttribute)
		}
		for body, n := range map[string]int{"fresh": 1, "ours-1": 2, "aws-1": 2} {
			if got[body] != strconv.Itoa(n)+"/<none>" {
				t.Errorf("%s on the target: attempt/replay-nb %q, want %d/<none>", body, got[body], n)
			}
		}
		parked := receive(t, client, parking, 1, 10*time.Second)
		// Parked with its count, carried over into the attempt attribute.
		if len(parked) != 1 || aws.ToString(parked[0].Body) != "aws-3" || attr(parked[0], sqsapi.RedriveAttemptAttribute) != "3" || attr(parked[0], lambdatempq.ReplayCountAttribute) != "<none>" {
			t.Errorf("parked %v, want aws-3 with attempt 3", parked)
		}
	})
}
