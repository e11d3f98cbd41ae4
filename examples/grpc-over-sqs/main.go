// Command grpc-over-sqs serves two gRPC services from an SQS queue and
// calls them with their generated clients, one RPC of each kind: grpc's
// health service (a unary Check and a server-streaming Watch) and grpc's
// interop TestService (a client-streaming upload, StreamingInputCall, and
// a bidirectional chat, FullDuplexCall). The services and the clients are
// grpc's own generated code; two lines wire them to SQS:
// sqsgrpc.NewServer (with Handler) and sqsgrpc.NewClientConn.
//
//	go run .                                           # both, on an embedded SQS server
//	tempq emulator &                                   # or any SQS: two processes
//	go run . -mode server -endpoint-url http://127.0.0.1:4566
//	go run . -mode client -endpoint-url http://127.0.0.1:4566
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"

	"github.com/tempqueues/tempqueues/requester"
	"github.com/tempqueues/tempqueues/responder"
	"github.com/tempqueues/tempqueues/sqsclient"
	"github.com/tempqueues/tempqueues/sqsgrpc"
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
		fmt.Fprintln(os.Stderr, "grpc-over-sqs:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, out io.Writer) (err error) {
	fs := flag.NewFlagSet("grpc-over-sqs", flag.ContinueOnError)
	mode := fs.String("mode", "both", "both, client or server")
	queue := fs.String("queue", "health-grpc", "name of the request queue")
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

// serve answers health requests until ctx ends. The "orders" service
// turns NOT_SERVING 200 ms after a Watch of it begins, for the Watch to
// report; a stream interceptor does it, as any grpc interceptor would.
func serve(ctx context.Context, client *sqs.Client, queueURL string) error {
	hs := health.NewServer()
	hs.SetServingStatus("orders", healthpb.HealthCheckResponse_SERVING)
	flipOnWatch := func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		t := time.AfterFunc(200*time.Millisecond, func() { hs.SetServingStatus("orders", healthpb.HealthCheckResponse_NOT_SERVING) })
		defer t.Stop()
		return handler(srv, ss)
	}
	resp, err := responder.New(client, func(o *responder.Options) {
		o.DrainTimeout = 100 * time.Millisecond // a Watch runs until its caller's deadline
	})
	if err != nil {
		return err
	}
	// Wiring, server side: a grpc.ServiceRegistrar served by the responder.
	srv := sqsgrpc.NewServer(func(o *sqsgrpc.ServerOptions) {
		o.StreamInterceptors = []grpc.StreamServerInterceptor{flipOnWatch}
	})
	healthpb.RegisterHealthServer(srv, hs)
	testgrpc.RegisterTestServiceServer(srv, streams{})
	return resp.Serve(ctx, queueURL, srv.Handler())
}

// streams is ordinary grpc server code: an upload that counts what it
// received, and a chat that answers each message as it comes.
type streams struct {
	testgrpc.UnimplementedTestServiceServer
}

func (streams) StreamingInputCall(stream testgrpc.TestService_StreamingInputCallServer) error {
	total := 0
	for {
		chunk, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return stream.SendAndClose(&testgrpc.StreamingInputCallResponse{AggregatedPayloadSize: int32(total)})
		}
		if err != nil {
			return err
		}
		total += len(chunk.GetPayload().GetBody())
	}
}

func (streams) FullDuplexCall(stream testgrpc.TestService_FullDuplexCallServer) error {
	for {
		in, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		reply := "pong " + strings.TrimPrefix(string(in.GetPayload().GetBody()), "ping ")
		if err := stream.Send(&testgrpc.StreamingOutputCallResponse{Payload: &testgrpc.Payload{Body: []byte(reply)}}); err != nil {
			return err
		}
	}
}

// call checks and watches the service with grpc's generated client.
func call(ctx context.Context, client *sqs.Client, queueURL string, out io.Writer) error {
	r, err := requester.New(client)
	if err != nil {
		return err
	}
	defer r.Close(context.Background())
	var conn grpc.ClientConnInterface = sqsgrpc.NewClientConn(r, queueURL) // wiring, client side
	if err := checkAndWatch(ctx, healthpb.NewHealthClient(conn), out); err != nil {
		return err
	}
	return uploadAndChat(ctx, testgrpc.NewTestServiceClient(conn), out)
}

// uploadAndChat is ordinary grpc client code: a client-streaming upload
// of four chunks, then a bidirectional chat of three exchanges, each
// answer awaited before the next message.
func uploadAndChat(ctx context.Context, tc testgrpc.TestServiceClient, out io.Writer) error {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	up, err := tc.StreamingInputCall(cctx)
	if err != nil {
		return err
	}
	for _, chunk := range []string{"chunk one ", "chunk two ", "chunk three ", "last chunk"} {
		if err := up.Send(&testgrpc.StreamingInputCallRequest{Payload: &testgrpc.Payload{Body: []byte(chunk)}}); err != nil {
			return err
		}
	}
	sum, err := up.CloseAndRecv()
	if err != nil {
		return err
	}
	fmt.Fprintln(out, "Upload: 4 chunks,", sum.AggregatedPayloadSize, "bytes")
	chat, err := tc.FullDuplexCall(cctx)
	if err != nil {
		return err
	}
	for i := 1; i <= 3; i++ {
		if err := chat.Send(&testgrpc.StreamingOutputCallRequest{Payload: &testgrpc.Payload{Body: []byte(fmt.Sprint("ping ", i))}}); err != nil {
			return err
		}
		m, err := chat.Recv()
		if err != nil {
			return err
		}
		fmt.Fprintln(out, "Chat:", string(m.GetPayload().GetBody()))
	}
	if err := chat.CloseSend(); err != nil {
		return err
	}
	if _, err := chat.Recv(); !errors.Is(err, io.EOF) {
		return fmt.Errorf("chat: the server ended with %v", err)
	}
	return nil
}

// checkAndWatch is ordinary grpc client code.
func checkAndWatch(ctx context.Context, hc healthpb.HealthClient, out io.Writer) error {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	check, err := hc.Check(cctx, &healthpb.HealthCheckRequest{Service: "orders"})
	if err != nil {
		return err
	}
	fmt.Fprintln(out, "Check orders:", check.Status)
	watch, err := hc.Watch(cctx, &healthpb.HealthCheckRequest{Service: "orders"})
	if err != nil {
		return err
	}
	for {
		m, err := watch.Recv()
		if err != nil {
			return err
		}
		fmt.Fprintln(out, "Watch orders:", m.Status)
		if m.Status == healthpb.HealthCheckResponse_NOT_SERVING {
			return nil
		}
	}
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
