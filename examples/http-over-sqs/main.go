// Command http-over-sqs serves an ordinary net/http service (service.go)
// from an SQS queue and calls it with an ordinary http.Client (client.go).
// Two lines wire them to SQS, both in this file: sqshttp.Handler and
// sqshttp.NewTransport.
//
//	go run ./examples/http-over-sqs                    # both, on an embedded SQS server
//	tempq emulator &                                   # or any SQS: two processes
//	go run ./examples/http-over-sqs -mode server -endpoint-url http://127.0.0.1:4566
//	go run ./examples/http-over-sqs -mode client -endpoint-url http://127.0.0.1:4566
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/observe"
	"github.com/tempqueues/tempqueues/requester"
	"github.com/tempqueues/tempqueues/responder"
	"github.com/tempqueues/tempqueues/sqsclient"
	"github.com/tempqueues/tempqueues/sqshttp"
	"github.com/tempqueues/tempqueues/sqstest"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, os.Args[1:], os.Stdout)
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "http-over-sqs:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, out io.Writer) (err error) {
	fs := flag.NewFlagSet("http-over-sqs", flag.ContinueOnError)
	mode := fs.String("mode", "both", "both, client or server")
	queue := fs.String("queue", "todos-http", "name of the request queue")
	endpoint := fs.String("endpoint-url", "", "SQS-compatible endpoint (tempq emulator); none: an embedded server")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *mode != "both" && *mode != "client" && *mode != "server" {
		return fmt.Errorf("-mode %q: want both, client or server", *mode)
	}
	if *mode != "both" && *endpoint == "" && os.Getenv("AWS_ENDPOINT_URL_SQS") == "" {
		return errors.New("separate client and server processes need a shared server: pass -endpoint-url")
	}
	client, closeSQS, err := openSQS(ctx, *endpoint)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, closeSQS(context.Background())) }()
	q, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(*queue)})
	if err != nil {
		return fmt.Errorf("creating the request queue: %w", err)
	}
	switch *mode {
	case "server":
		fmt.Fprintln(out, "serving", *q.QueueUrl, "(Ctrl-C to stop)")
		return serve(ctx, client, *q.QueueUrl)
	case "client":
		return call(ctx, client, *q.QueueUrl, out)
	}
	serveCtx, stopServer := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- serve(serveCtx, client, *q.QueueUrl) }()
	callErr := call(ctx, client, *q.QueueUrl, out)
	stopServer()
	return errors.Join(callErr, <-served)
}

// serve answers the service's requests from the queue until ctx ends.
func serve(ctx context.Context, client *sqs.Client, queueURL string) error {
	resp, err := responder.New(client)
	if err != nil {
		return err
	}
	return resp.Serve(ctx, queueURL, sqshttp.Handler(newMux())) // wiring, server side
}

// call runs the client code over the queue.
func call(ctx context.Context, client *sqs.Client, queueURL string, out io.Writer) error {
	var sent atomic.Int64 // requests, as the requester's Observer hears them
	r, err := requester.New(client, func(o *requester.Options) {
		o.Observer = observe.Func(func(_ context.Context, e observe.Event) func(*types.Message, error) {
			if e.Kind == observe.Send {
				sent.Add(1)
			}
			return nil
		})
	})
	if err != nil {
		return err
	}
	defer r.Close(context.Background())
	hc := &http.Client{Transport: sqshttp.NewTransport(r, queueURL), Timeout: 10 * time.Second} // wiring, client side
	if err := useTodos(hc, out); err != nil {
		return err
	}
	s := r.Stats()
	fmt.Fprintf(out, "%d requests over SQS, %d API calls\n", sent.Load(), calls(s.Calls))
	return nil
}

// openSQS returns a client for an embedded sqstest server, the endpoint
// given, or SQS as the environment configures it (AWS_ENDPOINT_URL_SQS).
func openSQS(ctx context.Context, endpoint string) (*sqs.Client, func(context.Context) error, error) {
	if endpoint == "" && os.Getenv("AWS_ENDPOINT_URL_SQS") == "" {
		srv := sqstest.NewServer()
		return srv.Client(), srv.Close, nil
	}
	var opts []func(*config.LoadOptions) error
	var sqsOpts []func(*sqs.Options)
	if endpoint != "" { // an emulator takes any credentials and region
		opts = append(opts, config.WithRegion("us-east-1"),
			config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("example", "example", "")))
		sqsOpts = append(sqsOpts, func(o *sqs.Options) { o.BaseEndpoint = aws.String(endpoint) })
	}
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, nil, err
	}
	noop := func(context.Context) error { return nil }
	return sqs.NewFromConfig(cfg, append(sqsOpts, sqsclient.BufferRequestBodies)...), noop, nil
}

func calls(byOp map[string]int64) (n int64) {
	for _, c := range byOp {
		n += c
	}
	return n
}
