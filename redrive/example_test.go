package redrive_test

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/observe"
	"github.com/tempqueues/tempqueues/redrive"
	"github.com/tempqueues/tempqueues/sqsapi"
	"github.com/tempqueues/tempqueues/sqstest"
)

// Drain a dead-letter queue once: a message replayed twice already goes
// back to its source with its third attempt; one replayed three times is
// parked.
func Example() {
	srv := sqstest.NewServer()
	defer srv.Close(context.Background())
	client := srv.Client()
	ctx := context.Background()
	mk := func(name string, attrs map[string]string) string {
		out, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name), Attributes: attrs})
		if err != nil {
			panic(err)
		}
		return *out.QueueUrl
	}
	dlq := mk("orders-dlq", nil)
	arn, _ := client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: &dlq, AttributeNames: []types.QueueAttributeName{"QueueArn"}})
	mk("orders", map[string]string{"RedrivePolicy": `{"deadLetterTargetArn":"` + arn.Attributes["QueueArn"] + `","maxReceiveCount":"3"}`})
	parking := mk("orders-parking", nil)
	for _, n := range []string{"2", "3"} {
		_, _ = client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &dlq, MessageBody: aws.String("order after " + n + " replays"),
			MessageAttributes: map[string]types.MessageAttributeValue{
				sqsapi.RedriveAttemptAttribute: {DataType: aws.String("String"), StringValue: aws.String(n)},
			}})
	}

	r, err := redrive.New(client, dlq, func(o *redrive.Options) {
		o.ParkingQueue = parking // the target is the DLQ's source queue, "orders"
		o.MaxAttempts = 3
		o.BackoffBase, o.BackoffCap = time.Second, time.Minute
		o.Observer = observe.Func(func(_ context.Context, e observe.Event) func(*types.Message, error) {
			d := e.Detail.(redrive.Detail)
			fmt.Printf("%s: attempt %d, cause: %v\n", e.Reason, d.Attempt, d.Cause)
			return nil
		})
	})
	if err != nil {
		panic(err)
	}
	rep, err := r.Drain(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Printf("received %d, replayed %d, parked %d, failed %d\n", rep.Received, rep.Replayed, rep.Parked, rep.Failed)
	// Output:
	// replay: attempt 3, cause: <nil>
	// park: attempt 3, cause: redrive: maximum replay attempts reached
	// received 2, replayed 1, parked 1, failed 0
}
