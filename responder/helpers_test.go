package responder

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/internal/callcount"
	"github.com/tempqueues/tempqueues/internal/testkit/observetest"
	"github.com/tempqueues/tempqueues/internal/testkit/sqstestenv"
	"github.com/tempqueues/tempqueues/internal/testkit/testtime"
	"github.com/tempqueues/tempqueues/internal/wire"
	"github.com/tempqueues/tempqueues/observe"
	"github.com/tempqueues/tempqueues/sqsapi"
)

// env is a test's view of the emulator: a client with its own counter.
type env struct {
	t       *testing.T
	client  *sqs.Client
	counter *callcount.Counter
}

// inBubble runs fn in a testing/synctest bubble with an in-process sqstest
// server made in it: the backend of the tests whose subject is time
// (heartbeats, in-progress delays, shutdown phases), which then cost no
// real time.
func inBubble(t *testing.T, fn func(t *testing.T, be *sqstestenv.Backend)) {
	t.Helper()
	synctest.Test(t, func(t *testing.T) { fn(t, sqstestenv.InProcess(t)) })
}

func newEnv(t *testing.T, b *sqstestenv.Backend) *env {
	t.Helper()
	client, counter := b.Client(t)
	return &env{t: t, client: client, counter: counter}
}

// queue creates a queue with attrs and deletes it when the test ends.
func (e *env) queue(base string, attrs map[string]string) string {
	e.t.Helper()
	return e.create(sqstestenv.QueueName(e.t, base), attrs)
}

// replyQueue creates a queue named as a requester's host queue (with
// sqsapi.DefaultQueuePrefix), which replies may go to by default.
func (e *env) replyQueue(base string, attrs map[string]string) string {
	e.t.Helper()
	name := sqstestenv.QueueName(e.t, base)
	if n := wire.MaxQueueNameLength - len(sqsapi.DefaultQueuePrefix); len(name) > n {
		name = name[len(name)-n:] // keeps the random suffix (and a .fifo)
	}
	return e.create(sqsapi.DefaultQueuePrefix+name, attrs)
}

func (e *env) create(name string, attrs map[string]string) string {
	e.t.Helper()
	out, err := e.client.CreateQueue(context.Background(), &sqs.CreateQueueInput{
		QueueName: aws.String(name), Attributes: attrs,
	})
	if err != nil {
		e.t.Fatalf("CreateQueue: %v", err)
	}
	u := aws.ToString(out.QueueUrl)
	e.t.Cleanup(func() { _, _ = e.client.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: &u}) })
	return u
}

func (e *env) queueARN(u string) string {
	e.t.Helper()
	out, err := e.client.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{
		QueueUrl: &u, AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameQueueArn},
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return out.Attributes[string(types.QueueAttributeNameQueueArn)]
}

// depth returns the visible and in-flight message counts of a queue.
func (e *env) depth(u string) (visible, inFlight string) {
	e.t.Helper()
	out, err := e.client.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{
		QueueUrl: &u, AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameAll},
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return out.Attributes["ApproximateNumberOfMessages"], out.Attributes["ApproximateNumberOfMessagesNotVisible"]
}

// request sends a request the way a requester does: a raw SDK send with
// ResponseQueueUrl (omitted when replyURL is "") and TempQueues.RequestId.
func (e *env) request(queueURL, body, replyURL, requestID string) {
	e.t.Helper()
	attrs := map[string]types.MessageAttributeValue{}
	if replyURL != "" {
		attrs[sqsapi.ResponseQueueURLAttribute] = wire.StringAttribute(replyURL)
	}
	if requestID != "" {
		attrs[sqsapi.RequestIDAttribute] = wire.StringAttribute(requestID)
	}
	if _, err := e.client.SendMessage(context.Background(), &sqs.SendMessageInput{
		QueueUrl: &queueURL, MessageBody: &body, MessageAttributes: attrs,
	}); err != nil {
		e.t.Fatalf("SendMessage: %v", err)
	}
}

// requests sends n requests in batches of 10; request i has body "req-i",
// request id "id-i" and, when replyHost is not "", ResponseQueueUrl
// "<replyHost>#vq-i".
func (e *env) requests(queueURL string, n int, replyHost string) {
	e.t.Helper()
	for start := 0; start < n; start += 10 {
		in := &sqs.SendMessageBatchInput{QueueUrl: &queueURL}
		for i := start; i < min(n, start+10); i++ {
			attrs := map[string]types.MessageAttributeValue{sqsapi.RequestIDAttribute: wire.StringAttribute(fmt.Sprintf("id-%d", i))}
			if replyHost != "" {
				attrs[sqsapi.ResponseQueueURLAttribute] = wire.StringAttribute(fmt.Sprintf("%s#vq-%d", replyHost, i))
			}
			in.Entries = append(in.Entries, types.SendMessageBatchRequestEntry{
				Id: aws.String(fmt.Sprint(i)), MessageBody: aws.String(fmt.Sprintf("req-%d", i)), MessageAttributes: attrs,
			})
		}
		out, err := e.client.SendMessageBatch(context.Background(), in)
		if err != nil || len(out.Failed) > 0 {
			e.t.Fatalf("SendMessageBatch: %v %v", err, out)
		}
	}
}

// replies receives and deletes messages from u until n arrived or timeout.
func (e *env) replies(u string, n int, timeout time.Duration) []types.Message {
	e.t.Helper()
	var got []types.Message
	deadline := time.Now().Add(timeout)
	for len(got) < n && time.Now().Before(deadline) {
		out, err := e.client.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{
			QueueUrl: &u, MaxNumberOfMessages: 10, WaitTimeSeconds: 1, MessageAttributeNames: []string{"All"},
		})
		if err != nil {
			e.t.Fatalf("ReceiveMessage: %v", err)
		}
		for _, m := range out.Messages {
			got = append(got, m)
			if _, err := e.client.DeleteMessage(context.Background(), &sqs.DeleteMessageInput{QueueUrl: &u, ReceiptHandle: m.ReceiptHandle}); err != nil {
				e.t.Fatalf("DeleteMessage: %v", err)
			}
		}
	}
	return got
}

// serve runs r.Serve in a goroutine; the returned function cancels it and
// returns its error.
func serve(t *testing.T, r *Responder, queueURL string, h Handler) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- r.Serve(ctx, queueURL, h) }()
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case err = <-errc:
			case <-time.After(30 * time.Second):
				err = errors.New("Serve did not return within 30s of cancel")
			}
		})
		return err
	}
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return stop
}

func newResponder(t *testing.T, client Client, optFns ...func(*Options)) *Responder {
	t.Helper()
	r, err := New(client, optFns...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = r.Shutdown(ctx)
	})
	return r
}

func attr(m types.Message, name string) string {
	v, _ := stringAttribute(m, name)
	return v
}

// echo replies "re:<body>".
var echo = HandlerFunc(func(_ context.Context, req *Request) (*Reply, error) {
	return &Reply{Body: "re:" + req.Body()}, nil
})

// faultClient wraps a Client to inject failures. A hook returning a non-nil
// error fails the call without reaching the server.
type faultClient struct {
	Client
	receive, deleteBatch, visBatch, sendBatch func() error
	dead                                      atomic.Bool // every call fails: a crashed process
	receiveCalls                              atomic.Int64
	receiveTimes                              struct {
		sync.Mutex
		at []time.Time
	}
}

var errCrashed = errors.New("test: process crashed")

func (c *faultClient) fail(hook func() error) error {
	if c.dead.Load() {
		return errCrashed
	}
	if hook != nil {
		return hook()
	}
	return nil
}

func (c *faultClient) ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, o ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	c.receiveCalls.Add(1)
	c.receiveTimes.Lock()
	c.receiveTimes.at = append(c.receiveTimes.at, time.Now())
	c.receiveTimes.Unlock()
	if err := c.fail(c.receive); err != nil {
		return nil, err
	}
	return c.Client.ReceiveMessage(ctx, in, o...)
}

func (c *faultClient) DeleteMessageBatch(ctx context.Context, in *sqs.DeleteMessageBatchInput, o ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error) {
	if err := c.fail(c.deleteBatch); err != nil {
		return nil, err
	}
	return c.Client.DeleteMessageBatch(ctx, in, o...)
}

func (c *faultClient) ChangeMessageVisibilityBatch(ctx context.Context, in *sqs.ChangeMessageVisibilityBatchInput, o ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error) {
	if err := c.fail(c.visBatch); err != nil {
		return nil, err
	}
	return c.Client.ChangeMessageVisibilityBatch(ctx, in, o...)
}

func (c *faultClient) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, o ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	if err := c.fail(c.sendBatch); err != nil {
		return nil, err
	}
	return c.Client.SendMessageBatch(ctx, in, o...)
}

// crashStore is a Store that fails once its process "crashed".
type crashStore struct {
	Store
	dead *atomic.Bool
}

func (s crashStore) Begin(ctx context.Context, key, token string, lease time.Duration) (Entry, error) {
	if s.dead.Load() {
		return Entry{}, errCrashed
	}
	return s.Store.Begin(ctx, key, token, lease)
}

func (s crashStore) Renew(ctx context.Context, key, token string, lease time.Duration) error {
	if s.dead.Load() {
		return errCrashed
	}
	return s.Store.Renew(ctx, key, token, lease)
}

func (s crashStore) Complete(ctx context.Context, key, token string, reply *Reply, ttl time.Duration) error {
	if s.dead.Load() {
		return errCrashed
	}
	return s.Store.Complete(ctx, key, token, reply, ttl)
}

func (s crashStore) Release(ctx context.Context, key, token string) error {
	if s.dead.Load() {
		return errCrashed
	}
	return s.Store.Release(ctx, key, token)
}

// leakedGoroutines returns the stacks of goroutines running code of this
// package or of internal/batch, other than tests, after waiting up to 3s
// for them to end.
func leakedGoroutines() []string {
	var leaked []string
	testtime.Until(3*time.Second, func() bool {
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		leaked = leaked[:0]
		for _, g := range strings.Split(string(buf), "\n\n") {
			if strings.Contains(g, "leakedGoroutines") {
				continue
			}
			if strings.Contains(g, "tempqueues/responder.(") || strings.Contains(g, "tempqueues/internal/batch.") {
				leaked = append(leaked, g)
			}
		}
		return len(leaked) == 0
	})
	return leaked
}

func keys[M ~map[string]V, V any](m M) []string {
	var ks []string
	for k := range maps.Keys(m) {
		ks = append(ks, k)
	}
	return ks
}

// testLogger logs through t.Log at Warn and above.
func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// replied counts the replies rec saw sent.
func replied(rec *observetest.Recorder) int {
	n := 0
	for _, o := range rec.Outcomes() {
		if o.Event.Kind == observe.Reply && o.Err == nil {
			n++
		}
	}
	return n
}

// failures returns the errors of the handler runs rec saw fail.
func failures(rec *observetest.Recorder) []error {
	var errs []error
	for _, e := range rec.Events() {
		if e.Kind == observe.Handled && e.Err != nil {
			errs = append(errs, e.Err)
		}
	}
	return errs
}

// Client is the client the tests' wrappers embed: the message operations
// a Responder calls.
type Client = sqsapi.MessageClient
