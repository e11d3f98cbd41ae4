package oteltempq_test

import (
	"context"
	"fmt"
	"log"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/tempqueues/tempqueues/oteltempq"
	"github.com/tempqueues/tempqueues/requester"
	"github.com/tempqueues/tempqueues/responder"
	"github.com/tempqueues/tempqueues/sqstest"
)

// One round trip, traced: the request's span, the handler's, the reply's
// and the reply's arrival share one trace.
func ExampleNew() {
	ctx := context.Background()
	exp := tracetest.NewInMemoryExporter()
	inst, err := oteltempq.New(func(o *oteltempq.Options) { o.TracerProvider = sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp)) })
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

	// The handler's and the reply's spans end in the responder, the
	// request's and the reply's arrival in the requester, in an order
	// that depends on timing.
	spans := exp.GetSpans()
	var kinds []string
	one := true
	for _, s := range spans {
		kinds = append(kinds, s.SpanKind.String())
		one = one && s.SpanContext.TraceID() == spans[0].SpanContext.TraceID()
	}
	slices.Sort(kinds)
	fmt.Println(kinds, "one trace:", one)
	// Output:
	// [consumer consumer producer producer] one trace: true
}
