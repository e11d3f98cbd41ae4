package lambdatempq

import (
	"context"
	"strconv"
	"strings"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/redrive"
	"github.com/tempqueues/tempqueues/sqsapi"
)

// ReplayCountAttribute is the message attribute in which AWS's serverless
// DLQ-replay application (amazon-sqs-dlq-replay-backoff) counts replays. A
// Redrive reads it as the attempt count of a message that has no
// TempQueues.RedriveAttempt, and replaces it with that attribute.
const ReplayCountAttribute = "sqs-dlq-replay-nb"

// Redrive replays the messages of a dead-letter queue delivered to a
// Lambda function by the queue's event source mapping, with a
// redrive.Redriver's rules.
type Redrive struct {
	rd *redrive.Redriver
}

// NewRedrive returns a Redrive of the dead-letter queue dlqURL: the
// redrive.Redriver redrive.New(client, dlqURL, optFns...) returns
// (ParkingQueue is required; Target defaults to the queue's only source).
// Run's loop options (PollWaitTime, VisibilityTimeout, RateLimit) do not
// apply, and DryRun is refused.
func NewRedrive(client redrive.Client, dlqURL string, optFns ...func(*redrive.Options)) (*Redrive, error) {
	var dry bool
	rd, err := redrive.New(client, dlqURL, append(optFns, func(o *redrive.Options) { dry = o.DryRun })...)
	if err != nil {
		return nil, err
	}
	if dry {
		return nil, invalid("lambdatempq.NewRedrive", "DryRun", "a function cannot dry-run: use redrive.Drain")
	}
	return &Redrive{rd: rd}, nil
}

// Redriver returns the redrive.Redriver the batches go through.
func (l *Redrive) Redriver() *redrive.Redriver { return l.rd }

// HandleSQSEvent replays the messages of ev as redrive.Run would (in
// batches of 10, as Run receives them) and reports as batch item failures
// the messages that must stay on the dead-letter queue: scheduled copies
// hidden again until due, and messages whose action failed. The error is
// non-nil when the target cannot be found or a call fails for every
// message (a missing queue, denied access): Lambda then retries the whole
// batch. The function's event source mapping needs ReportBatchItemFailures.
func (l *Redrive) HandleSQSEvent(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	var resp events.SQSEventResponse
	for start := 0; start < len(ev.Records); start += maxReceive {
		recs := ev.Records[start:min(len(ev.Records), start+maxReceive)]
		msgs := make([]types.Message, len(recs))
		for i, rec := range recs {
			msgs[i] = continueReplayCount(Message(rec))
		}
		done, err := l.rd.Process(ctx, msgs)
		if err != nil {
			return events.SQSEventResponse{}, err
		}
		for i, ok := range done {
			if !ok {
				resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: recs[i].MessageId})
			}
		}
	}
	return resp, nil
}

// continueReplayCount turns the replay count of AWS's DLQ-replay
// application into redrive's attempt attribute, when the message has no
// attempt attribute of its own, so that the count goes on and the message
// keeps its attribute budget.
func continueReplayCount(m types.Message) types.Message {
	v, ok := m.MessageAttributes[ReplayCountAttribute]
	if !ok {
		return m
	}
	if _, own := m.MessageAttributes[sqsapi.RedriveAttemptAttribute]; own {
		return m
	}
	n, err := strconv.Atoi(strings.TrimSpace(aws.ToString(v.StringValue)))
	if err != nil || n < 0 {
		return m // left as it is: an attribute of the user's
	}
	attrs := make(map[string]types.MessageAttributeValue, len(m.MessageAttributes))
	for k, v := range m.MessageAttributes {
		if k != ReplayCountAttribute {
			attrs[k] = v
		}
	}
	attrs[sqsapi.RedriveAttemptAttribute] = types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(strconv.Itoa(n))}
	m.MessageAttributes = attrs
	return m
}
