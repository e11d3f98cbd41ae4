package requester_test

import (
	"context"
	"fmt"
	"log"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/tempqueues/tempqueues/requester"
	"github.com/tempqueues/tempqueues/responder"
	"github.com/tempqueues/tempqueues/sqstest"
)

// A stream of replies to one request: the handler sends a message per
// item with Request.Send, then returns its final reply; the caller ranges
// over them in order.
func ExampleRequester_SendMessageAndStream() {
	ctx := context.Background()
	srv := sqstest.NewServer()
	defer srv.Close(context.Background())
	client := srv.Client()
	q, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("countdown")})
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
				n, _ := strconv.Atoi(req.Body())
				for i := n; i > 0; i-- {
					if err := req.Send(ctx, &responder.Reply{Body: strconv.Itoa(i)}); err != nil {
						return nil, err // or, for ErrStreamNotRequested, put it all in the reply
					}
				}
				return &responder.Reply{Body: "liftoff"}, nil
			}))
	}()
	defer func() { stop(); <-served }()

	r, err := requester.New(client)
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close(ctx)
	callCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	s, err := r.SendMessageAndStream(callCtx, &sqs.SendMessageInput{QueueUrl: q.QueueUrl, MessageBody: aws.String("3")})
	if err != nil {
		log.Fatal(err)
	}
	for m, err := range s.All(callCtx) {
		if err != nil { // matches ErrTimeout when the deadline passes first
			log.Fatal(err)
		}
		fmt.Println(*m.Body)
	}
	// Output:
	// 3
	// 2
	// 1
	// liftoff
}

// Scatter-gather: one request to each of three services, the replies
// with their origin; with fewer than wanted at the deadline, the error is
// an error matching ErrIncomplete that says how many are missing.
func ExampleRequester_ScatterGather() {
	ctx := context.Background()
	srv := sqstest.NewServer()
	defer srv.Close(context.Background())
	client := srv.Client()
	resp, err := responder.New(client, func(o *responder.Options) { o.PollWaitTime = time.Second })
	if err != nil {
		log.Fatal(err)
	}
	serveCtx, stop := context.WithCancel(ctx)
	defer stop()
	var queues []string
	served := make(chan error, 3)
	for i, name := range []string{"quotes-a", "quotes-b", "quotes-c"} {
		q, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name)})
		if err != nil {
			log.Fatal(err)
		}
		queues = append(queues, *q.QueueUrl)
		price := strconv.Itoa(100 + 10*i)
		go func() {
			served <- resp.Serve(serveCtx, *q.QueueUrl, responder.HandlerFunc(
				func(context.Context, *responder.Request) (*responder.Reply, error) {
					return &responder.Reply{Body: price}, nil
				}))
		}()
	}
	defer func() {
		stop()
		for range queues {
			<-served
		}
	}()

	r, err := requester.New(client)
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close(ctx)
	callCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	got, err := r.ScatterGather(callCtx, queues, &sqs.SendMessageInput{MessageBody: aws.String("price of 1 widget?")}, 0)
	if err != nil {
		log.Fatal(err)
	}
	prices := map[string]string{}
	for _, g := range got {
		prices[g.Origin[len(g.Origin)-len("quotes-a"):]] = *g.Message.Body
	}
	fmt.Println(len(got), "replies:", prices)
	// Output: 3 replies: map[quotes-a:100 quotes-b:110 quotes-c:120]
}
