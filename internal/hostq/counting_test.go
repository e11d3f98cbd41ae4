package hostq

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/tempqueues/tempqueues/internal/callcount"
	"github.com/tempqueues/tempqueues/internal/testkit/sqstestenv"
	"github.com/tempqueues/tempqueues/sqsclient"
	"github.com/tempqueues/tempqueues/sqstest"
)

// TestCountCallsCountsWhatSQSBills: a call the SDK retries counts once per
// attempt, as sqsclient.CallCounter counts it and SQS bills it.
func TestCountCallsCountsWhatSQSBills(t *testing.T) {
	b := sqstestenv.SQSTest(t)
	raw, _ := b.Client(t)
	var billed sqsclient.CallCounter
	client := sqs.New(raw.Options(), func(o *sqs.Options) {
		o.Retryer = retry.NewStandard(func(so *retry.StandardOptions) {
			so.MaxAttempts = 3
			so.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return 0, nil })
		})
		o.APIOptions = append(o.APIOptions, billed.Register)
	})
	var n callcount.Counter
	counted := CountCalls(client, &n)
	ctx := context.Background()
	q, err := counted.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(sqstestenv.QueueName(t, "count"))})
	if err != nil {
		t.Fatal(err)
	}
	b.Server.InjectFault(sqstest.Fail("SendMessage", "RequestThrottled").Times(2))
	if _, err := counted.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: q.QueueUrl, MessageBody: aws.String("m")}); err != nil {
		t.Fatal(err)
	}
	if got, want := n.Snapshot(), billed.Snapshot(); got["SendMessage"] != 3 || got["SendMessage"] != want["SendMessage"] || got["CreateQueue"] != 1 {
		t.Errorf("CountCalls counted %v, CallCounter %v; want 3 SendMessage attempts and 1 CreateQueue in both", got, want)
	}
}
