package sqsclient_test

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/tempqueues/tempqueues/sqsclient"
	"github.com/tempqueues/tempqueues/sqstest"
)

// Every client the library is given should be built with
// BufferRequestBodies. On AWS:
//
//	cfg, err := config.LoadDefaultConfig(ctx)
//	client := sqs.NewFromConfig(cfg, sqsclient.BufferRequestBodies)
//
// Here the client talks to an embedded server over TCP, where the fix
// matters.
func ExampleBufferRequestBodies() {
	ctx := context.Background()
	srv := sqstest.NewServer()
	defer srv.Close(ctx)
	client := srv.Client(func(o *sqs.Options) { o.HTTPClient = new(http.Client) }, sqsclient.BufferRequestBodies)

	q, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("jobs")})
	if err != nil {
		log.Fatal(err)
	}
	if _, err := client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: q.QueueUrl, MessageBody: aws.String("resize photo 42")}); err != nil {
		log.Fatal(err)
	}
	out, err := client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: q.QueueUrl, WaitTimeSeconds: 1})
	if err != nil {
		log.Fatal(err)
	}
	for _, m := range out.Messages {
		fmt.Println(*m.Body)
	}
	// Output: resize photo 42
}

// A CallCounter shows what a piece of code costs in SQS requests, each
// retried attempt included.
func ExampleCallCounter() {
	ctx := context.Background()
	srv := sqstest.NewServer()
	defer srv.Close(ctx)
	counter := new(sqsclient.CallCounter)
	client := srv.Client(sqs.WithAPIOptions(counter.Register))

	q, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("jobs")})
	if err != nil {
		log.Fatal(err)
	}
	for i := range 3 {
		body := fmt.Sprintf("job %d", i)
		if _, err := client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: q.QueueUrl, MessageBody: aws.String(body)}); err != nil {
			log.Fatal(err)
		}
	}
	before := counter.Snapshot()
	if _, err := client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: q.QueueUrl, MaxNumberOfMessages: 10}); err != nil {
		log.Fatal(err)
	}
	fmt.Println(counter.Total(), counter.Snapshot())
	fmt.Println("receives since the snapshot:", counter.Snapshot()["ReceiveMessage"]-before["ReceiveMessage"])
	// Output:
	// 5 map[CreateQueue:1 ReceiveMessage:1 SendMessage:3]
	// receives since the snapshot: 1
}

// SQS bills each started 64 KiB of a message as one request: a 200 KiB
// message costs four to send and four to receive.
func ExampleCallCounter_Billed() {
	ctx := context.Background()
	srv := sqstest.NewServer()
	defer srv.Close(ctx)
	counter := new(sqsclient.CallCounter)
	client := srv.Client(sqs.WithAPIOptions(counter.Register))

	q, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("reports")})
	if err != nil {
		log.Fatal(err)
	}
	report := strings.Repeat("x", 200<<10)
	if _, err := client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: q.QueueUrl, MessageBody: aws.String(report)}); err != nil {
		log.Fatal(err)
	}
	if _, err := client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: q.QueueUrl}); err != nil {
		log.Fatal(err)
	}
	fmt.Println("calls:", counter.Total(), "billed requests:", counter.Billed())
	// Output: calls: 3 billed requests: 9
}
