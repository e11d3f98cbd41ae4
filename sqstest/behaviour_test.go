package sqstest_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/sqstest"
)

// SQS behaviour that needs minutes or hours of queue time, checked on
// sqstest alone with its manual clock.

func manualServer(t *testing.T) (*sqstest.Clock, *sqs.Client) {
	clock := sqstest.NewClock(time.Time{})
	srv := sqstest.Start(t, func(o *sqstest.Options) { o.Clock = clock })
	return clock, srv.Client(func(o *sqs.Options) { o.RetryMaxAttempts = 1 })
}

func TestFifoDeduplicationWindowExpires(t *testing.T) {
	clock, c := manualServer(t)
	url := newQueue(t, c, "q.fifo", map[string]string{"FifoQueue": "true"})
	ctx := context.Background()
	send := func() string {
		out, err := c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String("m"),
			MessageGroupId: aws.String("g"), MessageDeduplicationId: aws.String("x")})
		if err != nil {
			t.Fatal(err)
		}
		return *out.MessageId
	}
	first := send()
	clock.Advance(4*time.Minute + 59*time.Second)
	if send() != first {
		t.Fatal("duplicate inside the 5-minute window accepted")
	}
	clock.Advance(time.Second)
	if send() == first {
		t.Fatal("same deduplication id rejected after the window")
	}
}

func TestFifoDeduplicationScopeMessageGroup(t *testing.T) {
	_, c := manualServer(t)
	url := newQueue(t, c, "q.fifo", map[string]string{"FifoQueue": "true", "DeduplicationScope": "messageGroup", "FifoThroughputLimit": "perMessageGroupId"})
	ctx := context.Background()
	ids := map[string]bool{}
	for _, g := range []string{"a", "b", "a"} {
		out, err := c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String("m"),
			MessageGroupId: aws.String(g), MessageDeduplicationId: aws.String("same")})
		if err != nil {
			t.Fatal(err)
		}
		ids[*out.MessageId] = true
	}
	if len(ids) != 2 {
		t.Fatalf("%d distinct messages, want 2 (one per group)", len(ids))
	}
}

func TestStaleReceiptHandleDoesNotDelete(t *testing.T) {
	clock, c := manualServer(t)
	url := newQueue(t, c, "q", map[string]string{"VisibilityTimeout": "10"})
	ctx := context.Background()
	c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String("m")})
	recv := func() string {
		out, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &url})
		if err != nil || len(out.Messages) != 1 {
			t.Fatalf("receive: %v", err)
		}
		return *out.Messages[0].ReceiptHandle
	}
	old := recv()
	clock.Advance(10 * time.Second)
	current := recv()
	// SQS: an earlier receive's handle "succeeds, but the message will not
	// be deleted".
	if _, err := c.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: &url, ReceiptHandle: &old}); err != nil {
		t.Fatal(err)
	}
	attrs, _ := c.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: &url, AttributeNames: []types.QueueAttributeName{"ApproximateNumberOfMessagesNotVisible"}})
	if attrs.Attributes["ApproximateNumberOfMessagesNotVisible"] != "1" {
		t.Fatalf("stale handle deleted the message: %v", attrs.Attributes)
	}
	// SQS answers a stale handle with InvalidParameterValue, not
	// MessageNotInflight: the message is in flight, under another handle.
	_, err := c.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: &url, ReceiptHandle: &old, VisibilityTimeout: 5})
	wantAPIError(t, err, "InvalidParameterValue")
	if !strings.Contains(err.Error(), "Reason: Message does not exist or is not available for visibility timeout change.") {
		t.Fatalf("stale handle: %v, want SQS's reason", err)
	}
	if _, err := c.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: &url, ReceiptHandle: &current}); err != nil {
		t.Fatal(err)
	}
	// Deleting again with the same handle succeeds, as on SQS.
	if _, err := c.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: &url, ReceiptHandle: &current}); err != nil {
		t.Fatal(err)
	}
}

func TestVisibilityCappedAt12HoursSinceReceipt(t *testing.T) {
	clock, c := manualServer(t)
	url := newQueue(t, c, "q", nil)
	ctx := context.Background()
	c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String("m")})
	out, _ := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &url})
	h := out.Messages[0].ReceiptHandle
	if _, err := c.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: &url, ReceiptHandle: h, VisibilityTimeout: 43200}); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Hour)
	_, err := c.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: &url, ReceiptHandle: h, VisibilityTimeout: 43200})
	wantAPIError(t, err, "InvalidParameterValue")
	if _, err := c.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: &url, ReceiptHandle: h, VisibilityTimeout: 39600}); err != nil {
		t.Fatalf("11 h more after 1 h: %v", err)
	}
}

func TestListQueuesCapsAt1000WithoutMaxResults(t *testing.T) {
	_, c := manualServer(t)
	ctx := context.Background()
	for i := 0; i < 1001; i++ {
		if _, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(fmt.Sprintf("q%04d", i))}); err != nil {
			t.Fatal(err)
		}
	}
	out, err := c.ListQueues(ctx, &sqs.ListQueuesInput{})
	if err != nil || len(out.QueueUrls) != 1000 || out.NextToken != nil {
		t.Fatalf("ListQueues: %v, %d URLs, token %v", err, len(out.QueueUrls), out.NextToken)
	}
	_, err = c.ListQueues(ctx, &sqs.ListQueuesInput{MaxResults: aws.Int32(1001)})
	wantAPIError(t, err, "InvalidParameterValue")
}

func TestRedrivePolicyTargetMustExist(t *testing.T) {
	_, c := manualServer(t)
	_, err := c.CreateQueue(context.Background(), &sqs.CreateQueueInput{QueueName: aws.String("src"),
		Attributes: map[string]string{"RedrivePolicy": `{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:000000000000:nope","maxReceiveCount":3}`}})
	wantAPIError(t, err, "InvalidParameterValue")
}
