package virtualqueue_test

import (
	"context"
	"fmt"
	"log"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/tempqueues/tempqueues/sqsapi"
	"github.com/tempqueues/tempqueues/sqstest"
	"github.com/tempqueues/tempqueues/virtualqueue"
)

// Use the virtual-queue client as a drop-in *sqs.Client: one real host queue,
// any number of virtual queues on it, created and deleted with no API call.
// (On AWS, wrap sqs.NewFromConfig(cfg) instead of the test server's client.)
func Example() {
	ctx := context.Background()
	srv := sqstest.NewServer()
	defer srv.Close(context.Background())
	client, err := virtualqueue.New(srv.Client())
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close(ctx) // releases buffered messages, flushes deletes

	host, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("my-host-queue")})
	if err != nil {
		log.Fatal(err)
	}
	// A virtual queue: no API call once the host is known.
	vq, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{
		QueueName: aws.String("replies-42"),
		Attributes: map[string]string{
			sqsapi.HostQueueURLAttribute:             *host.QueueUrl,
			sqsapi.IdleQueueRetentionPeriodAttribute: "300",
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	// Sends go to the host queue with the routing attribute.
	if _, err := client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: vq.QueueUrl, MessageBody: aws.String("hello")}); err != nil {
		log.Fatal(err)
	}
	// Receives wait on the virtual queue's buffer, filled by the host poller.
	out, err := client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: vq.QueueUrl, WaitTimeSeconds: 20})
	if err != nil {
		log.Fatal(err)
	}
	for _, m := range out.Messages {
		fmt.Println(*m.Body)
		// At least once: the host message is deleted only now.
		if _, err := client.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: vq.QueueUrl, ReceiptHandle: m.ReceiptHandle}); err != nil {
			log.Fatal(err)
		}
	}
	fmt.Println("virtual queues:", client.Stats().VirtualQueues)
	// Output:
	// hello
	// virtual queues: 1
}
