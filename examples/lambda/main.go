// Command lambda is two AWS Lambda functions in one binary, chosen by the
// FUNCTION environment variable (template.yaml sets it):
//
//   - "responder": answers login requests from an SQS event source, Go or
//     Java requesters alike, deduplicating redeliveries, and reports
//     failed requests as batch item failures;
//   - "redrive": the dead-letter queue's function, replaying failed
//     requests with backoff and full jitter, parking them after
//     MAX_ATTEMPTS.
//
// Deploy with `sam build && sam deploy --guided`; run the functions locally
// on an embedded SQS server and on the fauxqs emulator with `go test`.
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/tempqueues/tempqueues/lambdatempq"
	"github.com/tempqueues/tempqueues/redrive"
	"github.com/tempqueues/tempqueues/responder"
	"github.com/tempqueues/tempqueues/sqsclient"
)

func main() {
	// Built once per execution environment, reused by every invocation.
	ctx := context.Background()
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		log.Fatal(err)
	}
	client := sqs.NewFromConfig(cfg, sqsclient.BufferRequestBodies)
	switch f := os.Getenv("FUNCTION"); f {
	case "responder":
		fn, err := newResponder(client, nil)
		if err != nil {
			log.Fatal(err)
		}
		lambda.Start(fn.HandleSQSEvent)
	case "redrive":
		maxAttempts, _ := strconv.Atoi(os.Getenv("MAX_ATTEMPTS"))
		fn, err := newRedrive(client, os.Getenv("DLQ_URL"), os.Getenv("TARGET_URL"), os.Getenv("PARKING_URL"), maxAttempts)
		if err != nil {
			log.Fatal(err)
		}
		lambda.Start(fn.HandleSQSEvent)
	default:
		log.Fatalf("FUNCTION is %q: want responder or redrive", f)
	}
}

// errNoName is the login service's failure: the request goes back to the
// queue and, after the queue's maxReceiveCount, to the dead-letter queue.
var errNoName = errors.New("login: no user name")

// login is the service: "login <name>" is answered "welcome <name>".
func login(ctx context.Context, req *responder.Request) (*responder.Reply, error) {
	name := strings.TrimSpace(strings.TrimPrefix(req.Body(), "login"))
	if name == "" {
		return nil, errNoName
	}
	return &responder.Reply{Body: "welcome " + name}, nil
}

// newResponder is the responder function's handler. queueURL maps the
// event's queue ARN to its URL; nil derives the AWS URL from the ARN.
func newResponder(client *sqs.Client, queueURL func(arn string) (string, error)) (*lambdatempq.Responder, error) {
	return lambdatempq.NewResponder(client, responder.HandlerFunc(login), func(o *lambdatempq.Options) {
		if queueURL != nil {
			o.QueueURL = queueURL
		}
		o.Responder = append(o.Responder, func(o *responder.Options) {
			// Per execution environment; a fleet shares a Redis store
			// (github.com/tempqueues/tempqueues/redisstore) instead.
			o.Store = responder.NewMemoryStore()
			o.HandlerTimeout = 10 * time.Second
			o.VisibilityTimeout = 30 * time.Second // the Store lease: the function's timeout
		})
	})
}

// newRedrive is the dead-letter queue function's handler.
func newRedrive(client *sqs.Client, dlqURL, targetURL, parkingURL string, maxAttempts int) (*lambdatempq.Redrive, error) {
	if dlqURL == "" || parkingURL == "" {
		return nil, fmt.Errorf("DLQ_URL and PARKING_URL are required")
	}
	return lambdatempq.NewRedrive(client, dlqURL, func(o *redrive.Options) {
		o.Target, o.ParkingQueue = targetURL, parkingURL
		o.MaxAttempts = maxAttempts
		o.BackoffBase, o.BackoffCap = 2*time.Second, time.Hour // beyond 900 s: scheduled on the DLQ
	})
}
