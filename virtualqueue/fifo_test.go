package virtualqueue_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/internal/testkit/sqstestenv"
	"github.com/tempqueues/tempqueues/internal/testkit/testtime"
	"github.com/tempqueues/tempqueues/sqsapi"
)

// newFIFOEnv creates a FIFO host queue with the given visibility timeout
// (seconds) and extra attributes on the test server.
func newFIFOEnv(t *testing.T, b *sqstestenv.Backend, visibility int, attrs ...string) *env {
	t.Helper()
	raw, counter := b.Client(t)
	name := sqstestenv.QueueName(t, "fifohost")
	a := map[string]string{"FifoQueue": "true", "VisibilityTimeout": strconv.Itoa(visibility)}
	for i := 0; i+1 < len(attrs); i += 2 {
		a[attrs[i]] = attrs[i+1]
	}
	out, err := raw.CreateQueue(context.Background(), &sqs.CreateQueueInput{
		QueueName: aws.String(name[:min(len(name), 75)] + ".fifo"), Attributes: a,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = raw.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: out.QueueUrl})
	})
	counter.Reset()
	return &env{t: t, raw: raw, counter: counter, host: *out.QueueUrl}
}

// Four virtual queues on one FIFO host, fifty messages each, sent and
// received concurrently: each queue gets all of its messages, once, in
// send order, in its own message group.
func TestFIFOHostKeepsEachVirtualQueueInOrder(t *testing.T) {
	t.Parallel()
	sqstestenv.Each(t, func(t *testing.T, b *sqstestenv.Backend) {
		e := newFIFOEnv(t, b, 30)
		c := e.client()
		const queues, perQueue = 4, 50
		var wg sync.WaitGroup
		for i := range queues {
			name := fmt.Sprintf("ordered-%d", i)
			u := e.createVQ(c, name)
			wg.Add(2)
			go func() { // the sender
				defer wg.Done()
				for n := range perQueue {
					if _, err := c.SendMessage(context.Background(), &sqs.SendMessageInput{
						QueueUrl: aws.String(u), MessageBody: aws.String(strconv.Itoa(n)),
					}); err != nil {
						t.Errorf("SendMessage %s #%d: %v", name, n, err)
						return
					}
				}
			}()
			go func() { // the consumer
				defer wg.Done()
				next := 0
				deadline := time.Now().Add(60 * time.Second)
				for next < perQueue && time.Now().Before(deadline) {
					out, err := c.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{
						QueueUrl: aws.String(u), MaxNumberOfMessages: 10, WaitTimeSeconds: 1,
						MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
					})
					if err != nil {
						t.Errorf("ReceiveMessage %s: %v", name, err)
						return
					}
					for _, m := range out.Messages {
						if got := aws.ToString(m.Body); got != strconv.Itoa(next) {
							t.Errorf("%s: got message %s, want %d (in send order, once)", name, got, next)
							return
						}
						if g := m.Attributes["MessageGroupId"]; g != name {
							t.Errorf("%s: MessageGroupId %q, want the virtual queue's name", name, g)
						}
						if _, err := c.DeleteMessage(context.Background(), &sqs.DeleteMessageInput{QueueUrl: aws.String(u), ReceiptHandle: m.ReceiptHandle}); err != nil {
							t.Errorf("DeleteMessage: %v", err)
						}
						next++
					}
				}
				if next != perQueue {
					t.Errorf("%s: received %d of %d messages", name, next, perQueue)
				}
			}()
		}
		wg.Wait()
		if s := c.Stats(); s.Orphaned != 0 {
			t.Fatalf("stats %+v: want no orphans", s)
		}
		t.Logf("%.2f API calls per message: %v", float64(e.counter.Total())/(queues*perQueue), e.counter.Snapshot())
		a, err := c.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{QueueUrl: aws.String(e.host + "#ordered-0"),
			AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameAll}})
		if err != nil || a.Attributes["FifoQueue"] != "true" || a.Attributes["ContentBasedDeduplication"] != "false" {
			t.Fatalf("virtual queue attributes %v, %v", a, err)
		}
		testtime.Eventually(t, 5*time.Second, "host queue empty", func() bool { v, f := e.hostCounts(); return v == 0 && f == 0 })
	})
}

// A consumer that releases a message (visibility 0) or lets its visibility
// end, instead of deleting it, gets that message again before the ones
// behind it, although the host had already received and buffered those:
// the deletes happen in send order.
func TestFIFOVirtualQueueRedeliversInOrder(t *testing.T) {
	t.Parallel()
	sqstestenv.Each(t, func(t *testing.T, b *sqstestenv.Backend) {
		e := newFIFOEnv(t, b, 30)
		c := e.client()
		u := e.createVQ(c, "redelivered")
		const n = 12
		for i := range n {
			send(t, c, u, strconv.Itoa(i))
		}
		failed := map[string]bool{}
		var deleted, seen []string
		ctx := context.Background()
		deadline := time.Now().Add(60 * time.Second)
		for len(deleted) < n && time.Now().Before(deadline) {
			in := &sqs.ReceiveMessageInput{QueueUrl: aws.String(u), MaxNumberOfMessages: 1, WaitTimeSeconds: 2}
			body := strconv.Itoa(len(deleted))
			timesOut := body == "7" && !failed[body]
			if timesOut {
				in.VisibilityTimeout = 1 // and never deleted: it reappears after 1 s
			}
			out, err := c.ReceiveMessage(ctx, in)
			if err != nil {
				t.Fatal(err)
			}
			if len(out.Messages) == 0 {
				continue
			}
			m := out.Messages[0]
			got := aws.ToString(m.Body)
			seen = append(seen, got)
			if got != body {
				t.Fatalf("received %s, want %s (received so far %v)", got, body, seen)
			}
			switch {
			case timesOut:
				failed[got] = true
			case len(deleted)%3 == 1 && !failed[got]:
				failed[got] = true
				if _, err := c.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: aws.String(u), ReceiptHandle: m.ReceiptHandle}); err != nil {
					t.Fatal(err)
				}
			default:
				if _, err := c.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(u), ReceiptHandle: m.ReceiptHandle}); err != nil {
					t.Fatal(err)
				}
				deleted = append(deleted, got)
			}
		}
		if len(deleted) != n {
			t.Fatalf("deleted %v of %d; received %v", deleted, n, seen)
		}
		if len(failed) < 4 {
			t.Fatalf("only %d messages went back; the test exercised too little", len(failed))
		}
	})
}

// Deduplication ids are scoped to the virtual queue: the same id, or with
// content-based deduplication the same body, in two virtual queues is two
// messages; in one it is one.
func TestFIFODeduplicationPerVirtualQueue(t *testing.T) {
	t.Parallel()
	sqstestenv.Each(t, func(t *testing.T, b *sqstestenv.Backend) {
		for _, contentBased := range []bool{false, true} {
			e := newFIFOEnv(t, b, 30, "ContentBasedDeduplication", strconv.FormatBool(contentBased))
			c := e.client()
			a, bq := e.createVQ(c, "dedup-a"), e.createVQ(c, "dedup-b")
			sendID := func(u, body, id string) string {
				in := &sqs.SendMessageInput{QueueUrl: aws.String(u), MessageBody: aws.String(body)}
				if id != "" {
					in.MessageDeduplicationId = aws.String(id)
				}
				out, err := c.SendMessage(context.Background(), in)
				if err != nil {
					t.Fatal(err)
				}
				return aws.ToString(out.MessageId)
			}
			first := sendID(a, "x", "same")
			if again := sendID(a, "y", "same"); again != first {
				t.Errorf("content-based %v: a repeated id in one virtual queue made a new message %s (first %s)", contentBased, again, first)
			}
			if other := sendID(bq, "x", "same"); other == first {
				t.Errorf("content-based %v: the same id in another virtual queue was taken for a duplicate", contentBased)
			}
			// Without an id: equal bodies are duplicates only with
			// content-based deduplication, and only within a queue.
			p, q := sendID(a, "body", ""), sendID(a, "body", "")
			if (p == q) != contentBased {
				t.Errorf("content-based %v: equal bodies gave ids %s and %s", contentBased, p, q)
			}
			if r := sendID(bq, "body", ""); r == p {
				t.Errorf("content-based %v: an equal body in another virtual queue was taken for a duplicate", contentBased)
			}
			want := 2 // "x" and "body" once, or twice without content-based deduplication
			if !contentBased {
				want = 3
			}
			for u, n := range map[string]int{a: want, bq: 2} {
				drainFIFO(t, c, u, n)
				out, err := c.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(u), MaxNumberOfMessages: 10, WaitTimeSeconds: 1})
				if err != nil || len(out.Messages) != 0 {
					t.Errorf("content-based %v: %s has more than %d messages: %v %v", contentBased, u, n, out, err)
				}
			}
		}
	})
}

// FIFO limits are checked before any call.
func TestFIFOSendInputErrors(t *testing.T) {
	t.Parallel()
	b := sqstestenv.SQSTest(t)
	e := newFIFOEnv(t, b, 30)
	c := e.client()
	u := e.createVQ(c, "limits")
	std := newEnv(t, b, 30)
	su := std.createVQ(c, "standard")
	e.counter.Reset()
	for name, in := range map[string]*sqs.SendMessageInput{
		"delay":          {QueueUrl: aws.String(u), MessageBody: aws.String("m"), DelaySeconds: 1},
		"group space":    {QueueUrl: aws.String(u), MessageBody: aws.String("m"), MessageGroupId: aws.String("a b")},
		"group long":     {QueueUrl: aws.String(u), MessageBody: aws.String("m"), MessageGroupId: aws.String(strings.Repeat("g", 129))},
		"dedup empty":    {QueueUrl: aws.String(u), MessageBody: aws.String("m"), MessageDeduplicationId: aws.String("")},
		"dedup unicode":  {QueueUrl: aws.String(u), MessageBody: aws.String("m"), MessageDeduplicationId: aws.String("é")},
		"dedup standard": {QueueUrl: aws.String(su), MessageBody: aws.String("m"), MessageDeduplicationId: aws.String("d")},
	} {
		_, err := c.SendMessage(context.Background(), in)
		if !errors.Is(err, sqsapi.ErrInvalidInput) {
			t.Errorf("%s: error %v, want one matching ErrInvalidInput", name, err)
		}
		// Also from a client that has not opened the host yet.
		if _, err := e.client().SendMessage(context.Background(), in); !errors.Is(err, sqsapi.ErrInvalidInput) {
			t.Errorf("%s, new client: error %v, want one matching ErrInvalidInput", name, err)
		}
	}
	_, err := c.SendMessageBatch(context.Background(), &sqs.SendMessageBatchInput{QueueUrl: aws.String(u), Entries: []types.SendMessageBatchRequestEntry{
		{Id: aws.String("1"), MessageBody: aws.String("m"), DelaySeconds: 2},
	}})
	if !errors.Is(err, sqsapi.ErrInvalidInput) {
		t.Errorf("batch with delay: %v", err)
	}
	if n := e.counter.Total(); n != 0 {
		t.Errorf("%d API calls for rejected input: %v", n, e.counter.Snapshot())
	}
	// A name ending in .fifo belongs on a FIFO host only.
	if _, err := c.CreateQueue(context.Background(), &sqs.CreateQueueInput{QueueName: aws.String("jobs.fifo"),
		Attributes: map[string]string{sqsapi.HostQueueURLAttribute: std.host}}); !errors.Is(err, sqsapi.ErrInvalidInput) {
		t.Errorf(".fifo name on a standard host: %v", err)
	}
	if got := e.createVQ(c, "jobs.fifo"); got != e.host+"#jobs.fifo" {
		t.Errorf("URL %s", got)
	}
}

// drainFIFO receives n messages from the FIFO virtual queue u, deleting
// each batch before the next receive: the queue hands out nothing while a
// message taken from it is in flight.
func drainFIFO(t *testing.T, c sqsapi.Client, u string, n int) []types.Message {
	t.Helper()
	var got []types.Message
	deadline := time.Now().Add(10 * time.Second)
	for len(got) < n && time.Now().Before(deadline) {
		out, err := c.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(u), MaxNumberOfMessages: 10, WaitTimeSeconds: 1})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range out.Messages {
			if _, err := c.DeleteMessage(context.Background(), &sqs.DeleteMessageInput{QueueUrl: aws.String(u), ReceiptHandle: m.ReceiptHandle}); err != nil {
				t.Fatal(err)
			}
		}
		got = append(got, out.Messages...)
	}
	if len(got) != n {
		t.Fatalf("received %d of %d messages from %s", len(got), n, u)
	}
	return got
}
