package sqsgrpc_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	testpb "google.golang.org/grpc/interop/grpc_testing"

	"github.com/tempqueues/tempqueues/internal/testkit/rpcbench"
	"github.com/tempqueues/tempqueues/internal/testkit/sqstestenv"
	"github.com/tempqueues/tempqueues/requester"
	"github.com/tempqueues/tempqueues/responder"
	"github.com/tempqueues/tempqueues/sqsgrpc"
)

// BenchmarkOverhead measures what the adapter adds to a plain
// SendMessageAndGetResponse round trip: a small echo at 1, 8 and 64
// concurrent callers, directly and as a unary gRPC call (UnaryCall of the
// interop TestService). It reports the process's CPU time per RPC (client,
// responder and the in-process sqstest server together) and API calls per
// RPC.
func BenchmarkOverhead(b *testing.B) {
	be := sqstestenv.SQSTest(b)
	for _, callers := range []int{1, 8, 64} {
		for _, mode := range []string{"direct", "sqsgrpc"} {
			b.Run(mode+"/callers="+strconv.Itoa(callers), func(b *testing.B) { benchOverhead(b, be, mode, callers) })
		}
	}
}

func benchOverhead(b *testing.B, be *sqstestenv.Backend, mode string, callers int) {
	client, counter := be.Client(b)
	ctx := context.Background()
	q, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(sqstestenv.QueueName(b, "bench"))})
	if err != nil {
		b.Fatal(err)
	}
	defer client.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: q.QueueUrl})
	resp, err := responder.New(client, func(o *responder.Options) { o.MaxConcurrency = 64; o.PollWaitTime = time.Second })
	if err != nil {
		b.Fatal(err)
	}
	var h responder.Handler = responder.HandlerFunc(func(_ context.Context, req *responder.Request) (*responder.Reply, error) {
		return &responder.Reply{Body: req.Body()}, nil
	})
	if mode != "direct" {
		srv := sqsgrpc.NewServer()
		testpb.RegisterTestServiceServer(srv, echoService{})
		h = srv.Handler()
	}
	serveCtx, stop := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- resp.Serve(serveCtx, *q.QueueUrl, h) }()
	defer func() { stop(); <-served }()
	r, err := requester.New(client, func(o *requester.Options) { o.DisableSweeping = true })
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close(ctx)
	tc := testpb.NewTestServiceClient(sqsgrpc.NewClientConn(r, *q.QueueUrl))
	call := func() error {
		cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		if mode == "direct" {
			_, err := r.SendMessageAndGetResponse(cctx, &sqs.SendMessageInput{QueueUrl: q.QueueUrl, MessageBody: aws.String("ping")})
			return err
		}
		_, err := tc.UnaryCall(cctx, &testpb.SimpleRequest{Payload: &testpb.Payload{Body: []byte("ping")}})
		return err
	}
	rpcbench.Run(b, callers, counter, call)
}

// echoService answers UnaryCall with the request's payload, and does
// nothing else.
type echoService struct {
	testpb.UnimplementedTestServiceServer
}

func (echoService) UnaryCall(_ context.Context, in *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
	return &testpb.SimpleResponse{Payload: in.Payload}, nil
}
