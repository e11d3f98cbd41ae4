package redrive_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/internal/testkit/observetest"
	"github.com/tempqueues/tempqueues/internal/testkit/sqstestenv"
	"github.com/tempqueues/tempqueues/observe"
	"github.com/tempqueues/tempqueues/redrive"
)

// createQueue creates a queue, deleted when the test ends; a base ending
// in ".fifo" makes a FIFO queue's name (the caller sets FifoQueue).
func createQueue(t testing.TB, client *sqs.Client, base string, attrs map[string]string) string {
	t.Helper()
	name := sqstestenv.QueueName(t, strings.TrimSuffix(base, ".fifo"))
	if strings.HasSuffix(base, ".fifo") {
		name += ".fifo"
	}
	out, err := client.CreateQueue(context.Background(), &sqs.CreateQueueInput{QueueName: aws.String(name), Attributes: attrs})
	if err != nil {
		t.Fatalf("CreateQueue %s: %v", base, err)
	}
	u := aws.ToString(out.QueueUrl)
	t.Cleanup(func() {
		_, _ = client.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: aws.String(u)})
	})
	return u
}

func queueARN(t testing.TB, client *sqs.Client, u string) string {
	t.Helper()
	out, err := client.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{QueueUrl: aws.String(u), AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameQueueArn}})
	if err != nil {
		t.Fatal(err)
	}
	return out.Attributes["QueueArn"]
}

// counts returns the visible, in-flight and delayed message counts.
func counts(t testing.TB, client *sqs.Client, u string) [3]int {
	t.Helper()
	out, err := client.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{QueueUrl: aws.String(u), AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameAll}})
	if err != nil {
		t.Fatal(err)
	}
	var c [3]int
	for i, k := range []string{"ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible", "ApproximateNumberOfMessagesDelayed"} {
		c[i], _ = strconv.Atoi(out.Attributes[k])
	}
	return c
}

func strAttr(v string) types.MessageAttributeValue {
	return types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(v)}
}

func sendMsg(t testing.TB, client *sqs.Client, u, body string, attrs map[string]types.MessageAttributeValue) {
	t.Helper()
	if _, err := client.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: aws.String(u), MessageBody: aws.String(body), MessageAttributes: attrs}); err != nil {
		t.Fatal(err)
	}
}

// receiveAll receives what is visible on u within wait, deleting nothing.
func receiveAll(t testing.TB, client *sqs.Client, u string, wait time.Duration) []types.Message {
	t.Helper()
	var got []types.Message
	deadline := time.Now().Add(wait)
	for {
		out, err := client.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(u), MaxNumberOfMessages: 10, WaitTimeSeconds: 1, VisibilityTimeout: 60,
			MessageAttributeNames: []string{"All"},
		})
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, out.Messages...)
		if len(got) > 0 && len(out.Messages) == 0 || time.Now().After(deadline) {
			return got
		}
	}
}

func attrValue(m types.Message, name string) string {
	v, ok := m.MessageAttributes[name]
	if !ok {
		return "<none>"
	}
	return aws.ToString(v.StringValue)
}

// event is what the tests read of an observe.Redriven event.
type event struct {
	Action               string
	MessageID, RequestID string
	Attempt              int
	Delay                time.Duration
	Due                  time.Time
	Queue                string // where it was sent (Detail.To)
	Reason               error  // why it was parked (Detail.Cause)
	Err                  error
}

// redriven returns the Redriven events rec holds, in order.
func redriven(t testing.TB, rec *observetest.Recorder) []event {
	t.Helper()
	var out []event
	for _, e := range rec.Events() {
		if e.Kind != observe.Redriven {
			continue
		}
		d, ok := e.Detail.(redrive.Detail)
		if !ok || e.Message == nil {
			t.Fatalf("Redriven event %+v: want a redrive.Detail and the message", e)
		}
		out = append(out, event{Action: e.Reason, MessageID: aws.ToString(e.Message.MessageId), RequestID: e.RequestID,
			Attempt: d.Attempt, Delay: e.Duration, Due: d.Due, Queue: d.To, Reason: d.Cause, Err: e.Err})
	}
	return out
}
