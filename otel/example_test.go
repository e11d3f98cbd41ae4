package otel_test

import (
	"context"
	"fmt"
	"log"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/tempqueues/tempqueues/otel"
	"github.com/tempqueues/tempqueues/requester"
	"github.com/tempqueues/tempqueues/responder"
	"github.com/tempqueues/tempqueues/sqstest"
)

// One round trip, traced: the request's span, the handler's and the
// reply's share one trace.
func ExampleNew() {
	ctx := context.Background()
	exp := tracetest.NewInMemoryExporter()
	inst, err := otel.New(func(o *otel.Options) { o.TracerProvider = sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp)) })
	if err != nil {
		log.Fatal(err)
	}
	srv := sqstest.NewServer()
	defer srv.Close(ctx)
	client := srv.Client(inst.SQS)
	q, _ := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("traced")})

	resp, _ := responder.New(client, inst.Responder)
	served := make(chan error, 1)
	go func() {
		served <- resp.Serve(ctx, *q.QueueUrl, responder.HandlerFunc(func(ctx context.Context, req *responder.Request) (*responder.Reply, error) {
			return &responder.Reply{Body: "pong"}, nil
		}))
	}()
	req, _ := requester.New(client, inst.Requester)
	if _, err := req.SendMessageAndGetResponse(ctx, &sqs.SendMessageInput{QueueUrl: q.QueueUrl, MessageBody: aws.String("ping")}); err != nil {
		log.Fatal(err)
	}
	_ = resp.Shutdown(ctx)
	<-served
	_ = req.Close(ctx)

	spans := exp.GetSpans()
	for _, s := range spans {
		fmt.Println(s.SpanKind, s.SpanContext.TraceID() == spans[0].SpanContext.TraceID())
	}
	// Output:
	// producer true
	// consumer true
	// producer true
}
