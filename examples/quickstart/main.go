// Command quickstart is the README's quick start: a responder and a
// requester in one program, on an SQS server embedded in the process, or
// on SQS as the environment configures it (region, credentials, endpoint)
// with -aws or when AWS_ENDPOINT_URL_SQS is set.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/tempqueues/tempqueues/requester"
	"github.com/tempqueues/tempqueues/responder"
	"github.com/tempqueues/tempqueues/sqsclient"
	"github.com/tempqueues/tempqueues/sqstest"
)

func main() {
	useAWS := flag.Bool("aws", os.Getenv("AWS_ENDPOINT_URL_SQS") != "", "use SQS, not an embedded server")
	flag.Parse()
	if err := run(context.Background(), *useAWS, os.Stdout); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context, useAWS bool, out io.Writer) error {
	if useAWS {
		cfg, err := config.LoadDefaultConfig(ctx)
		if err != nil {
			return err
		}
		return greet(ctx, sqs.NewFromConfig(cfg, sqsclient.BufferRequestBodies), out)
	}
	srv := sqstest.NewServer()
	err := greet(ctx, srv.Client(), out)
	return errors.Join(err, srv.Close(ctx)) // after everything using it
}

// greet serves a queue with a responder and calls it with a requester.
func greet(ctx context.Context, client *sqs.Client, out io.Writer) error {
	q, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("quickstart-greetings")})
	if err != nil {
		return err
	}
	resp, err := responder.New(client)
	if err != nil {
		return err
	}
	served := make(chan error, 1)
	go func() { // Serve blocks until Shutdown
		served <- resp.Serve(ctx, *q.QueueUrl, responder.HandlerFunc(
			func(ctx context.Context, req *responder.Request) (*responder.Reply, error) {
				return &responder.Reply{Body: "hello, " + req.Body()}, nil
			}))
	}()
	req, err := requester.New(client) // creates its host queue on the first call
	if err != nil {
		return errors.Join(err, resp.Shutdown(ctx), <-served)
	}
	for _, name := range []string{"alice", "bob", "carol"} {
		callCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		reply, callErr := req.SendMessageAndGetResponse(callCtx, &sqs.SendMessageInput{QueueUrl: q.QueueUrl, MessageBody: aws.String(name)})
		cancel()
		if err = callErr; err != nil { // requester.ErrTimeout: no reply in time
			break
		}
		fmt.Fprintln(out, *reply.Body)
	}
	// The responder stops first, as it may still be replying; then the
	// requester, which deletes its host queue.
	stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return errors.Join(err, resp.Shutdown(stopCtx), <-served, req.Close(stopCtx))
}
