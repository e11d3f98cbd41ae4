package callcount_test

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/internal/callcount"
	"github.com/tempqueues/tempqueues/internal/testkit/sqstestenv"
	"github.com/tempqueues/tempqueues/sqstest"
)

const kib = 1 << 10

func TestBilledRequests(t *testing.T) {
	for _, c := range []struct {
		payload int
		want    int64
	}{{0, 1}, {1, 1}, {64 * kib, 1}, {64*kib + 1, 2}, {200 * kib, 4}, {256 * kib, 4}, {1 << 20, 16}} {
		if got := callcount.BilledRequests(c.payload); got != c.want {
			t.Errorf("BilledRequests(%d) = %d, want %d", c.payload, got, c.want)
		}
	}
}

// TestRegisterCountsBilledRequests sends and receives messages of known
// payload through a real SDK client on sqstest, over TCP and in process,
// and checks what the middleware bills each call, and the bytes it saw.
func TestRegisterCountsBilledRequests(t *testing.T) {
	for _, b := range []func(testing.TB, ...func(*sqstest.Options)) *sqstestenv.Backend{sqstestenv.SQSTest, sqstestenv.InProcess} {
		backend := b(t)
		t.Run(backend.Endpoint, func(t *testing.T) {
			testBilled(t, backend)
		})
	}
}

func testBilled(t *testing.T, b *sqstestenv.Backend) {
	ctx := context.Background()
	client, counter := b.Client(t)
	q, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(sqstestenv.QueueName(t, "billed"))})
	if err != nil {
		t.Fatal(err)
	}
	url := q.QueueUrl
	// step runs one call and checks what the counter added for op.
	step := func(name, op string, wantCalls, wantBilled int64, call func() error) callcount.Tally {
		t.Helper()
		before := counter.Tally()
		if err := call(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		d := counter.Tally().Since(before)
		if d.Calls[op] != wantCalls || d.Billed[op] != wantBilled || len(d.Calls) != 1 || len(d.Billed) != 1 {
			t.Errorf("%s: calls %v, billed %v; want %s %d calls, %d billed", name, d.Calls, d.Billed, op, wantCalls, wantBilled)
		}
		return d
	}
	receive := func(out **sqs.ReceiveMessageOutput) func() error {
		return func() (err error) {
			*out, err = client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: url, MaxNumberOfMessages: 10, MessageAttributeNames: []string{"All"}})
			return err
		}
	}

	var empty *sqs.ReceiveMessageOutput
	step("empty receive", "ReceiveMessage", 1, 1, receive(&empty))
	if len(empty.Messages) != 0 {
		t.Fatalf("empty queue returned %d messages", len(empty.Messages))
	}

	big := strings.Repeat("a", 200*kib)
	d := step("SendMessage of 200 KiB", "SendMessage", 1, 4, func() error {
		_, err := client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: url, MessageBody: aws.String(big)})
		return err
	})
	// The JSON request holds the body and a little more; the response is
	// small.
	if d.SentBytes < 200*kib || d.SentBytes > 201*kib || d.ReceivedBytes <= 0 || d.ReceivedBytes > kib {
		t.Errorf("SendMessage of 200 KiB: %d bytes sent, %d received", d.SentBytes, d.ReceivedBytes)
	}
	if _, err := client.PurgeQueue(ctx, &sqs.PurgeQueueInput{QueueUrl: url}); err != nil {
		t.Fatal(err)
	}

	step("SendMessageBatch of 10 x 10 KiB", "SendMessageBatch", 1, 2, func() error {
		entries := make([]types.SendMessageBatchRequestEntry, 10)
		for i := range entries {
			entries[i] = types.SendMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), MessageBody: aws.String(strings.Repeat("b", 10*kib))}
		}
		out, err := client.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: url, Entries: entries})
		if err == nil && len(out.Successful) != 10 {
			t.Errorf("batch: %d sent, failures %v", len(out.Successful), out.Failed)
		}
		return err
	})
	if _, err := client.PurgeQueue(ctx, &sqs.PurgeQueueInput{QueueUrl: url}); err != nil {
		t.Fatal(err)
	}

	// A Binary attribute counts its raw bytes, not the base64 of the wire:
	// 64 KiB of them and a one-byte body are two requests.
	step("SendMessage with a 64 KiB Binary attribute", "SendMessage", 1, 2, func() error {
		_, err := client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: url, MessageBody: aws.String("x"),
			MessageAttributes: map[string]types.MessageAttributeValue{"b": {DataType: aws.String("Binary"), BinaryValue: make([]byte, 64*kib)}}})
		return err
	})
	if _, err := client.PurgeQueue(ctx, &sqs.PurgeQueueInput{QueueUrl: url}); err != nil {
		t.Fatal(err)
	}

	for i := range 3 {
		if _, err := client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: url, MessageBody: aws.String(strings.Repeat(strconv.Itoa(i), 30*kib))}); err != nil {
			t.Fatal(err)
		}
	}
	var three *sqs.ReceiveMessageOutput
	d = step("receive of three 30 KiB messages", "ReceiveMessage", 1, 2, receive(&three))
	if len(three.Messages) != 3 {
		t.Fatalf("receive returned %d messages, want 3", len(three.Messages))
	}
	if d.ReceivedBytes < 90*kib || d.ReceivedBytes > 92*kib {
		t.Errorf("receive of three 30 KiB messages: %d bytes received", d.ReceivedBytes)
	}

	step("GetQueueAttributes", "GetQueueAttributes", 1, 1, func() error {
		_, err := client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: url})
		return err
	})

	// Every attempt is billed: a send throttled once is two calls of four
	// requests each.
	if b.Server != nil {
		b.Server.InjectFault(sqstest.Fail("SendMessage", "RequestThrottled").Times(1))
		step("SendMessage of 200 KiB, retried once", "SendMessage", 2, 8, func() error {
			_, err := client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: url, MessageBody: aws.String(big)})
			return err
		})
	}
	if got, want := counter.BilledTotal(), sumOf(counter.Tally().Billed); got != want {
		t.Errorf("BilledTotal %d, the billed counts add up to %d", got, want)
	}
}

func sumOf(m map[string]int64) int64 {
	var n int64
	for _, v := range m {
		n += v
	}
	return n
}

// TestCountersStack installs two counters on one client: each counts
// every call.
func TestCountersStack(t *testing.T) {
	var second callcount.Counter
	client, first := sqstestenv.InProcess(t).Client(t, sqs.WithAPIOptions(second.Register))
	if _, err := client.ListQueues(context.Background(), &sqs.ListQueuesInput{}); err != nil {
		t.Fatal(err)
	}
	if first.Get("ListQueues") != 1 || second.Get("ListQueues") != 1 || second.BilledTotal() != 1 {
		t.Errorf("first counted %v, second %v (billed %d), want one ListQueues each", first.Snapshot(), second.Snapshot(), second.BilledTotal())
	}
}
