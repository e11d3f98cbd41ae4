package virtualqueue_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/tempqueues/tempqueues/internal/testkit/sqstestenv"
	"github.com/tempqueues/tempqueues/sqstest"
)

// A receive's VisibilityTimeout is applied before the receive returns:
// when the change fails, the receive fails with its error instead of
// handing out a message hidden for less than was asked; once the change
// works again, the message is received with the visibility asked for.
func TestReceiveWaitsForItsVisibilityChange(t *testing.T) {
	t.Parallel()
	b := sqstestenv.SQSTest(t)
	e := newEnv(t, b, 1)
	e.raw = sqs.New(e.raw.Options(), func(o *sqs.Options) { o.RetryMaxAttempts = 1 })
	c := e.client()
	u := e.createVQ(c, "v")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(u), MessageBody: aws.String("m")}); err != nil {
		t.Fatal(err)
	}
	remove := b.Server.InjectFault(sqstest.Fail("ChangeMessageVisibilityBatch", "AccessDenied"))
	in := &sqs.ReceiveMessageInput{QueueUrl: aws.String(u), WaitTimeSeconds: 5, VisibilityTimeout: 60}
	out, err := c.ReceiveMessage(ctx, in)
	if err == nil || !strings.Contains(err.Error(), "AccessDenied") {
		t.Fatalf("receive while visibility changes fail: %v, %v; want the change's error", out, err)
	}
	remove()
	// The message comes back once the host visibility it had (1 s) ends.
	for {
		out, err = c.ReceiveMessage(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Messages) == 1 {
			break
		}
	}
	// Hidden for the 60 s asked: nothing more within 3 s.
	short := *in
	short.WaitTimeSeconds = 3
	if again, err := c.ReceiveMessage(ctx, &short); err != nil || len(again.Messages) != 0 {
		t.Errorf("the message came back within 3 s of a 60 s VisibilityTimeout: %v, %v", again, err)
	}
}
