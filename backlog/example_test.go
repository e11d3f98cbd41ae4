package backlog_test

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/tempqueues/tempqueues/backlog"
	"github.com/tempqueues/tempqueues/sqstest"
)

// Measure a queue of 250 requests served by 2 workers that each handle 10
// requests at once in 200 ms on average, for a latency of 2 s.
func ExampleMeasure() {
	srv := sqstest.NewServer()
	defer srv.Close(context.Background())
	client := srv.Client()
	ctx := context.Background()
	q, _ := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("requests")})
	for range 25 {
		for i := range 10 {
			_, _ = client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: q.QueueUrl, MessageBody: aws.String(fmt.Sprint(i))})
		}
	}
	f, err := backlog.Measure(ctx, client, *q.QueueUrl, func(o *backlog.Options) {
		o.Workers, o.MaxConcurrency = 2, 10
		o.AcceptableLatency, o.ProcessingTime = 2*time.Second, 200*time.Millisecond
		o.MaxWorkers = 20
	})
	if err != nil {
		panic(err)
	}
	fmt.Printf("%d visible messages, %.0f per worker, target %.0f per worker, desired workers %d\n",
		f.Messages, f.BacklogPerWorker, f.TargetBacklogPerWorker, f.DesiredWorkers)
	// Output:
	// 250 visible messages, 125 per worker, target 100 per worker, desired workers 3
}
