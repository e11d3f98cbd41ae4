package tempqueue_test

import (
	"context"
	"fmt"
	"log"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/tempqueues/tempqueues/sqstest"
	"github.com/tempqueues/tempqueues/tempqueue"
)

// Code that creates a short-lived queue per job keeps its calls; with the
// temporary-queue client those queues cost no API call and cannot be left
// behind: they live on one host queue that Close deletes.
func Example() {
	ctx := context.Background()
	srv := sqstest.NewServer()
	defer srv.Close(context.Background())
	tq, err := tempqueue.New(srv.Client())
	if err != nil {
		log.Fatal(err)
	}
	hosts := map[string]bool{}
	for _, job := range []string{"job-1", "job-2", "job-3"} {
		out, err := tq.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("results-" + job)})
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(strings.Contains(*out.QueueUrl, "#results-"+job))
		host, _, _ := strings.Cut(*out.QueueUrl, "#")
		hosts[host] = true
	}
	fmt.Println("host queues:", len(hosts))
	if err := tq.Close(ctx); err != nil {
		log.Fatal(err)
	}
	// Output:
	// true
	// true
	// true
	// host queues: 1
}

// A FIFO temporary queue is asked for as from SQS, with a .fifo name and
// FifoQueue true; it keeps send order, and lives on a FIFO host queue.
func ExampleClient_CreateQueue_fifo() {
	ctx := context.Background()
	srv := sqstest.NewServer()
	defer srv.Close(context.Background())
	tq, err := tempqueue.New(srv.Client())
	if err != nil {
		log.Fatal(err)
	}
	defer tq.Close(ctx)
	out, err := tq.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("steps.fifo"),
		Attributes: map[string]string{"FifoQueue": "true"}})
	if err != nil {
		log.Fatal(err)
	}
	host, name, _ := strings.Cut(*out.QueueUrl, "#")
	fmt.Println(strings.HasSuffix(host, ".fifo"), name)
	for _, step := range []string{"mix", "bake", "eat"} {
		if _, err := tq.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: out.QueueUrl, MessageBody: aws.String(step)}); err != nil {
			log.Fatal(err)
		}
	}
	for n := 0; n < 3; {
		got, err := tq.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: out.QueueUrl, MaxNumberOfMessages: 10, WaitTimeSeconds: 1})
		if err != nil {
			log.Fatal(err)
		}
		for _, m := range got.Messages {
			fmt.Println(*m.Body)
			n++
			if _, err := tq.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: out.QueueUrl, ReceiptHandle: m.ReceiptHandle}); err != nil {
				log.Fatal(err)
			}
		}
	}
	// Output:
	// true steps.fifo
	// mix
	// bake
	// eat
}
