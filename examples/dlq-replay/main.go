// Command dlq-replay shows dead-letter replay end to end: a service fails
// on a poison request, SQS moves the request to the dead-letter queue after
// two receives, a redrive.Redriver sends it back with growing, jittered
// delays, and after the last attempt parks it for a person to look at, its
// body and attributes (the request id included) intact.
//
//	go run ./examples/dlq-replay                       # on an embedded SQS server
//	go run ./examples/dlq-replay --endpoint-url http://127.0.0.1:4566
//	AWS_REGION=eu-west-1 go run ./examples/dlq-replay -aws   # on AWS (creates 3 queues)
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/observe"
	"github.com/tempqueues/tempqueues/redrive"
	"github.com/tempqueues/tempqueues/requester"
	"github.com/tempqueues/tempqueues/responder"
	"github.com/tempqueues/tempqueues/sqsapi"
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
		fmt.Fprintln(os.Stderr, "dlq-replay:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, out io.Writer) (err error) {
	fs := flag.NewFlagSet("dlq-replay", flag.ContinueOnError)
	attempts := fs.Int("max-attempts", 2, "replays before the request is parked")
	base := fs.Duration("base", time.Second, "backoff base of the replays")
	limit := fs.Duration("timeout", 60*time.Second, "give up after this long")
	var env sqsFlags
	env.register(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, *limit)
	defer cancel()
	counter := new(sqsclient.CallCounter) // counts every API call the client makes
	client, where, closeSQS, err := env.open(ctx, sqs.WithAPIOptions(counter.Register))
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, closeSQS(context.Background())) }()
	fmt.Fprintln(out, "SQS:", where)
	start := time.Now()
	var mu sync.Mutex // the service, the redriver and the client log
	logf := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(out, "%6.1fs  %s\n", time.Since(start).Seconds(), fmt.Sprintf(format, args...))
	}

	// The queues: orders (the service's requests) dead-letters to
	// orders-dlq after 2 receives; orders-parking is for a person.
	prefix := "dlq-demo-" + suffix() + "-"
	var cleanup []string // queues to delete at the end
	mk := func(name string, attrs map[string]string) (string, error) {
		q, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(prefix + name), Attributes: attrs})
		if err != nil {
			return "", fmt.Errorf("creating %s: %w", name, err)
		}
		u := aws.ToString(q.QueueUrl)
		cleanup = append(cleanup, u)
		return u, nil
	}
	defer func() {
		for _, u := range cleanup {
			_, _ = client.DeleteQueue(context.WithoutCancel(ctx), &sqs.DeleteQueueInput{QueueUrl: aws.String(u)})
		}
	}()
	dlq, err := mk("orders-dlq", nil)
	if err != nil {
		return err
	}
	arn, err := client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(dlq), AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameQueueArn}})
	if err != nil {
		return err
	}
	orders, err := mk("orders", map[string]string{
		"RedrivePolicy": fmt.Sprintf(`{"deadLetterTargetArn":%q,"maxReceiveCount":"2"}`, arn.Attributes["QueueArn"]),
	})
	if err != nil {
		return err
	}
	parking, err := mk("orders-parking", nil)
	if err != nil {
		return err
	}

	// The service: fails on poison, with an immediate retry, so SQS
	// dead-letters the request on its third receive.
	var poisonSeen atomic.Int32
	svc, err := responder.New(client, func(o *responder.Options) {
		o.BackoffBase = -1 // at once
		o.Store = responder.NewMemoryStore()
	})
	if err != nil {
		return err
	}
	served := make(chan error, 1)
	go func() {
		served <- svc.Serve(ctx, orders, responder.HandlerFunc(func(_ context.Context, req *responder.Request) (*responder.Reply, error) {
			if strings.Contains(req.Body(), "poison") {
				attempt, _ := req.Attribute(sqsapi.RedriveAttemptAttribute)
				n := poisonSeen.Add(1)
				logf("service: %q failed (delivery %d, replay attempt %q)", req.Body(), n, attempt)
				return nil, errors.New("cannot process this order")
			}
			return &responder.Reply{Body: "processed " + req.Body()}, nil
		}))
	}()
	defer func() {
		_ = svc.Shutdown(context.WithoutCancel(ctx)) // Serve returns, and the responder lets all go
		<-served
	}()

	// The redriver, running continuously beside the service.
	rd, err := redrive.New(client, dlq, func(o *redrive.Options) {
		o.Target = orders // or leave it out: ListDeadLetterSourceQueues finds it on AWS and sqstest
		o.ParkingQueue = parking
		o.MaxAttempts = *attempts
		o.BackoffBase, o.BackoffCap = *base, 30*time.Second
		o.PollWaitTime = time.Second
		o.Observer = observe.Func(func(_ context.Context, ev observe.Event) func(*types.Message, error) {
			d := ev.Detail.(redrive.Detail) // a Redriven event: the only kind redrive tells
			switch ev.Reason {
			case "park":
				logf("redrive: parked request %s after %d replays: %v", ev.RequestID, d.Attempt, d.Cause)
			default:
				logf("redrive: %s request %s, attempt %d, delay %v (at most %v)", ev.Reason, ev.RequestID, d.Attempt, ev.Duration, min(30*time.Second, *base<<(d.Attempt-1)))
			}
			return nil
		})
	})
	if err != nil {
		return err
	}
	rdCtx, stopRd := context.WithCancel(ctx)
	defer stopRd()
	redriven := make(chan redrive.Report, 1)
	go func() {
		rep, err := rd.Run(rdCtx)
		if err != nil {
			logf("redrive: %v", err)
		}
		redriven <- rep
	}()

	// A client: one good order, one poison order.
	req, err := requester.New(client, func(o *requester.Options) { o.DisableSweeping = true })
	if err != nil {
		return err
	}
	defer req.Close(context.WithoutCancel(ctx))
	reply, err := req.SendMessageAndGetResponse(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(orders), MessageBody: aws.String("order 1")})
	if err != nil {
		return err
	}
	logf("client: %q", aws.ToString(reply.Body))
	call, err := req.SendMessageAndGetResponseAsync(ctx, &sqs.SendMessageInput{
		QueueUrl:    aws.String(orders),
		MessageBody: aws.String("poison order 2"),
		MessageAttributes: map[string]types.MessageAttributeValue{
			"Customer": {DataType: aws.String("String"), StringValue: aws.String("c-17")},
		},
	})
	if err != nil {
		return err
	}
	logf("client: sent %q as request %s", "poison order 2", call.RequestID())

	// Wait for the parked request.
	var parked types.Message
	for parked.Body == nil {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("nothing parked in time: %w", err)
		}
		got, err := client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(parking), WaitTimeSeconds: 1, MessageAttributeNames: []string{"All"},
		})
		if err != nil {
			return err
		}
		if len(got.Messages) > 0 {
			parked = got.Messages[0]
		}
	}
	call.Cancel()
	stopRd()
	rep := <-redriven
	rid := aws.ToString(parked.MessageAttributes[sqsapi.RequestIDAttribute].StringValue)
	logf("parking queue: %q, request id %s (same: %v), customer %s, replays %s",
		aws.ToString(parked.Body), rid, rid == call.RequestID(),
		aws.ToString(parked.MessageAttributes["Customer"].StringValue),
		aws.ToString(parked.MessageAttributes[sqsapi.RedriveAttemptAttribute].StringValue))
	fmt.Fprintf(out, "the service saw the poison order %d times; redrive: replayed %d, parked %d, failed %d\n",
		poisonSeen.Load(), rep.Replayed, rep.Parked, rep.Failed)
	fmt.Fprintf(out, "API calls, everything together: %d\n", counter.Total())
	return nil
}

func suffix() string {
	var b [3]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
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
