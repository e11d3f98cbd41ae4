// Command login is the login client and server of AWS's Temporary Queue
// Client documentation, in Go: a server answers "login" requests from a
// small user table, and a client sends a few requests and prints the replies
// with their round-trip times.
//
//	go run ./examples/login                  # both, on an embedded SQS server
//	go run ./examples/login -mode server --endpoint-url http://127.0.0.1:4566
//	go run ./examples/login -mode client --endpoint-url http://127.0.0.1:4566
//	AWS_REGION=eu-west-1 go run ./examples/login -aws   # on AWS
//
// Client and server can run as separate processes against one queue (an
// emulator or AWS); the embedded server lives in one process only.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/tempqueues/tempqueues/requester"
	"github.com/tempqueues/tempqueues/responder"
	"github.com/tempqueues/tempqueues/sqsclient"
	"github.com/tempqueues/tempqueues/sqstest"
)

// loginRequest and loginReply are the messages' JSON bodies.
type loginRequest struct {
	User     string `json:"user"`
	Password string `json:"password"`
}

type loginReply struct {
	OK      bool   `json:"ok"`
	Message string `json:"message"`
}

// users is the server's user table.
var users = map[string]string{"alice": "wonderland", "bob": "builder"}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, os.Args[1:], os.Stdout)
	if errors.Is(err, flag.ErrHelp) {
		return // -h printed the usage: exit 0, as with flag.ExitOnError
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "login:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, out io.Writer) (err error) {
	fs := flag.NewFlagSet("login", flag.ContinueOnError)
	mode := fs.String("mode", "both", "both, client or server")
	queue := fs.String("queue", "login-requests", "name of the request queue")
	timeout := fs.Duration("timeout", 10*time.Second, "client: how long to wait for each reply")
	var env sqsFlags
	env.register(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *mode != "both" && *mode != "client" && *mode != "server" {
		return fmt.Errorf("-mode %q: want both, client or server", *mode)
	}
	if *mode != "both" && env.embedded() {
		return errors.New("separate client and server processes need a shared server: pass -endpoint-url or -aws")
	}
	counter := new(sqsclient.CallCounter) // counts every API call the client makes
	sqsClient, where, closeSQS, err := env.open(ctx, sqs.WithAPIOptions(counter.Register))
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, closeSQS(context.Background())) }()
	fmt.Fprintln(out, "SQS:", where)

	q, err := sqsClient.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(*queue)})
	if err != nil {
		return fmt.Errorf("creating the request queue: %w", err)
	}
	queueURL := aws.ToString(q.QueueUrl)

	switch *mode {
	case "server":
		fmt.Fprintln(out, "serving login requests on", queueURL, "(Ctrl-C to stop)")
		return serve(ctx, sqsClient, queueURL)
	case "client":
		return client(ctx, sqsClient, queueURL, *timeout, out)
	}
	serveCtx, stopServer := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- serve(serveCtx, sqsClient, queueURL) }()
	clientErr := client(ctx, sqsClient, queueURL, *timeout, out)
	stopServer()
	if err := <-served; err != nil {
		return err
	}
	if clientErr != nil {
		return clientErr
	}
	fmt.Fprintf(out, "API calls, client and server together: %d\n", counter.Total())
	return nil
}

// serve answers login requests until ctx ends.
func serve(ctx context.Context, client *sqs.Client, queueURL string) error {
	r, err := responder.New(client, func(o *responder.Options) {
		o.Store = responder.NewMemoryStore() // a redelivered login is answered once
	})
	if err != nil {
		return err
	}
	err = r.Serve(ctx, queueURL, responder.HandlerFunc(login))
	// Serve has stopped and flushed; Shutdown lets the responder's batchers go.
	return errors.Join(err, r.Shutdown(context.WithoutCancel(ctx)))
}

func login(_ context.Context, req *responder.Request) (*responder.Reply, error) {
	var in loginRequest
	if err := json.Unmarshal([]byte(req.Body()), &in); err != nil {
		return nil, fmt.Errorf("malformed login request: %w", err) // retried, then dead-lettered
	}
	reply := loginReply{Message: "invalid user name or password"}
	if pw, ok := users[in.User]; ok && pw == in.Password {
		reply = loginReply{OK: true, Message: "welcome, " + in.User}
	}
	body, err := json.Marshal(reply)
	if err != nil {
		return nil, err
	}
	return &responder.Reply{Body: string(body)}, nil
}

// client sends a few logins and prints each reply and its round-trip time.
func client(ctx context.Context, client *sqs.Client, queueURL string, timeout time.Duration, out io.Writer) error {
	r, err := requester.New(client)
	if err != nil {
		return err
	}
	defer r.Close(context.Background())
	attempts := []loginRequest{
		{"alice", "wonderland"}, {"bob", "builder"}, {"alice", "guess"}, {"mallory", "letmein"}, {"bob", "builder"},
	}
	replies, timedOut := 0, 0
	for _, a := range attempts {
		body, _ := json.Marshal(a)
		cctx, cancel := context.WithTimeout(ctx, timeout)
		start := time.Now()
		m, err := r.SendMessageAndGetResponse(cctx, &sqs.SendMessageInput{QueueUrl: aws.String(queueURL), MessageBody: aws.String(string(body))})
		cancel()
		if errors.Is(err, requester.ErrTimeout) {
			fmt.Fprintf(out, "login %-8s no reply within %v (is a server running?)\n", a.User, timeout)
			timedOut++
			continue
		}
		if err != nil {
			return err
		}
		replies++
		var reply loginReply
		if err := json.Unmarshal([]byte(aws.ToString(m.Body)), &reply); err != nil {
			return fmt.Errorf("malformed reply %q: %w", aws.ToString(m.Body), err)
		}
		verdict := "denied"
		if reply.OK {
			verdict = "ok"
		}
		fmt.Fprintf(out, "login %-8s %-6s %-32q %6.1f ms\n", a.User, verdict, reply.Message, float64(time.Since(start).Microseconds())/1000)
	}
	fmt.Fprintf(out, "%d requests, %d replies, %d timed out\n", len(attempts), replies, timedOut)
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
