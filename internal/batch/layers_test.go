package batch_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/tempqueues/tempqueues/internal/awserr"
	"github.com/tempqueues/tempqueues/internal/batch"
	"github.com/tempqueues/tempqueues/internal/testkit/sqstestenv"
	"github.com/tempqueues/tempqueues/sqstest"
)

// The library alone retries the calls it makes for messages: through a
// real SDK client with its default retryer (3 attempts), a delete that is
// throttled forever costs 1 + DefaultMaxRetries calls, not three times as
// many, and a lone send that a caller waits for makes exactly one call per
// try. Time is the bubble's, so the SDK's and the library's backoffs cost
// nothing.
func TestOneLayerRetries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := sqstestenv.InProcess(t)
		client, _ := b.Client(t)
		out, err := client.CreateQueue(context.Background(), &sqs.CreateQueueInput{QueueName: aws.String("layers")})
		if err != nil {
			t.Fatal(err)
		}
		q := aws.ToString(out.QueueUrl)

		remove := b.Server.InjectFault(sqstest.Fail("DeleteMessageBatch", "RequestThrottled"))
		dels := batch.NewDeletes(client, 2, 0)
		got := make(chan error, 1)
		dels.Submit(q, "handle", func(_ struct{}, err error) { got <- err })
		if err := dels.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := <-got; !awserr.IsThrottle(err) {
			t.Fatalf("delete under endless throttling: %v, want the throttling", err)
		}
		if n := b.Server.Calls()["DeleteMessageBatch"]; n != 1+batch.DefaultMaxRetries {
			t.Errorf("%d DeleteMessageBatch calls, want 1 + %d retries: the SDK retried under the library", n, batch.DefaultMaxRetries)
		}
		remove()

		b.Server.InjectFault(sqstest.Fail("SendMessage", "InternalFailure").Times(2))
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		alone := func(*sqs.Options) {} // an SDK option sends alone
		if _, err := batch.SendMessage(ctx, nil, client, &sqs.SendMessageInput{QueueUrl: aws.String(q), MessageBody: aws.String("x")}, []func(*sqs.Options){alone}, false); err != nil {
			t.Fatalf("a send through two server errors: %v", err)
		}
		if n := b.Server.Calls()["SendMessage"]; n != 3 {
			t.Errorf("%d SendMessage calls, want 2 failed and 1 through", n)
		}
	})
}
