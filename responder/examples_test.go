package responder_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/tempqueues/tempqueues/requester"
	"github.com/tempqueues/tempqueues/responder"
	"github.com/tempqueues/tempqueues/sqstest"
)

// A login server. Serve blocks, so it runs in its own goroutine here,
// beside the requester that calls it; Shutdown stops it gracefully (in a
// service, on SIGTERM: see signal.NotifyContext). On AWS, build the client
// with sqs.NewFromConfig(cfg, sqsclient.BufferRequestBodies) instead of the
// embedded server's.
func ExampleResponder_Serve() {
	ctx := context.Background()
	srv := sqstest.NewServer()
	defer srv.Close(ctx)
	client := srv.Client()
	q, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("login")})
	if err != nil {
		log.Fatal(err)
	}

	r, err := responder.New(client, func(o *responder.Options) { o.MaxConcurrency = 32 })
	if err != nil {
		log.Fatal(err)
	}
	users := map[string]bool{"alice": true}
	login := responder.HandlerFunc(func(ctx context.Context, req *responder.Request) (*responder.Reply, error) {
		if !users[req.Body()] {
			return &responder.Reply{Body: "denied"}, nil
		}
		return &responder.Reply{Body: "welcome " + req.Body()}, nil
	})
	served := make(chan error, 1)
	go func() { served <- r.Serve(ctx, *q.QueueUrl, login) }()

	req, err := requester.New(client)
	if err != nil {
		log.Fatal(err)
	}
	for _, user := range []string{"alice", "mallory"} {
		reply, err := req.SendMessageAndGetResponse(ctx, &sqs.SendMessageInput{QueueUrl: q.QueueUrl, MessageBody: aws.String(user)})
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(user+":", *reply.Body)
	}

	// Running handlers get 10 s to finish; an idle responder stops in about
	// half a second. Then Serve returns nil.
	stopCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := errors.Join(r.Shutdown(stopCtx), <-served, req.Close(stopCtx)); err != nil {
		log.Fatal(err)
	}
	// Output:
	// alice: welcome alice
	// mallory: denied
}

// Answering from a receive loop of your own, as with the Java client's
// AmazonSQSResponder.
func ExampleResponder_SendResponseMessage() {
	ctx := context.Background()
	srv := sqstest.NewServer()
	defer srv.Close(ctx)
	client := srv.Client()
	q, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("requests")})
	if err != nil {
		log.Fatal(err)
	}
	req, err := requester.New(client)
	if err != nil {
		log.Fatal(err)
	}
	defer req.Close(ctx)
	call, err := req.SendMessageAndGetResponseAsync(ctx, &sqs.SendMessageInput{QueueUrl: q.QueueUrl, MessageBody: aws.String("job 7")})
	if err != nil {
		log.Fatal(err)
	}

	r, err := responder.New(client)
	if err != nil {
		log.Fatal(err)
	}
	defer r.Shutdown(ctx)
	out, err := client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
		QueueUrl: q.QueueUrl, MaxNumberOfMessages: 10, WaitTimeSeconds: 20,
		MessageAttributeNames: []string{"All"}, // ResponseQueueUrl is a message attribute
	})
	if err != nil {
		log.Fatal(err)
	}
	for _, m := range out.Messages {
		err := r.SendResponseMessage(ctx, *q.QueueUrl, m, &responder.Reply{Body: "done: " + aws.ToString(m.Body)})
		if err != nil && !errors.Is(err, responder.ErrNoResponseRequested) && !errors.Is(err, responder.ErrResponseQueueGone) && !errors.Is(err, responder.ErrReplyRefused) {
			continue // not answered: leave the request for redelivery
		}
		if _, err := client.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: q.QueueUrl, ReceiptHandle: m.ReceiptHandle}); err != nil {
			log.Fatal(err)
		}
	}

	reply, err := call.Wait(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(*reply.Body)
	// Output: done: job 7
}

// A failed handler leaves its request for redelivery: with a negative
// BackoffBase it comes back at once (a BackoffBase of 1 s waits 1 s, 2 s,
// 4 s...), until the queue's RedrivePolicy moves it to the dead-letter
// queue. The Store answers a redelivered request that was answered before
// without running the handler again.
func ExampleOptions() {
	ctx := context.Background()
	srv := sqstest.NewServer()
	defer srv.Close(ctx)
	client := srv.Client()
	q, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("flaky")})
	if err != nil {
		log.Fatal(err)
	}
	r, err := responder.New(client, func(o *responder.Options) {
		o.VisibilityTimeout = 10 * time.Second // extension step; crash recovery time
		o.BackoffBase = -1                     // at once
		o.Store = responder.NewMemoryStore()   // or a shared store for a fleet
	})
	if err != nil {
		log.Fatal(err)
	}
	served := make(chan error, 1)
	go func() {
		served <- r.Serve(ctx, *q.QueueUrl, responder.HandlerFunc(
			func(ctx context.Context, req *responder.Request) (*responder.Reply, error) {
				if req.ReceiveCount == 1 {
					fmt.Println("receive 1: failing")
					return nil, errors.New("database unavailable")
				}
				fmt.Printf("receive %d: ok\n", req.ReceiveCount)
				return &responder.Reply{Body: "stored " + req.Body()}, nil
			}))
	}()

	req, err := requester.New(client)
	if err != nil {
		log.Fatal(err)
	}
	reply, err := req.SendMessageAndGetResponse(ctx, &sqs.SendMessageInput{QueueUrl: q.QueueUrl, MessageBody: aws.String("order 12")})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("reply:", *reply.Body)
	if err := errors.Join(r.Shutdown(ctx), <-served, req.Close(ctx)); err != nil {
		log.Fatal(err)
	}
	// Output:
	// receive 1: failing
	// receive 2: ok
	// reply: stored order 12
}
