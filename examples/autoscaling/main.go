// Command autoscaling shows the figures an autoscaler needs: a burst of
// requests lands on a queue served by one worker (a responder handling 4
// requests at once), and a backlog.Monitor in the worker reports, every
// second, the backlog per worker, the target backlog from the acceptable
// latency and the worker's own average processing time, and the number of
// workers that would keep up.
//
//	go run ./examples/autoscaling                      # on an embedded SQS server
//	go run ./examples/autoscaling --endpoint-url http://127.0.0.1:4566
//	go run ./examples/autoscaling -requests 500 -work 20ms -latency 500ms
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/backlog"
	"github.com/tempqueues/tempqueues/observe"
	"github.com/tempqueues/tempqueues/responder"
	"github.com/tempqueues/tempqueues/sqsclient"
	"github.com/tempqueues/tempqueues/sqstest"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, os.Args[1:], os.Stdout)
	if errors.Is(err, flag.ErrHelp) {
		return // -h printed the usage: exit 0, as with flag.ExitOnError
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "autoscaling:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, out io.Writer) (err error) {
	fs := flag.NewFlagSet("autoscaling", flag.ContinueOnError)
	requests := fs.Int("requests", 400, "requests in the burst")
	work := fs.Duration("work", 50*time.Millisecond, "processing time of one request")
	concurrency := fs.Int("concurrency", 4, "requests the worker handles at once")
	latency := fs.Duration("latency", 250*time.Millisecond, "acceptable latency")
	limit := fs.Duration("timeout", 60*time.Second, "give up after this long")
	var env sqsFlags
	env.register(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, *limit)
	defer cancel()
	client, where, closeSQS, err := env.open(ctx)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, closeSQS(context.Background())) }()
	fmt.Fprintln(out, "SQS:", where)
	q, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(fmt.Sprintf("autoscaling-demo-%d", time.Now().UnixNano()))})
	if err != nil {
		return err
	}
	queueURL := aws.ToString(q.QueueUrl)
	defer client.DeleteQueue(context.WithoutCancel(ctx), &sqs.DeleteQueueInput{QueueUrl: q.QueueUrl})

	// The burst, 10 requests per call. They ask for no reply: the worker
	// handles and deletes them.
	for i := 0; i < *requests; i += 10 {
		var entries []types.SendMessageBatchRequestEntry
		for j := i; j < min(i+10, *requests); j++ {
			entries = append(entries, types.SendMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(j)), MessageBody: aws.String("job " + strconv.Itoa(j))})
		}
		if _, err := client.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: q.QueueUrl, Entries: entries}); err != nil {
			return err
		}
	}
	fmt.Fprintf(out, "queued %d requests; one worker handles %d at once, %v each; acceptable latency %v\n", *requests, *concurrency, *work, *latency)

	// The worker.
	worker, err := responder.New(client, func(o *responder.Options) {
		o.MaxConcurrency = *concurrency
		o.PollWaitTime = time.Second
	})
	if err != nil {
		return err
	}
	served := make(chan error, 1)
	go func() {
		served <- worker.Serve(ctx, queueURL, responder.HandlerFunc(func(ctx context.Context, _ *responder.Request) (*responder.Reply, error) {
			select {
			case <-time.After(*work):
				return nil, nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}))
	}()
	// Shutdown ends Serve and lets go of everything the worker holds; it
	// is idempotent, so the early returns below are covered too.
	defer func() { _ = worker.Shutdown(context.WithoutCancel(ctx)) }()

	// The worker's own figures, every second, until the queue is empty.
	var mu sync.Mutex
	start := time.Now()
	drained := make(chan struct{})
	var once sync.Once
	fmt.Fprintf(out, "%6s %8s %9s %10s %9s %7s %8s\n", "time", "visible", "in-flight", "per-worker", "avg-proc", "target", "desired")
	m, err := backlog.NewMonitor(client, queueURL, func(o *backlog.MonitorOptions) {
		o.Period = time.Second
		o.Inputs = func() backlog.Options {
			return backlog.Options{
				AcceptableLatency: *latency, MaxConcurrency: *concurrency,
				Workers: 1, MinWorkers: 1, MaxWorkers: 20,
				ProcessingTime: worker.Stats().AverageProcessingTime,
			}
		}
		o.Observer = observe.Func(func(_ context.Context, e observe.Event) func(*types.Message, error) {
			mu.Lock()
			defer mu.Unlock()
			if e.Err != nil {
				fmt.Fprintln(out, "measure:", e.Err)
				return nil
			}
			f := e.Detail.(backlog.Figures) // Measured: the only kind a Monitor tells
			target := "-"
			if f.TargetBacklogPerWorker > 0 {
				target = fmt.Sprintf("%.0f", f.TargetBacklogPerWorker)
			}
			fmt.Fprintf(out, "%5.1fs %8d %9d %10.0f %9v %7s %8d\n", time.Since(start).Seconds(), f.Visible, f.InFlight, f.BacklogPerWorker,
				f.ProcessingTime.Round(time.Millisecond), target, f.DesiredWorkers)
			if f.Visible == 0 && f.InFlight == 0 && f.Delayed == 0 {
				once.Do(func() { close(drained) })
			}
			return nil
		})
	})
	if err != nil {
		return err
	}
	monCtx, stopMon := context.WithCancel(ctx)
	monitored := make(chan error, 1)
	go func() { monitored <- m.Run(monCtx) }()
	select {
	case <-drained:
	case <-ctx.Done():
	}
	stopMon()
	<-monitored
	if err := errors.Join(worker.Shutdown(context.WithoutCancel(ctx)), <-served); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("the queue did not drain: %w", err)
	}
	s := worker.Stats()
	fmt.Fprintf(out, "drained: %d requests handled in %v\n", s.Handled, time.Since(start).Round(100*time.Millisecond))
	// A scaler would read these from the worker, e.g. with
	// expvar.Publish("requests_backlog", m.Var()) and GET /debug/vars:
	fmt.Fprintln(out, "expvar:", m.Var().String())
	return nil
}

// sqsFlags select the SQS server: an embedded sqstest server by default, an
// emulator with -endpoint-url, or SQS as the environment configures the SDK
// (region, credentials, profile) with -aws or when AWS_ENDPOINT_URL_SQS is
// set.
type sqsFlags struct {
	endpoint, region string
	useAWS           bool
}

func (f *sqsFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.endpoint, "endpoint-url", "", "SQS-compatible endpoint (an emulator); dummy credentials are used")
	fs.StringVar(&f.region, "region", "", "AWS region (default from the environment, or us-east-1 with -endpoint-url)")
	fs.BoolVar(&f.useAWS, "aws", os.Getenv("AWS_ENDPOINT_URL_SQS") != "", "use SQS as the environment configures it")
}

func (f *sqsFlags) embedded() bool { return f.endpoint == "" && !f.useAWS }

// open returns a client for the server f selects, a description of the
// server, and a function that closes it if it is the embedded one.
func (f *sqsFlags) open(ctx context.Context, optFns ...func(*sqs.Options)) (*sqs.Client, string, func(context.Context) error, error) {
	if f.embedded() {
		srv := sqstest.NewServer()
		return srv.Client(optFns...), "embedded sqstest at " + srv.URL(), srv.Close, nil
	}
	var opts []func(*config.LoadOptions) error
	if f.region != "" {
		opts = append(opts, config.WithRegion(f.region))
	}
	where := "AWS"
	if f.endpoint != "" { // an emulator takes any credentials
		opts = append(opts, config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("example", "example", "")))
		optFns = append(optFns, func(o *sqs.Options) { o.BaseEndpoint = aws.String(f.endpoint) })
		where = "endpoint " + f.endpoint
	} else if ep := os.Getenv("AWS_ENDPOINT_URL_SQS"); ep != "" {
		where = "endpoint " + ep + " (AWS_ENDPOINT_URL_SQS)"
	}
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, "", nil, fmt.Errorf("loading the AWS configuration: %w", err)
	}
	switch {
	case cfg.Region != "":
	case f.endpoint != "":
		cfg.Region = "us-east-1"
	default:
		return nil, "", nil, errors.New("no AWS region: set AWS_REGION or pass -region")
	}
	client := sqs.NewFromConfig(cfg, append(optFns, sqsclient.BufferRequestBodies)...)
	return client, where + ", region " + cfg.Region, func(context.Context) error { return nil }, nil
}
