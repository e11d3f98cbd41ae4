package virtualqueue_test

import (
	"context"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/internal/callcount"
	"github.com/tempqueues/tempqueues/internal/testkit/sqstestenv"
	"github.com/tempqueues/tempqueues/sqsapi"
	"github.com/tempqueues/tempqueues/virtualqueue"
)

// env is one test's server, raw client and host queue.
type env struct {
	t       *testing.T
	raw     *sqs.Client
	counter *callcount.Counter
	host    string
}

// newEnv creates a host queue with the given visibility timeout (seconds) on
// the test server; the queue is deleted when the test ends.
func newEnv(t *testing.T, b *sqstestenv.Backend, visibility int) *env {
	t.Helper()
	raw, counter := b.Client(t)
	out, err := raw.CreateQueue(context.Background(), &sqs.CreateQueueInput{
		QueueName:  aws.String(sqstestenv.QueueName(t, "host")),
		Attributes: map[string]string{"VisibilityTimeout": strconv.Itoa(visibility)},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = raw.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: out.QueueUrl})
	})
	counter.Reset()
	return &env{t: t, raw: raw, counter: counter, host: *out.QueueUrl}
}

// client returns a virtual-queue client over the env's raw client, closed at
// the end of the test.
func (e *env) client(optFns ...func(*virtualqueue.Options)) *virtualqueue.Client {
	c := mustNew(e.t, e.raw, optFns...)
	e.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := c.Close(ctx); err != nil {
			e.t.Errorf("Close: %v", err)
		}
	})
	return c
}

// mustNew returns virtualqueue.New's client, failing the test on an error.
func mustNew(tb testing.TB, client sqsapi.Client, optFns ...func(*virtualqueue.Options)) *virtualqueue.Client {
	tb.Helper()
	c, err := virtualqueue.New(client, optFns...)
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

func (e *env) createVQ(c *virtualqueue.Client, name string, attrs ...string) string {
	e.t.Helper()
	a := map[string]string{sqsapi.HostQueueURLAttribute: e.host}
	for i := 0; i+1 < len(attrs); i += 2 {
		a[attrs[i]] = attrs[i+1]
	}
	out, err := c.CreateQueue(context.Background(), &sqs.CreateQueueInput{QueueName: aws.String(name), Attributes: a})
	if err != nil {
		e.t.Fatalf("CreateQueue %s: %v", name, err)
	}
	return *out.QueueUrl
}

func send(t *testing.T, c sqsapi.Client, url, body string) {
	t.Helper()
	if _, err := c.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String(body)}); err != nil {
		t.Fatalf("SendMessage to %s: %v", url, err)
	}
}

// receiveN receives until n messages arrived from url or the deadline passes.
func receiveN(t *testing.T, c sqsapi.Client, url string, n int, within time.Duration) []types.Message {
	t.Helper()
	var got []types.Message
	deadline := time.Now().Add(within)
	for len(got) < n && time.Now().Before(deadline) {
		out, err := c.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(url), MaxNumberOfMessages: 10, WaitTimeSeconds: 1,
			MessageAttributeNames: []string{"All"},
		})
		if err != nil {
			t.Fatalf("ReceiveMessage %s: %v", url, err)
		}
		got = append(got, out.Messages...)
	}
	if len(got) < n {
		t.Fatalf("received %d of %d messages from %s within %v", len(got), n, url, within)
	}
	return got
}

// hostCounts returns the host queue's visible and in-flight counts.
func (e *env) hostCounts() (visible, inflight int) {
	e.t.Helper()
	out, err := e.raw.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{
		QueueUrl:       aws.String(e.host),
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameAll},
	})
	if err != nil {
		e.t.Fatal(err)
	}
	visible, _ = strconv.Atoi(out.Attributes["ApproximateNumberOfMessages"])
	inflight, _ = strconv.Atoi(out.Attributes["ApproximateNumberOfMessagesNotVisible"])
	return visible, inflight
}

// inBubble runs fn in a testing/synctest bubble with an in-process
// sqstest server made in it: the backend of the tests whose subject is
// time (expiry, lingering, shutdown), which then cost no real time.
func inBubble(t *testing.T, fn func(t *testing.T, b *sqstestenv.Backend)) {
	t.Helper()
	synctest.Test(t, func(t *testing.T) { fn(t, sqstestenv.InProcess(t)) })
}
