package lambdatempq_test

import (
	"context"
	"fmt"
	"log"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/lambdatempq"
	"github.com/tempqueues/tempqueues/responder"
	"github.com/tempqueues/tempqueues/sqsapi"
	"github.com/tempqueues/tempqueues/sqstest"
)

// A function answering requests: on AWS, main would call the aws-lambda-go
// runtime's Start(fn.HandleSQSEvent). Here an event is built from a
// message received from an embedded SQS server and handled locally.
func ExampleResponder_HandleSQSEvent() {
	ctx := context.Background()
	srv := sqstest.NewServer()
	defer srv.Close(ctx)
	client := srv.Client()
	reqQ, _ := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("greetings")})
	replyQ, _ := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("replies")})

	fn, err := lambdatempq.NewResponder(client, responder.HandlerFunc(
		func(ctx context.Context, req *responder.Request) (*responder.Reply, error) {
			return &responder.Reply{Body: "hello, " + req.Body()}, nil
		}), func(o *lambdatempq.Options) {
		o.QueueURL = func(string) (string, error) { return *reqQ.QueueUrl, nil } // AWS: derived from the ARN
		o.Responder = append(o.Responder, func(o *responder.Options) {
			o.AllowReplyTo = []string{"replies"} // a plain reply queue, not a requester's
		})
	})
	if err != nil {
		log.Fatal(err)
	}

	// A request, as a requester sends it, and the event Lambda would deliver.
	_, err = client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: reqQ.QueueUrl, MessageBody: aws.String("alice"),
		MessageAttributes: map[string]types.MessageAttributeValue{
			sqsapi.ResponseQueueURLAttribute: {DataType: aws.String("String"), StringValue: replyQ.QueueUrl},
		}})
	if err != nil {
		log.Fatal(err)
	}
	got, err := client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: reqQ.QueueUrl, MessageAttributeNames: []string{"All"},
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll}})
	if err != nil {
		log.Fatal(err)
	}
	resp, err := fn.HandleSQSEvent(ctx, lambdatempq.Event("arn:aws:sqs:eu-west-1:123456789012:greetings", got.Messages))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("failed items:", len(resp.BatchItemFailures))

	reply, err := client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: replyQ.QueueUrl, WaitTimeSeconds: 1})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(*reply.Messages[0].Body)
	// Output:
	// failed items: 0
	// hello, alice
}
