package integration_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/smithy-go/logging"
	"github.com/aws/smithy-go/middleware"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/google/uuid"

	"github.com/tempqueues/tempqueues/internal/callcount"
	"github.com/tempqueues/tempqueues/internal/testkit/leakcheck"
	"github.com/tempqueues/tempqueues/internal/testkit/sqstestenv"
	"github.com/tempqueues/tempqueues/requester"
	"github.com/tempqueues/tempqueues/responder"
	"github.com/tempqueues/tempqueues/sqsapi"
)

type env struct {
	b       *sqstestenv.Backend
	raw     *sqs.Client
	counter *callcount.Counter
	prefix  string
}

func newEnv(t *testing.T, b *sqstestenv.Backend) *env {
	raw, counter := b.Client(t)
	// SDK retries are logged: a retried receive can hide messages handed to
	// an attempt whose response was lost.
	log := testLogger(t)
	raw = sqs.New(raw.Options(), func(o *sqs.Options) {
		o.APIOptions = append(o.APIOptions, func(st *middleware.Stack) error {
			return st.Finalize.Add(middleware.FinalizeMiddlewareFunc("attemptErrors",
				func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
					out, md, err := next.HandleFinalize(ctx, in)
					if err != nil && ctx.Err() == nil {
						log.Warn("attempt failed", "op", awsmiddleware.GetOperationName(ctx), "err", err)
					}
					return out, md, err
				}), middleware.After)
		})
		o.ClientLogMode = aws.LogRetries
		o.Logger = logging.LoggerFunc(func(c logging.Classification, format string, v ...any) {
			log.Warn(fmt.Sprintf(format, v...), "sdk", string(c))
		})
	})
	n := sqstestenv.QueueName(t, "")
	return &env{b: b, raw: raw, counter: counter, prefix: replyPrefix + n[len(n)-8:] + "_"}
}

// replyPrefix starts the Prefix of every test's requesters (newEnv): the
// responders reply to their host queues.
const replyPrefix = "it"

func (e *env) queue(t *testing.T, base string, attrs map[string]string) string {
	t.Helper()
	out, err := e.raw.CreateQueue(context.Background(), &sqs.CreateQueueInput{QueueName: aws.String(sqstestenv.QueueName(t, base)), Attributes: attrs})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = e.raw.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: out.QueueUrl}) })
	return *out.QueueUrl
}

func (e *env) requester(t *testing.T) *requester.Requester {
	t.Helper()
	r, err := requester.New(e.raw, func(o *requester.Options) {
		o.Prefix = e.prefix
		o.DisableSweeping = true
		o.Logger = testLogger(t)
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close(context.Background()) })
	return r
}

// serve runs a responder on queue until the test ends.
func serve(t *testing.T, client sqsapi.MessageClient, queue string, h responder.HandlerFunc, optFns ...func(*responder.Options)) *responder.Responder {
	t.Helper()
	r, err := responder.New(client, append([]func(*responder.Options){func(o *responder.Options) {
		o.PollWaitTime = time.Second
		o.MaxConcurrency = 32
		// A receive whose response is lost (seen under heavy load on
		// loopback: the SDK retries it) hides its requests for this long;
		// keep it well under the callers' timeouts.
		o.VisibilityTimeout = 3 * time.Second
		o.Logger = testLogger(t)
		o.AllowReplyTo = []string{replyPrefix}
	}}, optFns...)...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Serve(ctx, queue, h) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return r
}

// testLogger collects debug logs and prints them only if the test fails.
func testLogger(t *testing.T) *slog.Logger {
	var mu sync.Mutex
	var buf bytes.Buffer
	t.Cleanup(func() {
		if t.Failed() {
			mu.Lock()
			t.Logf("logs:\n%s", buf.String())
			mu.Unlock()
		}
	})
	return slog.New(slog.NewTextHandler(&lockedWriter{mu: &mu, w: &buf}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func echo(_ context.Context, req *responder.Request) (*responder.Reply, error) {
	return &responder.Reply{Body: "echo " + req.Body()}, nil
}

func TestManyConcurrentCallers(t *testing.T) {
	t.Parallel()
	sqstestenv.Each(t, func(t *testing.T, b *sqstestenv.Backend) {
		e := newEnv(t, b)
		q := e.queue(t, "rpc", nil)
		serve(t, e.raw, q, echo)
		r := e.requester(t)
		const callers, each = 16, 10
		var wg sync.WaitGroup
		for c := 0; c < callers; c++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < each; i++ {
					ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
					body := fmt.Sprintf("%d/%d", c, i)
					m, err := r.SendMessageAndGetResponse(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(q), MessageBody: aws.String(body)})
					cancel()
					if err != nil {
						t.Errorf("%s: %v", body, err)
						return
					}
					if got := aws.ToString(m.Body); got != "echo "+body {
						t.Errorf("%s got %q", body, got)
					}
				}
			}()
		}
		wg.Wait()
		s := r.Stats()
		if s.Failed != 0 || s.TimedOut != 0 || s.Pending != 0 || s.LateReplies != 0 {
			t.Fatalf("requester stats %+v", s)
		}
		t.Logf("%d RPCs: %.2f API calls per RPC (requester and responder)", callers*each, float64(e.counter.Total())/float64(callers*each))
	})
}

// A raw-SDK requester in the Java client's wire format (ResponseQueueUrl
// only, its own virtual queue name) is answered by our responder.
func TestJavaRequesterToGoResponder(t *testing.T) {
	t.Parallel()
	sqstestenv.Each(t, func(t *testing.T, b *sqstestenv.Backend) {
		e := newEnv(t, b)
		q := e.queue(t, "rpc", nil)
		// A Java requester's host queue: <prefix><uuid>-<n>, which a
		// responder replies to by default.
		out, err := e.raw.CreateQueue(context.Background(), &sqs.CreateQueueInput{QueueName: aws.String("__RequesterClientQueues__" + uuid.NewString() + "-0")})
		if err != nil {
			t.Fatal(err)
		}
		host := aws.ToString(out.QueueUrl)
		t.Cleanup(func() { _, _ = e.raw.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: &host}) })
		serve(t, e.raw, q, echo)
		replyTo := host + "#__RequesterClientQueues__" + "0f8fad5b-d9cb-469f-a165-70867728950e"
		_, err = e.raw.SendMessage(context.Background(), &sqs.SendMessageInput{
			QueueUrl: aws.String(q), MessageBody: aws.String("from java"),
			MessageAttributes: map[string]types.MessageAttributeValue{
				"ResponseQueueUrl": {DataType: aws.String("String"), StringValue: aws.String(replyTo)},
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		replies, err := e.raw.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(host), WaitTimeSeconds: 10, MessageAttributeNames: []string{"All"},
		})
		if err != nil || len(replies.Messages) != 1 {
			t.Fatalf("reply on the host queue: %v, %d messages", err, len(replies.Messages))
		}
		m := replies.Messages[0]
		if aws.ToString(m.Body) != "echo from java" {
			t.Fatalf("reply body %q", aws.ToString(m.Body))
		}
		if got := aws.ToString(m.MessageAttributes["__AmazonSQSVirtualQueuesClient.QueueName"].StringValue); got != "__RequesterClientQueues__0f8fad5b-d9cb-469f-a165-70867728950e" {
			t.Fatalf("routing attribute %q", got)
		}
	})
}

func TestSlowHandlerOutlivesSeveralVisibilityTimeouts(t *testing.T) {
	t.Parallel()
	sqstestenv.Each(t, func(t *testing.T, b *sqstestenv.Backend) {
		e := newEnv(t, b)
		q := e.queue(t, "rpc", nil)
		var runs atomic.Int32
		serve(t, e.raw, q, func(ctx context.Context, req *responder.Request) (*responder.Reply, error) {
			runs.Add(1)
			select {
			case <-time.After(3500 * time.Millisecond):
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			return &responder.Reply{Body: "slow done"}, nil
		}, func(o *responder.Options) { o.VisibilityTimeout = time.Second })
		r := e.requester(t)
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		m, err := r.SendMessageAndGetResponse(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(q), MessageBody: aws.String("work")})
		if err != nil || aws.ToString(m.Body) != "slow done" {
			t.Fatalf("reply %v, %v", m, err)
		}
		if n := runs.Load(); n != 1 {
			t.Fatalf("handler ran %d times: visibility extensions did not keep the request hidden", n)
		}
	})
}

func TestPoisonRequestReachesDeadLetterQueue(t *testing.T) {
	t.Parallel()
	sqstestenv.Each(t, func(t *testing.T, b *sqstestenv.Backend) {
		e := newEnv(t, b)
		dlq := e.queue(t, "dlq", nil)
		arn, err := e.raw.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{QueueUrl: aws.String(dlq), AttributeNames: []types.QueueAttributeName{"QueueArn"}})
		if err != nil {
			t.Fatal(err)
		}
		q := e.queue(t, "rpc", map[string]string{
			"RedrivePolicy": `{"maxReceiveCount":"2","deadLetterTargetArn":"` + arn.Attributes["QueueArn"] + `"}`,
		})
		var runs atomic.Int32
		serve(t, e.raw, q, func(context.Context, *responder.Request) (*responder.Reply, error) {
			runs.Add(1)
			return nil, errors.New("poison")
		}, func(o *responder.Options) { o.BackoffBase = -1 }) // released at once
		r := e.requester(t)
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		_, err = r.SendMessageAndGetResponse(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(q), MessageBody: aws.String("bad")})
		if !errors.Is(err, requester.ErrTimeout) {
			t.Fatalf("poison request: %v, want a timeout", err)
		}
		out, err := e.raw.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(dlq), WaitTimeSeconds: 5, MessageAttributeNames: []string{"All"}})
		if err != nil || len(out.Messages) != 1 {
			t.Fatalf("DLQ: %v, %d messages", err, len(out.Messages))
		}
		if id := out.Messages[0].MessageAttributes[sqsapi.RequestIDAttribute].StringValue; id == nil {
			t.Fatal("request id lost on the way to the DLQ")
		}
		if n := runs.Load(); n != 2 {
			t.Fatalf("handler ran %d times, want maxReceiveCount = 2", n)
		}
	})
}

// Two requester processes (here: clients) share one request queue and one
// responder; each gets exactly its own replies.
func TestRequestersShareOneService(t *testing.T) {
	t.Parallel()
	sqstestenv.Each(t, func(t *testing.T, b *sqstestenv.Backend) {
		e := newEnv(t, b)
		q := e.queue(t, "rpc", nil)
		resp := serve(t, e.raw, q, echo)
		rs := []*requester.Requester{e.requester(t), e.requester(t), e.requester(t)}
		defer func() {
			if t.Failed() {
				t.Logf("responder stats %+v", resp.Stats())
			}
		}()
		var wg sync.WaitGroup
		for i, r := range rs {
			for j := 0; j < 10; j++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
					defer cancel()
					body := strconv.Itoa(i*100 + j)
					m, err := r.SendMessageAndGetResponse(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(q), MessageBody: aws.String(body)})
					if err != nil || aws.ToString(m.Body) != "echo "+body {
						t.Errorf("requester %d: %v %v", i, m, err)
					}
				}()
			}
		}
		wg.Wait()
		for i, r := range rs {
			if s := r.Stats(); s.Failed != 0 || s.TimedOut != 0 || s.Pending != 0 || s.LateReplies != 0 {
				t.Errorf("requester %d stats %+v", i, s)
			}
		}
	})
}

// A responder process killed mid-request: the request reappears after the
// visibility timeout, a second process answers it, and the requester gets
// exactly one reply.
func TestResponderProcessKilledMidRequest(t *testing.T) {
	t.Parallel()
	sqstestenv.Each(t, func(t *testing.T, b *sqstestenv.Backend) {
		if b.Endpoint == "" {
			t.Skip("needs an endpoint child processes can reach")
		}
		e := newEnv(t, b)
		q := e.queue(t, "rpc", map[string]string{"VisibilityTimeout": "2"})
		r := e.requester(t)
		first := startChild(t, b.Endpoint, q)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		call, err := r.SendMessageAndGetResponseAsync(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(q), MessageBody: aws.String("1500ms")})
		if err != nil {
			t.Fatal(err)
		}
		first.expect(t, "start "+call.RequestID(), 10*time.Second)
		first.kill()
		second := startChild(t, b.Endpoint, q)
		m, err := call.Wait(ctx)
		if err != nil {
			t.Fatalf("no reply after the crash: %v", err)
		}
		second.expect(t, "done "+call.RequestID(), 5*time.Second)
		if got := aws.ToString(m.Body); got[:len("handled 1500ms")] != "handled 1500ms" {
			t.Fatalf("reply %q", got)
		}
		time.Sleep(3 * time.Second) // real (fauxqs, a child responder): a duplicate reply would arrive by now
		if s := r.Stats(); s.Failed != 0 || s.Pending != 0 || s.LateReplies != 0 {
			t.Fatalf("stats %+v: want exactly one reply", s)
		}
	})
}

// Shutdown of a responder with requests in flight loses none: unfinished
// ones are released and answered by the next responder.
func TestGracefulShutdownLosesNothing(t *testing.T) {
	// Not parallel: its leak check counts every goroutine of the process.
	sqstestenv.Each(t, func(t *testing.T, b *sqstestenv.Backend) {
		e := newEnv(t, b)
		q := e.queue(t, "rpc", nil)
		slow := func(ctx context.Context, req *responder.Request) (*responder.Reply, error) {
			select {
			case <-time.After(2 * time.Second):
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			return &responder.Reply{Body: "ok " + req.Body()}, nil
		}
		first, err := responder.New(e.raw, func(o *responder.Options) { o.PollWaitTime = time.Second; o.AllowReplyTo = []string{replyPrefix} })
		if err != nil {
			t.Fatal(err)
		}
		started := make(chan struct{}, 6)
		served := make(chan error, 1)
		go func() {
			served <- first.Serve(context.Background(), q, responder.HandlerFunc(func(ctx context.Context, req *responder.Request) (*responder.Reply, error) {
				select {
				case started <- struct{}{}:
				default: // a request run twice is the test's failure, not a hang
				}
				return slow(ctx, req)
			}))
		}()
		r := e.requester(t)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		var calls []*requester.Call
		for i := 0; i < 6; i++ {
			c, err := r.SendMessageAndGetResponseAsync(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(q), MessageBody: aws.String(strconv.Itoa(i))})
			if err != nil {
				t.Fatal(err)
			}
			calls = append(calls, c)
		}
		for range calls { // every request is in a handler
			select {
			case <-started:
			case <-ctx.Done():
				t.Fatal("the first responder's handlers did not all start")
			}
		}
		// Too short for the handlers: they are cancelled and their requests
		// released at once (visibility 0), not left hidden.
		sctx, scancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		_ = first.Shutdown(sctx)
		scancel()
		if err := <-served; err != nil {
			t.Fatalf("Serve: %v", err)
		}
		serve(t, e.raw, q, slow)
		for i, c := range calls {
			m, err := c.Wait(ctx)
			if err != nil || aws.ToString(m.Body) != "ok "+strconv.Itoa(i) {
				t.Fatalf("call %d after shutdown: %v %v", i, m, err)
			}
		}
		if err := r.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
	})
	leakcheck.Check(t)
}
