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
