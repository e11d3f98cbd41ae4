package requester_test

import (
	"context"
	"errors"
	"io"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/internal/testkit/observetest"
	"github.com/tempqueues/tempqueues/internal/testkit/sqstestenv"
	"github.com/tempqueues/tempqueues/internal/testkit/testtime"
	"github.com/tempqueues/tempqueues/internal/wire"
	"github.com/tempqueues/tempqueues/observe"
	"github.com/tempqueues/tempqueues/requester"
	"github.com/tempqueues/tempqueues/responder"
	"github.com/tempqueues/tempqueues/sqsapi"
	"github.com/tempqueues/tempqueues/sqstest"
)

// sessionWindow is the credit each side of a session grants the other
// (docs/streams.md, "Flow control").
const sessionWindow = 32

// serveSessions runs a responder on e's request queue with h until the
// test ends, and checks that its Shutdown abandons nothing.
func serveSessions(t *testing.T, e *env, h responder.HandlerFunc, optFns ...func(*responder.Options)) *responder.Responder {
	t.Helper()
	resp, stop := runResponder(t, e, e.raw, h, optFns...)
	t.Cleanup(func() { // before runResponder's, which then finds it stopped
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := stop(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	})
	return resp
}

// runResponder runs a responder with h on e's request queue through
// client, its session host queue with the test's prefix. The test stops
// it with stop (Shutdown under ctx), or the cleanup does, and Serve's
// error is checked there.
func runResponder(t testing.TB, e *env, client sqsapi.MessageClient, h responder.HandlerFunc, optFns ...func(*responder.Options)) (resp *responder.Responder, stop func(context.Context) error) {
	t.Helper()
	resp, err := responder.New(client, append([]func(*responder.Options){func(o *responder.Options) {
		o.PollWaitTime = time.Second
		o.AllowReplyTo = []string{"tq"}
		o.SessionQueuePrefix = e.prefix + "s_"
	}}, optFns...)...)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := resp.Serve(context.Background(), e.queue, h); err != nil {
			t.Errorf("Serve: %v", err)
		}
	}()
	var once sync.Once
	var shutdownErr error
	stop = func(ctx context.Context) error {
		once.Do(func() {
			shutdownErr = resp.Shutdown(ctx)
			<-done
		})
		return shutdownErr
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = stop(ctx)
	})
	return resp, stop
}

// waitCallerGone waits for a handler's cause, sent on cancelled when its
// context ended, and checks that it is ErrCallerGone; it returns when the
// cause came.
func waitCallerGone(t *testing.T, cancelled <-chan error) time.Time {
	t.Helper()
	select {
	case cause := <-cancelled:
		if !errors.Is(cause, responder.ErrCallerGone) {
			t.Errorf("the handler's context ended with cause %v, want ErrCallerGone", cause)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the handler's context was not cancelled")
	}
	return time.Now()
}

// echoSession answers each message the caller streams with its body in
// upper case, then ends with a final reply that counts them.
func echoSession(ctx context.Context, req *responder.Request) (*responder.Reply, error) {
	n := 0
	for {
		m, err := req.Recv(ctx)
		if errors.Is(err, io.EOF) {
			return &responder.Reply{Body: req.Body() + ": " + strconv.Itoa(n) + " messages"}, nil
		}
		if err != nil {
			return nil, err
		}
		n++
		if err := req.Send(ctx, &responder.Reply{Body: strings.ToUpper(aws.ToString(m.Body))}); err != nil {
			return nil, err
		}
	}
}

func openSession(t *testing.T, ctx context.Context, r *requester.Requester, e *env, body string) *requester.Session {
	t.Helper()
	s, err := r.OpenSession(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(e.queue), MessageBody: aws.String(body)})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// A bidirectional stream: the caller sends while it reads; both sides get
// every message in order, once, and the handler's final reply ends it.
func TestSessionStreamsBothWaysInOrder(t *testing.T) {
	t.Parallel()
	sqstestenv.Each(t, func(t *testing.T, b *sqstestenv.Backend) {
		e := newEnv(t, b)
		serveSessions(t, e, echoSession)
		r := e.requester(t)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		s := openSession(t, ctx, r, e, "chat")
		const n = 100
		sendErr := make(chan error, 1)
		go func() {
			for i := range n {
				if err := s.Send(ctx, &requester.Message{Body: "msg " + strconv.Itoa(i)}); err != nil {
					sendErr <- err
					return
				}
			}
			sendErr <- s.CloseSend()
		}()
		var got []string
		for m, err := range s.All(ctx) {
			if err != nil {
				t.Fatalf("after %d replies: %v", len(got), err)
			}
			got = append(got, aws.ToString(m.Body))
		}
		if err := <-sendErr; err != nil {
			t.Fatalf("sending: %v", err)
		}
		if len(got) != n+1 {
			t.Fatalf("got %d replies, want %d: %q", len(got), n+1, got[:min(len(got), 5)])
		}
		for i := range n {
			if want := "MSG " + strconv.Itoa(i); got[i] != want {
				t.Fatalf("reply %d is %q, want %q", i, got[i], want)
			}
		}
		if want := "chat: 100 messages"; got[n] != want {
			t.Errorf("final reply %q, want %q", got[n], want)
		}
		if err := s.Send(ctx, &requester.Message{Body: "late"}); !errors.Is(err, requester.ErrSendClosed) {
			t.Errorf("Send after CloseSend: %v, want ErrSendClosed", err)
		}
	})
}

// A client stream: the handler reads everything, then answers once.
func TestSessionClientStreamGetsOneAnswer(t *testing.T) {
	t.Parallel()
	sqstestenv.Each(t, func(t *testing.T, b *sqstestenv.Backend) {
		e := newEnv(t, b)
		serveSessions(t, e, func(ctx context.Context, req *responder.Request) (*responder.Reply, error) {
			sum := 0
			for {
				m, err := req.Recv(ctx)
				if errors.Is(err, io.EOF) {
					return &responder.Reply{Body: strconv.Itoa(sum)}, nil
				}
				if err != nil {
					return nil, err
				}
				v, _ := strconv.Atoi(aws.ToString(m.Body))
				sum += v
			}
		})
		r := e.requester(t)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		s := openSession(t, ctx, r, e, "sum")
		for i := 1; i <= 80; i++ {
			if err := s.Send(ctx, &requester.Message{Body: strconv.Itoa(i)}); err != nil {
				t.Fatalf("Send %d: %v", i, err)
			}
		}
		if err := s.CloseSend(); err != nil {
			t.Fatal(err)
		}
		m, err := s.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if got := aws.ToString(m.Body); got != "3240" {
			t.Errorf("sum %s, want 3240", got)
		}
		if _, err := s.Next(ctx); !errors.Is(err, io.EOF) {
			t.Errorf("after the answer: %v, want io.EOF", err)
		}
	})
}

// A handler that does not read makes the caller wait once the window is
// full: nothing is buffered past it.
func TestSessionSenderWaitsForAReaderThatStops(t *testing.T) {
	t.Parallel()
	e := newEnv(t, sqstestenv.SQSTest(t))
	release := make(chan struct{})
	serveSessions(t, e, func(ctx context.Context, req *responder.Request) (*responder.Reply, error) {
		select {
		case <-release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		n := 0
		for {
			_, err := req.Recv(ctx)
			if errors.Is(err, io.EOF) {
				return &responder.Reply{Body: strconv.Itoa(n)}, nil
			}
			if err != nil {
				return nil, err
			}
			n++
		}
	})
	r := e.requester(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s := openSession(t, ctx, r, e, "slow")
	sent := 0
	for ; sent < 100; sent++ {
		sctx, scancel := context.WithTimeout(ctx, 500*time.Millisecond)
		err := s.Send(sctx, &requester.Message{Body: "m"})
		scancel()
		if errors.Is(err, context.DeadlineExceeded) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if sent != sessionWindow {
		t.Fatalf("Send went on for %d messages while the handler read none, want it to wait after %d", sent, sessionWindow)
	}
	close(release)
	for i := sent; i < 100; i++ {
		if err := s.Send(ctx, &requester.Message{Body: "m"}); err != nil {
			t.Fatalf("Send %d once the handler reads: %v", i, err)
		}
	}
	if err := s.CloseSend(); err != nil {
		t.Fatal(err)
	}
	m, err := s.Next(ctx)
	if err != nil || aws.ToString(m.Body) != "100" {
		t.Fatalf("answer %v, %v; want 100", m, err)
	}
}

// Closing a session early cancels the handler's context, by a message,
// and the request is finished: deleted and dropped as "cancelled", not
// retried.
func TestSessionCloseCancelsTheHandler(t *testing.T) {
	t.Parallel()
	sqstestenv.Each(t, func(t *testing.T, b *sqstestenv.Backend) {
		e := newEnv(t, b)
		started := make(chan struct{}, 1)
		cancelled := make(chan error, 1)
		var rec observetest.Recorder
		resp := serveSessions(t, e, func(ctx context.Context, req *responder.Request) (*responder.Reply, error) {
			started <- struct{}{}
			<-ctx.Done()
			cancelled <- context.Cause(ctx)
			return nil, ctx.Err()
		}, func(o *responder.Options) { o.Observer = &rec })
		r := e.requester(t)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		s := openSession(t, ctx, r, e, "long")
		<-started
		// The session is open once the handler runs; let the open arrive.
		if err := s.Send(ctx, &requester.Message{Body: "hello"}); err != nil {
			t.Fatal(err)
		}
		closed := time.Now()
		s.Close()
		t.Logf("the handler heard of the cancel after %v", waitCallerGone(t, cancelled).Sub(closed))
		if !rec.Wait(ctx, observe.Dropped, "cancelled", 1) {
			t.Fatal("no Dropped, cancelled event")
		}
		if st := resp.Stats(); st.Failed != 0 {
			t.Errorf("Stats.Failed %d, want 0: a cancelled request is no failure", st.Failed)
		}
		if _, err := s.Next(ctx); !errors.Is(err, sqsapi.ErrClosed) {
			t.Errorf("Next after Close: %v, want sqsapi.ErrClosed", err)
		}
	})
}

// A handler that returns while the caller still sends ends the session:
// the caller's next Send returns io.EOF, and Next the final reply.
func TestSessionSendAfterTheHandlerReturned(t *testing.T) {
	t.Parallel()
	e := newEnv(t, sqstestenv.SQSTest(t))
	serveSessions(t, e, func(ctx context.Context, req *responder.Request) (*responder.Reply, error) {
		if _, err := req.Recv(ctx); err != nil {
			return nil, err
		}
		return &responder.Reply{Body: "enough"}, nil
	})
	r := e.requester(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s := openSession(t, ctx, r, e, "short")
	if err := s.Send(ctx, &requester.Message{Body: "one"}); err != nil {
		t.Fatal(err)
	}
	m, err := s.Next(ctx)
	if err != nil || aws.ToString(m.Body) != "enough" {
		t.Fatalf("Next: %v, %v; want the final reply", m, err)
	}
	if err := s.Send(ctx, &requester.Message{Body: "two"}); !errors.Is(err, io.EOF) {
		t.Errorf("Send after the handler returned: %v, want io.EOF", err)
	}
}

// A handler that fails aborts the session: it cannot be handled again,
// since the caller's messages were read, so the caller is told.
func TestSessionHandlerFailureAbortsTheSession(t *testing.T) {
	t.Parallel()
	e := newEnv(t, sqstestenv.SQSTest(t))
	var rec observetest.Recorder
	serveSessions(t, e, func(ctx context.Context, req *responder.Request) (*responder.Reply, error) {
		if _, err := req.Recv(ctx); err != nil {
			return nil, err
		}
		return nil, errors.New("disk full")
	}, func(o *responder.Options) { o.Observer = &rec })
	r := e.requester(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s := openSession(t, ctx, r, e, "fails")
	if err := s.Send(ctx, &requester.Message{Body: "one"}); err != nil {
		t.Fatal(err)
	}
	_, err := s.Next(ctx)
	if !errors.Is(err, requester.ErrSessionAborted) || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("Next: %v, want ErrSessionAborted with the handler's error", err)
	}
	if !rec.Wait(ctx, observe.Dropped, "aborted", 1) {
		t.Fatal("no Dropped, aborted event")
	}
}

// Bad input is refused before any call.
func TestSessionSendRefusesBadInput(t *testing.T) {
	t.Parallel()
	e := newEnv(t, sqstestenv.SQSTest(t))
	serveSessions(t, e, echoSession)
	r := e.requester(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s := openSession(t, ctx, r, e, "bad")
	defer s.Close()
	// Once a message went, the session is open, and Close reaches the
	// handler. Its echo says that its batch call is done: Send returns
	// before, and that call would count among the sends below.
	if err := s.Send(ctx, &requester.Message{Body: "good"}); err != nil {
		t.Fatal(err)
	}
	if m, err := s.Next(ctx); err != nil || aws.ToString(m.Body) != "GOOD" {
		t.Fatalf("the echo of the good message: %v, %v", m, err)
	}
	many := map[string]types.MessageAttributeValue{}
	for i := range 9 {
		many["a"+strconv.Itoa(i)] = types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String("v")}
	}
	for name, m := range map[string]*requester.Message{
		"nil":             nil,
		"empty body":      {},
		"too many attrs":  {Body: "x", Attributes: many},
		"too large":       {Body: strings.Repeat("x", 1<<20)},
		"stream attr set": {Body: "x", Attributes: map[string]types.MessageAttributeValue{"TempQueues.Stream": {DataType: aws.String("String"), StringValue: aws.String("1")}}},
	} {
		// The host polls meanwhile, and the responder shares the test's
		// client: count the requester's own sends alone.
		sends := func() int64 { c := r.Stats().Calls; return c["SendMessage"] + c["SendMessageBatch"] }
		before := sends()
		var ie *sqsapi.InvalidInputError
		if err := s.Send(ctx, m); !errors.As(err, &ie) {
			t.Errorf("%s: %v, want an *sqsapi.InvalidInputError", name, err)
		}
		if n := sends() - before; n != 0 {
			t.Errorf("%s: %d sends", name, n)
		}
	}
}

// A half-closed session is a reply stream whose caller can cancel it:
// the handler reads no message after the request, and Close reaches it.
func TestHalfClosedSessionCancelsAReplyStream(t *testing.T) {
	t.Parallel()
	sqstestenv.Each(t, func(t *testing.T, b *sqstestenv.Backend) {
		e := newEnv(t, b)
		cancelled := make(chan error, 1)
		serveSessions(t, e, func(ctx context.Context, req *responder.Request) (*responder.Reply, error) {
			if m, err := req.Recv(ctx); !errors.Is(err, io.EOF) {
				t.Errorf("Recv of a half-closed session: %v, %v; want io.EOF", m, err)
			}
			for i := 0; ; i++ {
				if err := req.Send(ctx, &responder.Reply{Body: "tick " + strconv.Itoa(i)}); err != nil {
					cancelled <- context.Cause(ctx)
					return nil, err
				}
			}
		})
		r := e.requester(t)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		s, err := r.OpenSession(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(e.queue), MessageBody: aws.String("watch")},
			func(o *requester.SessionOptions) { o.HalfClosed = true })
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Send(ctx, &requester.Message{Body: "x"}); !errors.Is(err, requester.ErrSendClosed) {
			t.Errorf("Send on a half-closed session: %v, want ErrSendClosed", err)
		}
		for i := range 3 * sessionWindow {
			m, err := s.Next(ctx)
			if err != nil {
				t.Fatalf("reply %d: %v", i, err)
			}
			if want := "tick " + strconv.Itoa(i); aws.ToString(m.Body) != want {
				t.Fatalf("reply %d is %q, want %q", i, aws.ToString(m.Body), want)
			}
		}
		s.Close()
		waitCallerGone(t, cancelled)
	})
}

// A caller that falls silent (dead, its host lost) is given up after the
// session's idle timeout: the responder pings it first, then cancels the
// handler. The caller here is the raw SDK, which sends the request and
// nothing after it.
func TestSessionIdleCallerIsGivenUp(t *testing.T) {
	t.Parallel()
	e := newEnv(t, sqstestenv.SQSTest(t))
	cancelled := make(chan error, 1)
	var rec observetest.Recorder
	serveSessions(t, e, func(ctx context.Context, req *responder.Request) (*responder.Reply, error) {
		_, err := req.Recv(ctx)
		cancelled <- context.Cause(ctx)
		return nil, err
	}, func(o *responder.Options) { o.Observer = &rec })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	replies, err := e.raw.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(sqstestenv.QueueName(t, "replies"))})
	if err != nil {
		t.Fatal(err)
	}
	attr := func(v string) types.MessageAttributeValue {
		return types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(v)}
	}
	if _, err := e.raw.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(e.queue), MessageBody: aws.String("silent"),
		MessageAttributes: map[string]types.MessageAttributeValue{
			"ResponseQueueUrl":     attr(*replies.QueueUrl),
			"TempQueues.RequestId": attr("silent-1"),
			"TempQueues.Stream":    attr("session;credit=32;idle=900"),
			"TempQueues.Deadline":  attr(strconv.FormatInt(time.Now().Add(time.Minute).UnixMilli(), 10)),
		}}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	select {
	case cause := <-cancelled:
		if !errors.Is(cause, responder.ErrCallerGone) || !strings.Contains(cause.Error(), "idle timeout") {
			t.Errorf("the handler stopped with cause %v, want ErrCallerGone for the idle timeout", cause)
		}
		if d := time.Since(start); d < 800*time.Millisecond {
			t.Errorf("given up after %v, before the 900ms idle timeout", d)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the handler of a silent caller was never stopped")
	}
	if !rec.Wait(ctx, observe.Dropped, "cancelled", 1) {
		t.Fatal("no Dropped, cancelled event")
	}
	// The responder pinged before it gave up: open, then pings.
	verbs := map[string]int{}
	for len(verbs) < 2 {
		out, err := e.raw.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: replies.QueueUrl, MaxNumberOfMessages: 10, WaitTimeSeconds: 1, MessageAttributeNames: []string{"All"}})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Messages) == 0 {
			t.Fatalf("the reply queue holds only %v, want the open and a ping", verbs)
		}
		for _, m := range out.Messages {
			verb, _, _ := strings.Cut(aws.ToString(m.MessageAttributes["TempQueues.Session"].StringValue), " ")
			verbs[verb]++
		}
	}
	if verbs["open"] != 1 || verbs["ping"] < 1 {
		t.Errorf("control messages %v, want one open and pings", verbs)
	}
}

// A responder that falls silent is given up by the caller after the
// idle timeout. The responder here is the raw SDK: it opens the session
// and says nothing more.
func TestSessionIdleResponderIsGivenUp(t *testing.T) {
	t.Parallel()
	e := newEnv(t, sqstestenv.SQSTest(t))
	r := e.requester(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := r.OpenSession(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(e.queue), MessageBody: aws.String("hello")},
		func(o *requester.SessionOptions) { o.IdleTimeout = 900 * time.Millisecond })
	if err != nil {
		t.Fatal(err)
	}
	out, err := e.raw.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(e.queue), WaitTimeSeconds: 5, MessageAttributeNames: []string{"All"}})
	if err != nil || len(out.Messages) != 1 {
		t.Fatalf("the request: %v, %v", out, err)
	}
	req := out.Messages[0]
	if v := aws.ToString(req.MessageAttributes["TempQueues.Stream"].StringValue); v != "session;credit=32;idle=900" {
		t.Errorf("the request's stream attribute %q", v)
	}
	host, name, _ := strings.Cut(aws.ToString(req.MessageAttributes["ResponseQueueUrl"].StringValue), "#")
	attr := func(v string) types.MessageAttributeValue {
		return types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(v)}
	}
	// The session's queue is the request queue: the caller's pings land
	// there, unread.
	if _, err := e.raw.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(host), MessageBody: aws.String("open"),
		MessageAttributes: map[string]types.MessageAttributeValue{
			"__AmazonSQSVirtualQueuesClient.QueueName": attr(name),
			"TempQueues.Session":                       attr("open 32 " + e.queue + "#session"),
		}}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := s.Send(ctx, &requester.Message{Body: "anyone?"}); err != nil {
		t.Fatal(err)
	}
	_, err = s.Next(ctx)
	if !errors.Is(err, requester.ErrSessionAborted) || !strings.Contains(err.Error(), "idle timeout") {
		t.Fatalf("Next: %v, want ErrSessionAborted for the idle timeout", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("given up after %v", d)
	}
}

// A session works from a requester whose host queue is FIFO: the replies
// (and the responder's control messages) go to the caller's message
// group, in order; the caller's messages go to the responder's own
// standard host queue, put in order by their numbers.
func TestSessionFromAFIFOHost(t *testing.T) {
	t.Parallel()
	sqstestenv.Each(t, func(t *testing.T, b *sqstestenv.Backend) {
		e := newEnv(t, b)
		serveSessions(t, e, echoSession)
		r := e.requester(t, func(o *requester.Options) { o.HostQueueAttributes = map[string]string{"FifoQueue": "true"} })
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		s := openSession(t, ctx, r, e, "fifo")
		for i := range 40 {
			if err := s.Send(ctx, &requester.Message{Body: "m" + strconv.Itoa(i)}); err != nil {
				t.Fatalf("Send %d: %v", i, err)
			}
		}
		if err := s.CloseSend(); err != nil {
			t.Fatal(err)
		}
		n := 0
		for m, err := range s.All(ctx) {
			if err != nil {
				t.Fatalf("after %d replies: %v", n, err)
			}
			want := "M" + strconv.Itoa(n)
			if n == 40 {
				want = "fifo: 40 messages"
			}
			if got := aws.ToString(m.Body); got != want {
				t.Fatalf("reply %d is %q, want %q", n, got, want)
			}
			n++
		}
		if n != 41 {
			t.Fatalf("%d replies, want 41", n)
		}
	})
}

// A session request whose visibility lapses while its handler runs (here
// every extension fails) comes back to the responder that runs it: the
// new delivery is held until the run ends and then deleted, where a
// second session would abort the first.
func TestSessionOutlivesALapsedVisibility(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := sqstestenv.InProcess(t)
		e := newEnv(t, b)
		b.Server.InjectFault(sqstest.Fail("ChangeMessageVisibilityBatch", "AccessDenied"))
		var rec observetest.Recorder
		serveSessions(t, e, echoSession, func(o *responder.Options) {
			o.VisibilityTimeout = time.Second
			o.Observer = &rec
		})
		r := e.requester(t)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		s := openSession(t, ctx, r, e, "slow")
		for i := range 10 {
			if err := s.Send(ctx, &requester.Message{Body: "m" + strconv.Itoa(i)}); err != nil {
				t.Fatalf("Send %d: %v", i, err)
			}
			m, err := s.Next(ctx)
			if err != nil {
				t.Fatalf("echo %d: %v", i, err)
			}
			if want := "M" + strconv.Itoa(i); aws.ToString(m.Body) != want {
				t.Fatalf("echo %d is %q, want %q", i, aws.ToString(m.Body), want)
			}
			testtime.Advance(250 * time.Millisecond) // the session outlives the visibility timeout
		}
		if err := s.CloseSend(); err != nil {
			t.Fatal(err)
		}
		if m, err := s.Next(ctx); err != nil || aws.ToString(m.Body) != "slow: 10 messages" {
			t.Fatalf("final reply %v, %v", m, err)
		}
		if !rec.Wait(ctx, observe.Dropped, "duplicate", 1) {
			t.Fatal("the request never came back: the test did not make its visibility lapse")
		}
	})
}

// A session opens only when its handler needs it: a handler that answers
// at once costs what a reply stream costs (no open message, no session
// queue); one that streams opens it before its first reply.
func TestSessionOpensOnlyWhenTheHandlerStreams(t *testing.T) {
	t.Parallel()
	sqstestenv.Each(t, func(t *testing.T, b *sqstestenv.Backend) {
		e := newEnv(t, b)
		serveSessions(t, e, func(ctx context.Context, req *responder.Request) (*responder.Reply, error) {
			if req.Body() == "stream" {
				if err := req.Send(ctx, &responder.Reply{Body: "part"}); err != nil {
					return nil, err
				}
			}
			return &responder.Reply{Body: "done"}, nil
		})
		r := e.requester(t)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		sessionQueues := func() int {
			out, err := e.raw.ListQueues(ctx, &sqs.ListQueuesInput{QueueNamePrefix: aws.String(e.prefix + "s_")})
			if err != nil {
				t.Fatal(err)
			}
			return len(out.QueueUrls)
		}
		readAll := func(s *requester.Session) []string {
			var got []string
			for m, err := range s.All(ctx) {
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, aws.ToString(m.Body))
			}
			return got
		}
		for range 3 {
			if got := readAll(openSession(t, ctx, r, e, "quick")); len(got) != 1 || got[0] != "done" {
				t.Fatalf("quick session: %q", got)
			}
		}
		if n := sessionQueues(); n != 0 {
			t.Fatalf("%d session queues after sessions whose handlers answered at once, want 0", n)
		}
		sends := func() int64 { c := r.Stats().Calls; return c["SendMessage"] + c["SendMessageBatch"] }
		before := sends()
		s := openSession(t, ctx, r, e, "stream")
		if got := readAll(s); len(got) != 2 || got[0] != "part" {
			t.Fatalf("streaming session: %q", got)
		}
		if n := sessionQueues(); n != 1 {
			t.Fatalf("%d session queues after a streaming handler, want 1", n)
		}
		// The open came with the replies, perhaps after them: the caller
		// sends no credit for the one it read.
		if n := sends() - before; n != 1 {
			t.Errorf("the caller made %d sends for a session that streamed one reply, want 1 (its request)", n)
		}
	})
}

// A handler that neither sends nor reads still hears of its caller's
// Close, even one that came before the session opened: the responder
// opens it after a moment, and the caller sends the cancel once it knows
// where.
func TestSessionCloseReachesASilentHandler(t *testing.T) {
	t.Parallel()
	sqstestenv.Each(t, func(t *testing.T, b *sqstestenv.Backend) {
		e := newEnv(t, b)
		started := make(chan struct{}, 1)
		cancelled := make(chan error, 1)
		resp := serveSessions(t, e, func(ctx context.Context, req *responder.Request) (*responder.Reply, error) {
			started <- struct{}{}
			<-ctx.Done()
			cancelled <- context.Cause(ctx)
			return nil, ctx.Err()
		})
		r := e.requester(t)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		s := openSession(t, ctx, r, e, "silent")
		<-started
		closed := time.Now()
		s.Close()
		t.Logf("the handler heard of the cancel after %v", waitCallerGone(t, cancelled).Sub(closed))
		testtime.Until(5*time.Second, func() bool { return resp.Stats().Dropped > 0 })
		if st := resp.Stats(); st.Failed != 0 || st.Dropped != 1 {
			t.Errorf("Stats.Failed %d, Dropped %d; want 0 and 1", st.Failed, st.Dropped)
		}
	})
}

// Process serves no sessions: a session request is answered as a reply
// stream, and a handler that reads the caller's messages learns why it
// cannot, which aborts the session.
func TestProcessServesASessionAsAReplyStream(t *testing.T) {
	t.Parallel()
	e := newEnv(t, sqstestenv.SQSTest(t))
	resp, err := responder.New(e.raw, func(o *responder.Options) { o.AllowReplyTo = []string{"tq"} })
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Shutdown(context.Background())
	h := responder.HandlerFunc(func(ctx context.Context, req *responder.Request) (*responder.Reply, error) {
		if req.Body() == "read" {
			if _, err := req.Recv(ctx); err != nil {
				return nil, err
			}
		}
		if err := req.Send(ctx, &responder.Reply{Body: "part"}); err != nil {
			return nil, err
		}
		return &responder.Reply{Body: "done"}, nil
	})
	r := e.requester(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	process := func(body string) *requester.Session {
		s := openSession(t, ctx, r, e, body)
		out, err := e.raw.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(e.queue), WaitTimeSeconds: 5,
			MessageAttributeNames: []string{"All"}, MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll}})
		if err != nil || len(out.Messages) != 1 {
			t.Fatalf("receiving the request: %v, %d messages", err, len(out.Messages))
		}
		if err := resp.Process(ctx, e.queue, out.Messages[0], h); err != nil {
			t.Fatalf("Process: %v", err)
		}
		return s
	}
	var got []string
	for m, err := range process("write").All(ctx) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, aws.ToString(m.Body))
	}
	if len(got) != 2 || got[0] != "part" || got[1] != "done" {
		t.Fatalf("replies %q, want part and done", got)
	}
	_, err = process("read").Next(ctx)
	if !errors.Is(err, requester.ErrSessionAborted) || !strings.Contains(err.Error(), "serves no sessions") {
		t.Fatalf("a handler that reads: %v, want ErrSessionAborted saying why", err)
	}
}

// An open that comes after the caller read replies (a responder opens a
// session when its handler first streams, and SQS keeps no order) does
// not make the caller send credit for them: the window has room.
func TestSessionLateOpenSendsNoCredit(t *testing.T) {
	t.Parallel()
	e := newEnv(t, sqstestenv.SQSTest(t))
	r := e.requester(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s := openSession(t, ctx, r, e, "late open")
	out, err := e.raw.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(e.queue), WaitTimeSeconds: 5, MessageAttributeNames: []string{"All"}})
	if err != nil || len(out.Messages) != 1 {
		t.Fatalf("receiving the request: %v, %d messages", err, len(out.Messages))
	}
	host, name, err := wire.ParseVirtualQueueURL(aws.ToString(out.Messages[0].MessageAttributes[sqsapi.ResponseQueueURLAttribute].StringValue))
	if err != nil {
		t.Fatal(err)
	}
	reply := func(body string, attr, value string) {
		t.Helper()
		if _, err := e.raw.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(host), MessageBody: aws.String(body),
			MessageAttributes: map[string]types.MessageAttributeValue{
				sqsapi.VirtualQueueNameAttribute: wire.StringAttribute(name),
				attr:                             wire.StringAttribute(value),
			}}); err != nil {
			t.Fatal(err)
		}
	}
	sends := func() int64 { c := r.Stats().Calls; return c["SendMessage"] + c["SendMessageBatch"] }
	before := sends()
	for i := range 3 {
		reply("part", sqsapi.StreamAttribute, strconv.Itoa(i))
		if _, err := s.Next(ctx); err != nil {
			t.Fatal(err)
		}
	}
	reply("open", sqsapi.SessionAttribute, wire.Control{Verb: wire.ControlOpen, Credit: sessionWindow, URL: wire.VirtualQueueURL(e.queue, "sess")}.Format())
	reply("done", sqsapi.StreamAttribute, "3;final")
	if m, err := s.Next(ctx); err != nil || aws.ToString(m.Body) != "done" {
		t.Fatalf("final reply: %v, %v", m, err)
	}
	if n := sends() - before; n != 0 {
		t.Errorf("the caller sent %d messages after a late open, want none", n)
	}
}

// cutShort is a client whose send of a request with body cut reaches the
// server, then fails with its context's error once that ends: a call
// cancelled after SQS took the message. (A lone send goes out on its
// caller's goroutine, under its caller's context.)
type cutShort struct {
	sqsapi.Client
	sent chan struct{}
}

func (c *cutShort) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	out, err := c.Client.SendMessageBatch(context.WithoutCancel(ctx), in, optFns...)
	for _, e := range in.Entries {
		if aws.ToString(e.MessageBody) == "cut" {
			close(c.sent)
			<-ctx.Done()
			return nil, ctx.Err()
		}
	}
	return out, err
}

// A session whose context ends while its request is being sent fails, but
// SQS may have taken the request: its handler is stopped all the same,
// once the session opens.
func TestSessionCancelledWhileSentStopsTheHandler(t *testing.T) {
	t.Parallel()
	e := newEnv(t, sqstestenv.SQSTest(t))
	cancelled := make(chan error, 1)
	serveSessions(t, e, func(ctx context.Context, req *responder.Request) (*responder.Reply, error) {
		<-ctx.Done()
		cancelled <- context.Cause(ctx)
		return nil, ctx.Err()
	})
	client := &cutShort{Client: e.raw, sent: make(chan struct{})}
	r, err := requester.New(client, func(o *requester.Options) {
		o.Prefix = e.prefix
		o.DisableSweeping = true
	})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(context.Background())
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-client.sent
		cancel()
	}()
	_, err = r.OpenSession(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(e.queue), MessageBody: aws.String("cut")})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("OpenSession: %v, want context.Canceled", err)
	}
	waitCallerGone(t, cancelled)
}

// A session whose open message fails to go is lost: the handler's Recv
// fails, since its caller cannot send, and its replies still go.
func TestSessionWhoseOpenIsLost(t *testing.T) {
	t.Parallel()
	b := sqstestenv.SQSTest(t)
	e := newEnv(t, b)
	proceed := make(chan struct{})
	serveSessions(t, e, func(ctx context.Context, req *responder.Request) (*responder.Reply, error) {
		<-proceed
		if _, err := req.Recv(ctx); err != nil {
			return &responder.Reply{Body: "lost: " + err.Error()}, nil
		}
		return &responder.Reply{Body: "read"}, nil
	})
	r := e.requester(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s := openSession(t, ctx, r, e, "lose the open")
	// The open is the next batch send: the handler waits for the fault.
	b.Server.InjectFault(sqstest.Fail("SendMessageBatch", "InvalidParameterValue").Times(1))
	close(proceed)
	m, err := s.Next(ctx)
	if err != nil || !strings.HasPrefix(aws.ToString(m.Body), "lost: ") {
		t.Fatalf("reply %v, %v; want the handler's Recv to fail", m, err)
	}
	t.Log(aws.ToString(m.Body))
}
