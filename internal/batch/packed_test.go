package batch

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// TestPackedSizeCountsBinaryAsBase64: a send's size, as batches are
// packed, counts a Binary value as its base64, the rest as SQS does.
func TestPackedSizeCountsBinaryAsBase64(t *testing.T) {
	e := types.SendMessageBatchRequestEntry{
		MessageBody: aws.String("body"),
		MessageAttributes: map[string]types.MessageAttributeValue{
			"s": {DataType: aws.String("String"), StringValue: aws.String("v")},
			"b": {DataType: aws.String("Binary"), BinaryValue: make([]byte, 300)},
		},
	}
	if got, want := packedSize(e), len("body")+len("s")+len("String")+1+len("b")+len("Binary")+400; got != want {
		t.Errorf("packed size %d, want %d", got, want)
	}
}
