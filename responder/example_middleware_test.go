package responder_test

import (
	"context"
	"fmt"
	"log"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/responder"
	"github.com/tempqueues/tempqueues/sqstest"
)

// Middleware adds what every handler needs, here an authorization check
// and a log line, without forking Serve; the first is the outermost.
// Process runs one request received by other means (a Lambda event) as
// Serve would, middleware included.
func ExampleResponder_Process() {
	ctx := context.Background()
	srv := sqstest.NewServer()
	defer srv.Close(ctx)
	client := srv.Client()
	q, _ := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("orders")})

	logged := func(next responder.Handler) responder.Handler {
		return responder.HandlerFunc(func(ctx context.Context, req *responder.Request) (*responder.Reply, error) {
			reply, err := next.HandleRequest(ctx, req)
			fmt.Printf("log: %q -> error %v\n", req.Body(), err)
			return reply, err
		})
	}
	authorized := func(next responder.Handler) responder.Handler {
		return responder.HandlerFunc(func(ctx context.Context, req *responder.Request) (*responder.Reply, error) {
			if tenant, _ := req.Attribute("tenant"); tenant != "acme" {
				return nil, fmt.Errorf("tenant %q not allowed", tenant)
			}
			return next.HandleRequest(ctx, req)
		})
	}
	r, err := responder.New(client, func(o *responder.Options) {
		o.Middleware = []func(responder.Handler) responder.Handler{logged, authorized}
	})
	if err != nil {
		log.Fatal(err)
	}
	defer r.Shutdown(ctx)
	handler := responder.HandlerFunc(func(ctx context.Context, req *responder.Request) (*responder.Reply, error) {
		return nil, nil // fire and forget
	})

	for _, tenant := range []string{"acme", "globex"} {
		_, err := client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: q.QueueUrl, MessageBody: aws.String("order from " + tenant),
			MessageAttributes: map[string]types.MessageAttributeValue{"tenant": {DataType: aws.String("String"), StringValue: aws.String(tenant)}}})
		if err != nil {
			log.Fatal(err)
		}
		got, err := client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: q.QueueUrl, MessageAttributeNames: []string{"All"}})
		if err != nil {
			log.Fatal(err)
		}
		err = r.Process(ctx, *q.QueueUrl, got.Messages[0], handler)
		fmt.Println("done:", err == nil) // if done, delete it; else leave it for redelivery
	}
	// Output:
	// log: "order from acme" -> error <nil>
	// done: true
	// log: "order from globex" -> error tenant "globex" not allowed
	// done: false
}
