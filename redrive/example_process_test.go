package redrive_test

import (
	"context"
	"fmt"
	"log"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/observe"
	"github.com/tempqueues/tempqueues/redrive"
	"github.com/tempqueues/tempqueues/sqsapi"
	"github.com/tempqueues/tempqueues/sqstest"
)

// Process is Run's step for messages someone else received: a Lambda
// function on the dead-letter queue, for one (see the lambdatempq module).
func ExampleRedriver_Process() {
	ctx := context.Background()
	srv := sqstest.NewServer()
	defer srv.Close(ctx)
	client := srv.Client()
	mk := func(name string) string {
		out, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name)})
		if err != nil {
			log.Fatal(err)
		}
		return *out.QueueUrl
	}
	source, dlq, parking := mk("jobs"), mk("jobs-dlq"), mk("jobs-parking")
	for _, n := range []string{"1", "3"} {
		_, err := client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &dlq, MessageBody: aws.String("job replayed " + n),
			MessageAttributes: map[string]types.MessageAttributeValue{sqsapi.RedriveAttemptAttribute: {DataType: aws.String("String"), StringValue: aws.String(n)}}})
		if err != nil {
			log.Fatal(err)
		}
	}
	rd, err := redrive.New(client, dlq, func(o *redrive.Options) {
		o.Target, o.ParkingQueue, o.MaxAttempts = source, parking, 3
		o.Observer = observe.Func(func(_ context.Context, e observe.Event) func(*types.Message, error) {
			fmt.Printf("%s: %s, attempt %d\n", *e.Message.Body, e.Reason, e.Detail.(redrive.Detail).Attempt)
			return nil
		})
	})
	if err != nil {
		log.Fatal(err)
	}
	got, err := client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &dlq, MaxNumberOfMessages: 10, MessageAttributeNames: []string{"All"}})
	if err != nil {
		log.Fatal(err)
	}
	done, err := rd.Process(ctx, got.Messages)
	if err != nil {
		log.Fatal(err)
	}
	for i, m := range got.Messages {
		fmt.Printf("%s: done %v\n", *m.Body, done[i])
	}
	// Output:
	// job replayed 1: replay, attempt 2
	// job replayed 3: park, attempt 3
	// job replayed 1: done true
	// job replayed 3: done true
}
