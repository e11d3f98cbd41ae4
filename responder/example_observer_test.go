package responder_test

import (
	"context"
	"fmt"
	"log"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/observe"
	"github.com/tempqueues/tempqueues/responder"
	"github.com/tempqueues/tempqueues/sqstest"
)

// traceHeader is a Propagator: it puts an X-Ray trace header on each
// reply, as a system attribute.
type traceHeader string

func (h traceHeader) Inject(ctx context.Context, _ observe.Event, _ map[string]types.MessageAttributeValue, sys map[string]types.MessageSystemAttributeValue, _ int) context.Context {
	sys["AWSTraceHeader"] = types.MessageSystemAttributeValue{DataType: aws.String("String"), StringValue: aws.String(string(h))}
	return ctx
}

// The Propagator writes into each reply before its checks: here a trace
// header, which the requester receives with it. The Observer sees the
// reply and its send's result, and the handler's run. The oteltempq
// module's reply spans hang on the pair.
func ExampleOptions_observer() {
	ctx := context.Background()
	srv := sqstest.NewServer()
	defer srv.Close(ctx)
	client := srv.Client()
	q, _ := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("jobs")})
	replies, _ := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("replies")})

	r, err := responder.New(client, func(o *responder.Options) {
		o.AllowReplyTo = []string{"replies"} // a plain reply queue, not a requester's
		o.Propagator = traceHeader("Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1")
		o.Observer = observe.Func(func(ctx context.Context, e observe.Event) func(*types.Message, error) {
			switch e.Kind {
			case observe.Handled:
				fmt.Println("handled", *e.Message.Body, "error:", e.Err)
			case observe.Reply:
				req := e.Detail.(*responder.Request)
				return func(_ *types.Message, err error) { fmt.Println("reply to", req.Body(), "sent:", err == nil) }
			}
			return nil
		})
	})
	if err != nil {
		log.Fatal(err)
	}
	defer r.Shutdown(ctx)

	_, err = client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: q.QueueUrl, MessageBody: aws.String("job 1"),
		MessageAttributes: map[string]types.MessageAttributeValue{"ResponseQueueUrl": {DataType: aws.String("String"), StringValue: replies.QueueUrl}}})
	if err != nil {
		log.Fatal(err)
	}
	got, _ := client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: q.QueueUrl, MessageAttributeNames: []string{"All"}})
	err = r.Process(ctx, *q.QueueUrl, got.Messages[0], responder.HandlerFunc(func(ctx context.Context, req *responder.Request) (*responder.Reply, error) {
		return &responder.Reply{Body: "done: " + req.Body()}, nil
	}))
	if err != nil {
		log.Fatal(err)
	}
	out, _ := client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: replies.QueueUrl,
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAWSTraceHeader}})
	fmt.Println(*out.Messages[0].Body, out.Messages[0].Attributes["AWSTraceHeader"][:7])
	// Output:
	// handled job 1 error: <nil>
	// reply to job 1 sent: true
	// done: job 1 Root=1-
}
