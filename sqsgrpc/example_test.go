package sqsgrpc_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/tempqueues/tempqueues/requester"
	"github.com/tempqueues/tempqueues/responder"
	"github.com/tempqueues/tempqueues/sqsgrpc"
	"github.com/tempqueues/tempqueues/sqstest"
)

// grpc's health service, registered as on a *grpc.Server and called with
// its generated client: a unary Check and a server-streaming Watch.
func Example() {
	ctx := context.Background()
	srv := sqstest.NewServer()
	defer srv.Close(ctx)
	client := srv.Client()
	q, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("health")})
	if err != nil {
		log.Fatal(err)
	}

	// The service.
	hs := health.NewServer()
	gs := sqsgrpc.NewServer()
	healthpb.RegisterHealthServer(gs, hs)
	resp, err := responder.New(client, func(o *responder.Options) { o.PollWaitTime = time.Second })
	if err != nil {
		log.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- resp.Serve(ctx, *q.QueueUrl, gs.Handler()) }()
	defer func() {
		// A Watch handler runs until its caller's deadline (a caller's
		// cancellation does not reach it): a short grace period stops it.
		sctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		defer cancel()
		_ = resp.Shutdown(sctx)
		<-served
	}()

	// The caller.
	r, err := requester.New(client)
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close(ctx)
	hc := healthpb.NewHealthClient(sqsgrpc.NewClientConn(r, *q.QueueUrl))

	callCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	check, err := hc.Check(callCtx, &healthpb.HealthCheckRequest{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("check:", check.Status)

	hs.SetServingStatus("orders", healthpb.HealthCheckResponse_SERVING)
	watch, err := hc.Watch(callCtx, &healthpb.HealthCheckRequest{Service: "orders"})
	if err != nil {
		log.Fatal(err)
	}
	m, err := watch.Recv()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("watch:", m.Status)
	hs.SetServingStatus("orders", healthpb.HealthCheckResponse_NOT_SERVING)
	if m, err = watch.Recv(); err != nil {
		log.Fatal(err)
	}
	fmt.Println("watch:", m.Status)
	// Output:
	// check: SERVING
	// watch: SERVING
	// watch: NOT_SERVING
}
