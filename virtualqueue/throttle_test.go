package virtualqueue_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/tempqueues/tempqueues/internal/testkit/sqstestenv"
	"github.com/tempqueues/tempqueues/sqstest"
)

// A throttled send to a virtual queue with SDK options, which goes alone
// in a SendMessage call, is retried as a batched one is: SQS did nothing with a throttled call, so the send
// goes through once the throttling ends. The client keeps the SDK's
// default retryer: each try is one attempt, so every throttle reaches the
// client.
func TestThrottledUnbatchedSendIsRetried(t *testing.T) {
	t.Parallel()
	b := sqstestenv.SQSTest(t)
	e := newEnv(t, b, 30)
	c := e.client()
	u := e.createVQ(c, "v")

	before := b.Server.Calls()
	b.Server.InjectFault(sqstest.Fail("SendMessage", "RequestThrottled").Times(3))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(u), MessageBody: aws.String("burst")}, func(*sqs.Options) {}); err != nil {
		t.Fatalf("SendMessage through 3 throttled calls: %v", err)
	}
	if n := b.Server.Calls()["SendMessage"] - before["SendMessage"]; n != 4 {
		t.Errorf("%d SendMessage calls, want 3 throttled and 1 through", n)
	}
	if n := b.Server.Calls()["SendMessageBatch"] - before["SendMessageBatch"]; n != 0 {
		t.Errorf("%d SendMessageBatch calls for a send with SDK options", n)
	}
	if got := receiveN(t, c, u, 1, 5*time.Second); aws.ToString(got[0].Body) != "burst" {
		t.Errorf("received %q", aws.ToString(got[0].Body))
	}
}
