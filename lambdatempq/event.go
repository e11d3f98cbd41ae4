package lambdatempq

import (
	"fmt"
	"strings"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/sqsapi"
)

// Message converts a record of an SQS event to the message ReceiveMessage
// would have returned: body, receipt handle, message attributes and system
// attributes (ApproximateReceiveCount, AWSTraceHeader, ...).
func Message(rec events.SQSMessage) types.Message {
	m := types.Message{
		MessageId:     aws.String(rec.MessageId),
		ReceiptHandle: aws.String(rec.ReceiptHandle),
		Body:          aws.String(rec.Body),
		Attributes:    rec.Attributes,
	}
	if rec.Md5OfBody != "" {
		m.MD5OfBody = aws.String(rec.Md5OfBody)
	}
	if rec.Md5OfMessageAttributes != "" {
		m.MD5OfMessageAttributes = aws.String(rec.Md5OfMessageAttributes)
	}
	if len(rec.MessageAttributes) > 0 {
		m.MessageAttributes = make(map[string]types.MessageAttributeValue, len(rec.MessageAttributes))
		for k, v := range rec.MessageAttributes {
			m.MessageAttributes[k] = types.MessageAttributeValue{
				DataType:         aws.String(v.DataType),
				StringValue:      v.StringValue,
				BinaryValue:      v.BinaryValue,
				StringListValues: v.StringListValues,
				BinaryListValues: v.BinaryListValues,
			}
		}
	}
	return m
}

// Event builds the event an SQS event source mapping delivers for msgs,
// received from the queue queueARN with all their message attributes and
// system attributes: what a function gets on AWS, for running it locally.
func Event(queueARN string, msgs []types.Message) events.SQSEvent {
	region := ""
	if parts := strings.Split(queueARN, ":"); len(parts) == 6 {
		region = parts[3]
	}
	ev := events.SQSEvent{Records: make([]events.SQSMessage, len(msgs))}
	for i, m := range msgs {
		rec := events.SQSMessage{
			MessageId:              aws.ToString(m.MessageId),
			ReceiptHandle:          aws.ToString(m.ReceiptHandle),
			Body:                   aws.ToString(m.Body),
			Md5OfBody:              aws.ToString(m.MD5OfBody),
			Md5OfMessageAttributes: aws.ToString(m.MD5OfMessageAttributes),
			Attributes:             m.Attributes,
			EventSourceARN:         queueARN,
			EventSource:            "aws:sqs",
			AWSRegion:              region,
		}
		if len(m.MessageAttributes) > 0 {
			rec.MessageAttributes = make(map[string]events.SQSMessageAttribute, len(m.MessageAttributes))
			for k, v := range m.MessageAttributes {
				rec.MessageAttributes[k] = events.SQSMessageAttribute{
					DataType:         aws.ToString(v.DataType),
					StringValue:      v.StringValue,
					BinaryValue:      v.BinaryValue,
					StringListValues: v.StringListValues,
					BinaryListValues: v.BinaryListValues,
				}
			}
		}
		ev.Records[i] = rec
	}
	return ev
}

// QueueURL returns the URL of the SQS queue named by an ARN
// (arn:<partition>:sqs:<region>:<account>:<name>), in the form SQS uses in
// its region's standard endpoint. A malformed ARN is an
// *sqsapi.InvalidInputError.
func QueueURL(queueARN string) (string, error) {
	parts := strings.Split(queueARN, ":")
	if len(parts) != 6 || parts[0] != "arn" || parts[2] != "sqs" || parts[3] == "" || parts[4] == "" || parts[5] == "" {
		return "", &sqsapi.InvalidInputError{Op: "lambdatempq.QueueURL", Param: "queueARN", Reason: fmt.Sprintf("%q is not an SQS queue ARN", queueARN)}
	}
	domain := "amazonaws.com"
	switch parts[1] {
	case "aws-cn":
		domain = "amazonaws.com.cn"
	}
	return fmt.Sprintf("https://sqs.%s.%s/%s/%s", parts[3], domain, parts[4], parts[5]), nil
}

// isFIFO reports whether an ARN or URL names a FIFO queue.
func isFIFO(queue string) bool { return strings.HasSuffix(queue, ".fifo") }
