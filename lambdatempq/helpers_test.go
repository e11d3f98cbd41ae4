package lambdatempq_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/internal/testkit/sqstestenv"
	"github.com/tempqueues/tempqueues/sqsapi"
)

// queues creates queues and remembers their ARNs, as an event source
// mapping names them.
type queues struct {
	t      *testing.T
	client *sqs.Client
	mu     sync.Mutex
	urls   map[string]string // ARN -> URL
}

func newQueues(t *testing.T, client *sqs.Client) *queues {
	return &queues{t: t, client: client, urls: map[string]string{}}
}

// create makes a queue and returns its URL and ARN.
func (q *queues) create(base string) (string, string) {
	q.t.Helper()
	return q.createNamed(sqstestenv.QueueName(q.t, base))
}

// createHost makes a queue named as a requester's host queue (with
// sqsapi.DefaultQueuePrefix), which a responder replies to by default.
func (q *queues) createHost() (string, string) {
	q.t.Helper()
	name := sqstestenv.QueueName(q.t, "")
	return q.createNamed(sqsapi.DefaultQueuePrefix + "host-" + name[len(name)-8:])
}

func (q *queues) createNamed(name string) (string, string) {
	q.t.Helper()
	ctx := context.Background()
	out, err := q.client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name)})
	if err != nil {
		q.t.Fatal(err)
	}
	u := aws.ToString(out.QueueUrl)
	q.t.Cleanup(func() { _, _ = q.client.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: &u}) })
	a, err := q.client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: &u, AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameQueueArn}})
	if err != nil {
		q.t.Fatal(err)
	}
	arn := a.Attributes["QueueArn"]
	q.mu.Lock()
	q.urls[arn] = u
	q.mu.Unlock()
	return u, arn
}

// url is Options.QueueURL for the test's queues.
func (q *queues) url(arn string) (string, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.urls[arn], nil
}

// receive receives up to n messages from u the way an event source mapping
// does (all message and system attributes), within timeout, deleting none.
func receive(t *testing.T, client *sqs.Client, u string, n int, timeout time.Duration) []types.Message {
	t.Helper()
	var got []types.Message
	deadline := time.Now().Add(timeout)
	for len(got) < n && time.Now().Before(deadline) {
		out, err := client.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{
			QueueUrl: &u, MaxNumberOfMessages: int32(min(10, n-len(got))), WaitTimeSeconds: 1, VisibilityTimeout: 60,
			MessageAttributeNames:       []string{"All"},
			MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
		})
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, out.Messages...)
	}
	return got
}

// deleteAll deletes msgs from u, as the event source mapping deletes the
// records a function did not report as failed.
func deleteAll(t *testing.T, client *sqs.Client, u string, msgs []types.Message) {
	t.Helper()
	for _, m := range msgs {
		if _, err := client.DeleteMessage(context.Background(), &sqs.DeleteMessageInput{QueueUrl: &u, ReceiptHandle: m.ReceiptHandle}); err != nil {
			t.Fatal(err)
		}
	}
}

func str(v string) types.MessageAttributeValue {
	return types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(v)}
}

func attr(m types.Message, name string) string {
	v, ok := m.MessageAttributes[name]
	if !ok {
		return "<none>"
	}
	return aws.ToString(v.StringValue)
}
