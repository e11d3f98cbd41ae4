package responder_test

import (
	"context"
	"errors"
	"log"
	"log/slog"
	"os"
	"os/signal"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/tempqueues/tempqueues/responder"
)

// A login server: Serve answers requests until SIGINT, then drains. The
// client honours AWS_ENDPOINT_URL_SQS, so this runs against fauxqs too.
func ExampleResponder_Serve() {
	ctx := context.Background()
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		log.Fatal(err)
	}
	r, err := responder.New(sqs.NewFromConfig(cfg), func(o *responder.Options) {
		o.MaxConcurrency = 32
		o.Logger = slog.Default()
	})
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

	ctx, stop := signal.NotifyContext(ctx, os.Interrupt)
	defer stop()
	// Serve returns nil once ctx is cancelled and the running handlers
	// finished (or were cancelled and released after Options.DrainTimeout);
	// an idle Serve stops in about half a second.
	if err := r.Serve(ctx, "https://sqs.us-east-1.amazonaws.com/123456789012/login", login); err != nil {
		log.Fatal(err)
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = r.Shutdown(sctx)
}

// Answering from a receive loop of your own, as with the Java client's
// AmazonSQSResponder.
func ExampleResponder_SendResponseMessage() {
	ctx := context.Background()
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		log.Fatal(err)
	}
	client := sqs.NewFromConfig(cfg)
	r, err := responder.New(client)
	if err != nil {
		log.Fatal(err)
	}
	defer r.Shutdown(ctx)

	queueURL := "https://sqs.us-east-1.amazonaws.com/123456789012/requests"
	out, err := client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
		QueueUrl: aws.String(queueURL), MaxNumberOfMessages: 10, WaitTimeSeconds: 20,
		MessageAttributeNames: []string{"All"}, // ResponseQueueUrl is a message attribute
	})
	if err != nil {
		log.Fatal(err)
	}
	for _, m := range out.Messages {
		if responder.IsResponseMessageRequested(m) {
			err := r.SendResponseMessage(ctx, m, &responder.Reply{Body: "done: " + aws.ToString(m.Body)})
			if err != nil && !errors.Is(err, responder.ErrResponseQueueGone) {
				continue // not answered: leave the request for redelivery
			}
		}
		_, _ = client.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(queueURL), ReceiptHandle: m.ReceiptHandle})
	}
}

// Deduplicating redelivered requests and sending poison requests to the
// dead-letter queue after a backoff.
func ExampleOptions() {
	var client *sqs.Client // from sqs.NewFromConfig(cfg)
	r, err := responder.New(client, func(o *responder.Options) {
		o.VisibilityTimeout = 10 * time.Second // heartbeat step; crash recovery time
		o.Store = responder.NewMemoryStore()   // or a shared store for a fleet
		o.Retry = responder.RetryWithBackoff   // 1 s, 2 s, 4 s... until maxReceiveCount
		o.OnRequestDone = func(req *responder.Request, d time.Duration, err error) {
			if err != nil {
				log.Printf("request %s failed after %v (receive %d): %v", req.ID, d, req.ReceiveCount, err)
			}
		}
	})
	if err != nil {
		log.Fatal(err)
	}
	_ = r // r.Serve(ctx, queueURL, handler)
}
