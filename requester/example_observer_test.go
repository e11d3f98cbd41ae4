package requester_test

import (
	"context"
	"fmt"
	"log"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/observe"
	"github.com/tempqueues/tempqueues/requester"
	"github.com/tempqueues/tempqueues/responder"
	"github.com/tempqueues/tempqueues/sqstest"
)

// callerTag is a Propagator: it names the caller on each request, when
// the request has room for one more attribute.
type callerTag string

func (c callerTag) Inject(ctx context.Context, _ observe.Event, attrs map[string]types.MessageAttributeValue, _ map[string]types.MessageSystemAttributeValue, room int) context.Context {
	if room > 0 {
		attrs["caller"] = types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(string(c))}
	}
	return ctx
}

// The Propagator writes into each request before it is sent (the place
// for trace contexts and auth tokens); the Observer sees the request and
// its end (the place for metrics).
func ExampleOptions_observer() {
	ctx := context.Background()
	srv := sqstest.NewServer()
	defer srv.Close(ctx)
	client := srv.Client()
	q, _ := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("whoami")})
	resp, _ := responder.New(client)
	served := make(chan error, 1)
	go func() {
		served <- resp.Serve(ctx, *q.QueueUrl, responder.HandlerFunc(func(ctx context.Context, req *responder.Request) (*responder.Reply, error) {
			caller, _ := req.Attribute("caller")
			return &responder.Reply{Body: "hello, " + caller}, nil
		}))
	}()

	req, err := requester.New(client, func(o *requester.Options) {
		o.Propagator = callerTag("billing")
		o.Observer = observe.Func(func(ctx context.Context, e observe.Event) func(*types.Message, error) {
			if e.Kind != observe.Send {
				return nil
			}
			return func(reply *types.Message, err error) {
				fmt.Println("call ended, error:", err)
			}
		})
	})
	if err != nil {
		log.Fatal(err)
	}
	reply, err := req.SendMessageAndGetResponse(ctx, &sqs.SendMessageInput{QueueUrl: q.QueueUrl, MessageBody: aws.String("?")})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(*reply.Body)
	_ = resp.Shutdown(ctx)
	<-served
	_ = req.Close(ctx)
	// Output:
	// call ended, error: <nil>
	// hello, billing
}
