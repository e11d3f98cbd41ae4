package requester_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/tempqueues/tempqueues/requester"
	"github.com/tempqueues/tempqueues/responder"
	"github.com/tempqueues/tempqueues/sqstest"
)

// A request/response round trip: a responder serves a queue, a requester
// calls it. On AWS, pass sqs.NewFromConfig(cfg) instead of the test
// server's client.
func Example() {
	ctx := context.Background()
	srv := sqstest.NewServer()
	defer srv.Close(context.Background())
	client := srv.Client()
	q, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("upper")})
	if err != nil {
		log.Fatal(err)
	}

	// The service.
	// A short long-poll wait makes the graceful stop at the end quick.
	resp, err := responder.New(client, func(o *responder.Options) { o.PollWaitTime = time.Second })
	if err != nil {
		log.Fatal(err)
	}
	serveCtx, stop := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() {
		served <- resp.Serve(serveCtx, *q.QueueUrl, responder.HandlerFunc(
			func(ctx context.Context, req *responder.Request) (*responder.Reply, error) {
				return &responder.Reply{Body: strings.ToUpper(req.Body())}, nil
			}))
	}()
	defer func() { stop(); <-served }()

	// The caller.
	r, err := requester.New(client)
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close(ctx)
	callCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	reply, err := r.SendMessageAndGetResponse(callCtx, &sqs.SendMessageInput{QueueUrl: q.QueueUrl, MessageBody: aws.String("hello")})
	if errors.Is(err, requester.ErrTimeout) {
		log.Fatal("no reply within 5s")
	}
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(*reply.Body)
	// Output: HELLO
}

// With FifoQueue "true" in HostQueueAttributes the requester's reply queues live on a FIFO host
// queue, each its own message group, so replies to one request keep the
// order they were sent in. Round trips work as on a standard host.
func ExampleOptions_fifo() {
	ctx := context.Background()
	srv := sqstest.NewServer()
	defer srv.Close(context.Background())
	client := srv.Client()
	q, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("echo")})
	if err != nil {
		log.Fatal(err)
	}
	resp, err := responder.New(client, func(o *responder.Options) { o.PollWaitTime = time.Second })
	if err != nil {
		log.Fatal(err)
	}
	serveCtx, stop := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() {
		served <- resp.Serve(serveCtx, *q.QueueUrl, responder.HandlerFunc(
			func(ctx context.Context, req *responder.Request) (*responder.Reply, error) {
				replyTo, _ := req.Attribute("ResponseQueueUrl")
				host, _, _ := strings.Cut(replyTo, "#")
				return &responder.Reply{Body: fmt.Sprint(req.Body(), " via FIFO host: ", strings.HasSuffix(host, ".fifo"))}, nil
			}))
	}()
	defer func() { stop(); <-served }()

	r, err := requester.New(client, func(o *requester.Options) { o.HostQueueAttributes = map[string]string{"FifoQueue": "true"} })
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close(ctx)
	callCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	reply, err := r.SendMessageAndGetResponse(callCtx, &sqs.SendMessageInput{QueueUrl: q.QueueUrl, MessageBody: aws.String("ping")})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(*reply.Body)
	// Output: ping via FIFO host: true
}
