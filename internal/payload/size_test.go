package payload

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/internal/testkit/sqstestenv"
	"github.com/tempqueues/tempqueues/internal/wire"
	"github.com/tempqueues/tempqueues/sqsapi"
)

// TestServersCountTheCarrierAsSQSDoes: a message with the carrier counts
// against SQS's 1 MiB as wire.MessageSize counts it (the body, and the
// attribute's name, DataType and raw bytes): sqstest takes one of exactly
// 1 MiB, refuses one byte more, and delivers the carrier intact, its
// custom DataType and its MD5 (which the SDK checks) included. fauxqs
// counts a Binary value by its length in base64, so that its limit for
// the carrier is three quarters of SQS's: there the test sends a carrier
// of 700 KiB, under both.
func TestServersCountTheCarrierAsSQSDoes(t *testing.T) {
	t.Parallel()
	sqstestenv.Each(t, func(t *testing.T, b *sqstestenv.Backend) {
		limit := sqsapi.MaxMessageSize
		if b.Name == "fauxqs" {
			limit = 700 << 10
		}
		client, _ := b.Client(t)
		ctx := context.Background()
		q, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(sqstestenv.QueueName(t, "size"))})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _, _ = client.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: q.QueueUrl}) })
		message := func(size int) (*string, map[string]types.MessageAttributeValue) {
			body := aws.String(Placeholder)
			z := make([]byte, size-len(Placeholder)-len(BodyAttribute)-len(DataType))
			for i := range z {
				z[i] = byte(i * 7)
			}
			attrs := map[string]types.MessageAttributeValue{BodyAttribute: {DataType: aws.String(DataType), BinaryValue: z}}
			if n := wire.MessageSize(body, attrs); n != size {
				t.Fatalf("wire.MessageSize = %d, want %d", n, size)
			}
			return body, attrs
		}
		body, attrs := message(limit)
		if _, err := client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: q.QueueUrl, MessageBody: body, MessageAttributes: attrs}); err != nil {
			t.Fatalf("a message of exactly %d bytes: %v", limit, err)
		}
		sent := len(attrs[BodyAttribute].BinaryValue)
		body, attrs = message(sqsapi.MaxMessageSize + 1)
		if _, err := client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: q.QueueUrl, MessageBody: body, MessageAttributes: attrs}); err == nil {
			t.Fatalf("a message of %d bytes was taken", sqsapi.MaxMessageSize+1)
		}
		out, err := client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: q.QueueUrl, MessageAttributeNames: []string{"All"}, WaitTimeSeconds: 1})
		if err != nil || len(out.Messages) != 1 {
			t.Fatalf("receive: %v, %d messages", err, len(out.Messages))
		}
		got := out.Messages[0].MessageAttributes[BodyAttribute]
		if aws.ToString(got.DataType) != DataType || len(got.BinaryValue) != sent {
			t.Errorf("received the carrier as %q of %d bytes", aws.ToString(got.DataType), len(got.BinaryValue))
		}
	})
}
