package redrive_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/internal/clock"
	"github.com/tempqueues/tempqueues/internal/testkit/observetest"
	"github.com/tempqueues/tempqueues/internal/testkit/sqstestenv"
	"github.com/tempqueues/tempqueues/redrive"
	"github.com/tempqueues/tempqueues/sqsapi"
)

func createFIFO(t testing.TB, client *sqs.Client, base string, contentDedup bool) string {
	t.Helper()
	attrs := map[string]string{"FifoQueue": "true"}
	if contentDedup {
		attrs["ContentBasedDeduplication"] = "true"
	}
	return createQueue(t, client, base+".fifo", attrs)
}

func sendFIFO(t testing.TB, client *sqs.Client, u, body, group, dedup string) {
	t.Helper()
	_, err := client.SendMessage(context.Background(), &sqs.SendMessageInput{
		QueueUrl: aws.String(u), MessageBody: aws.String(body),
		MessageGroupId: aws.String(group), MessageDeduplicationId: aws.String(dedup),
		MessageAttributes: map[string]types.MessageAttributeValue{sqsapi.RequestIDAttribute: strAttr("req-" + dedup)},
	})
	if err != nil {
		t.Fatal(err)
	}
}

// receiveFIFO receives what is visible on the FIFO queue u with its system
// attributes, deleting each message when del is set (a FIFO group hands
// out nothing while a message of it is in flight).
func receiveFIFO(t testing.TB, client *sqs.Client, u string, del bool) []types.Message {
	t.Helper()
	var got []types.Message
	for {
		out, err := client.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(u), MaxNumberOfMessages: 10, WaitTimeSeconds: 1, VisibilityTimeout: 60,
			MessageAttributeNames:       []string{"All"},
			MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Messages) == 0 {
			return got
		}
		got = append(got, out.Messages...)
		if !del {
			return got
		}
		for _, m := range out.Messages {
			if _, err := client.DeleteMessage(context.Background(), &sqs.DeleteMessageInput{QueueUrl: aws.String(u), ReceiptHandle: m.ReceiptHandle}); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestFIFOReplay redrives a FIFO dead-letter queue to a FIFO source queue
// with content-based deduplication: a replay keeps its message group; a
// second dead-lettering of the same body, within SQS's five-minute
// deduplication window, is replayed again rather than taken for a
// duplicate; and the same received message replayed twice arrives once.
func TestFIFOReplay(t *testing.T) {
	t.Parallel()
	sqstestenv.Each(t, func(t *testing.T, b *sqstestenv.Backend) {
		client, _ := b.Client(t)
		dlq := createFIFO(t, client, "dlq", false)
		target := createFIFO(t, client, "target", true)
		parking := createFIFO(t, client, "parking", false)
		// Every jitter draws 0: replays go at once.
		clk := clock.Clock{NowFunc: time.Now, Int64NFunc: func(int64) int64 { return 0 }}
		var rec observetest.Recorder
		rd, err := redrive.New(client, dlq, func(o *redrive.Options) {
			o.Target, o.ParkingQueue, o.Observer = target, parking, &rec
		}, redrive.WithClock(clk))
		if err != nil {
			t.Fatalf("New with a FIFO dead-letter queue: %v", err)
		}
		ctx := context.Background()

		check := func(round string, want int) {
			t.Helper()
			got := receiveFIFO(t, client, target, true)
			if len(got) != want {
				t.Fatalf("%s: %d messages on the target, want %d", round, len(got), want)
			}
			for _, m := range got {
				if g := m.Attributes[string(types.MessageSystemAttributeNameMessageGroupId)]; g != "orders-7" {
					t.Errorf("%s: replayed into group %q, want orders-7", round, g)
				}
				if a := attrValue(m, sqsapi.RedriveAttemptAttribute); a != "1" {
					t.Errorf("%s: attempt %q, want 1", round, a)
				}
				if aws.ToString(m.Body) != "job" {
					t.Errorf("%s: body %q", round, aws.ToString(m.Body))
				}
			}
		}

		sendFIFO(t, client, dlq, "job", "orders-7", "first")
		rep, err := rd.Drain(ctx)
		if err != nil || rep.Replayed != 1 || rep.Failed != 0 {
			t.Fatalf("first Drain = %+v, %v", rep, err)
		}
		check("first replay", 1)

		// The same body dead-lettered again: a new replay, not a duplicate
		// of the first (content-based deduplication would drop it).
		sendFIFO(t, client, dlq, "job", "orders-7", "second")
		rep, err = rd.Drain(ctx)
		if err != nil || rep.Replayed != 1 || rep.Failed != 0 {
			t.Fatalf("second Drain = %+v, %v", rep, err)
		}
		check("second replay", 1)

		// One received message replayed twice (a retried send, a failed
		// delete): the target takes it once.
		sendFIFO(t, client, dlq, "job", "orders-7", "third")
		msgs := receiveFIFO(t, client, dlq, false)
		if len(msgs) != 1 {
			t.Fatalf("received %d from the dead-letter queue, want 1", len(msgs))
		}
		for i := range 2 {
			before := len(redriven(t, &rec))
			done, err := rd.Process(ctx, msgs)
			if events := redriven(t, &rec)[before:]; err != nil || len(done) != 1 || !done[0] || len(events) != 1 || events[0].Action != "replay" {
				t.Fatalf("Process %d = %v, %v; events %+v", i, done, err, events)
			}
		}
		check("replayed twice", 1)
	})
}

// TestFIFODelay: SQS refuses per-message delays on FIFO queues, so a
// replay delay waits on the dead-letter queue instead: the message is
// scheduled there as a copy, the copy is hidden until due, and then sent
// to the target with no delay.
func TestFIFODelay(t *testing.T) {
	t.Parallel()
	sqstestenv.Each(t, func(t *testing.T, b *sqstestenv.Backend) {
		client, _ := b.Client(t)
		dlq := createFIFO(t, client, "dlq", false)
		target := createFIFO(t, client, "target", false)
		parking := createFIFO(t, client, "parking", false)
		now := time.Now()
		// Every jitter draws its ceiling: replay 1 waits BackoffBase.
		clk := clock.Clock{NowFunc: func() time.Time { return now }, Int64NFunc: func(n int64) int64 { return n - 1 }}
		var rec observetest.Recorder
		rd, err := redrive.New(client, dlq, func(o *redrive.Options) {
			o.Target, o.ParkingQueue, o.Observer = target, parking, &rec
			o.BackoffBase = 10 * time.Second
		}, redrive.WithClock(clk))
		if err != nil {
			t.Fatalf("New with a FIFO dead-letter queue: %v", err)
		}
		ctx := context.Background()
		process := func(step string, want string) {
			t.Helper()
			msgs := receiveFIFO(t, client, dlq, false)
			if len(msgs) != 1 {
				t.Fatalf("%s: received %d from the dead-letter queue, want 1", step, len(msgs))
			}
			if g := msgs[0].Attributes[string(types.MessageSystemAttributeNameMessageGroupId)]; g != "orders-7" {
				t.Fatalf("%s: dead letter in group %q, want orders-7", step, g)
			}
			before := len(redriven(t, &rec))
			done, err := rd.Process(ctx, msgs)
			events := redriven(t, &rec)[before:]
			if err != nil || len(done) != 1 || done[0] != (want != "wait") || len(events) != 1 || events[0].Err != nil || events[0].Action != want {
				t.Fatalf("%s: Process = %v, %v, events %+v; want %s", step, done, err, events, want)
			}
			if want == "wait" {
				// Make it visible again for the next step rather than wait
				// out the hop.
				if _, err := client.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: aws.String(dlq), ReceiptHandle: msgs[0].ReceiptHandle}); err != nil {
					t.Fatal(err)
				}
			}
		}

		sendFIFO(t, client, dlq, "job", "orders-7", "first")
		process("fresh", "schedule")
		process("copy, not due", "wait")
		now = now.Add(11 * time.Second)
		process("copy, due", "replay")

		got := receiveFIFO(t, client, target, true)
		if len(got) != 1 || attrValue(got[0], sqsapi.RedriveAttemptAttribute) != "1" ||
			got[0].Attributes[string(types.MessageSystemAttributeNameMessageGroupId)] != "orders-7" {
			t.Fatalf("target holds %+v, want the message, attempt 1, group orders-7", got)
		}
	})
}

// TestFIFOMismatch: a FIFO dead-letter queue goes with FIFO target, and a
// FIFO parking queue needs a FIFO dead-letter queue (whose messages carry
// a group).
func TestFIFOMismatch(t *testing.T) {
	t.Parallel()
	client := sqs.New(sqs.Options{Region: "us-east-1"})
	const q = "https://sqs.us-east-1.amazonaws.com/1/q"
	for name, c := range map[string]struct{ dlq, target, parking string }{
		"fifo dlq, standard target":  {q + ".fifo", q + "t", q + "p.fifo"},
		"standard dlq, fifo target":  {q, q + "t.fifo", q + "p"},
		"standard dlq, fifo parking": {q, q + "t", q + "p.fifo"},
	} {
		_, err := redrive.New(client, c.dlq, func(o *redrive.Options) { o.Target, o.ParkingQueue = c.target, c.parking })
		if !errors.Is(err, sqsapi.ErrInvalidInput) {
			t.Errorf("%s: New = %v, want ErrInvalidInput", name, err)
		}
	}
}
