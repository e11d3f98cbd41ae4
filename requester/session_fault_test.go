package requester_test

import (
	"context"
	"errors"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/internal/testkit/leakcheck"
	"github.com/tempqueues/tempqueues/internal/testkit/observetest"
	"github.com/tempqueues/tempqueues/internal/testkit/sqstestenv"
	"github.com/tempqueues/tempqueues/internal/testkit/testtime"
	"github.com/tempqueues/tempqueues/observe"
	"github.com/tempqueues/tempqueues/requester"
	"github.com/tempqueues/tempqueues/responder"
	"github.com/tempqueues/tempqueues/sqsapi"
)

// Robustness of sessions under what SQS and processes do to them:
// messages of both directions delivered twice and out of order, a side
// that stops reading, a side that goes away, a responder that shuts down
// or hands over to another. The process-level cases (SIGKILL) are in
// integration/session_test.go.

// startResponder is runResponder with a short visibility, so that what
// a lost request would do shows within seconds; not shorter, or a
// heartbeat late under -race on a loaded machine lets the request
// reappear (its session is then aborted, as for a request delivered
// twice).
func startResponder(t *testing.T, e *env, client sqsapi.MessageClient, h responder.HandlerFunc, optFns ...func(*responder.Options)) (resp *responder.Responder, stop func(context.Context) error) {
	t.Helper()
	short := func(o *responder.Options) { o.VisibilityTimeout = 3 * time.Second }
	return runResponder(t, e, client, h, append([]func(*responder.Options){short}, optFns...)...)
}

// requesterVia is e.requester over another client.
func requesterVia(t *testing.T, e *env, client sqsapi.Client, optFns ...func(*requester.Options)) *requester.Requester {
	t.Helper()
	r, err := requester.New(client, append([]func(*requester.Options){func(o *requester.Options) {
		o.Prefix = e.prefix
		o.DisableSweeping = true
	}}, optFns...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close(context.Background()) })
	return r
}

// jumbledClient receives from every queue but the request queue as an
// unkind SQS may: each batch in reverse order, every fourth message
// held back until after the next receive's, and every fourth (another)
// handed out twice, the copy one receive later. The requester's host
// and the responder's session host both read through it, so both
// directions of a session see duplicates and reordering, within
// milliseconds rather than a visibility timeout.
type jumbledClient struct {
	*sqs.Client
	requests string // the request queue, left alone

	mu    sync.Mutex
	n     int
	held  map[string][]types.Message // by queue: for the next receive
	dups  int
	holds int
}

func (c *jumbledClient) ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, optFns ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	q := aws.ToString(in.QueueUrl)
	if q == c.requests {
		return c.Client.ReceiveMessage(ctx, in, optFns...)
	}
	c.mu.Lock()
	held := c.held[q]
	delete(c.held, q)
	c.mu.Unlock()
	if len(held) > 0 {
		// What is waiting now overtakes what was held, without a long
		// wait for more.
		short := *in
		short.WaitTimeSeconds = 0
		in = &short
	}
	out, err := c.Client.ReceiveMessage(ctx, in, optFns...)
	if err != nil {
		c.mu.Lock()
		c.held[q] = append(held, c.held[q]...)
		c.mu.Unlock()
		return out, err
	}
	var now, later []types.Message
	c.mu.Lock()
	for _, m := range out.Messages {
		c.n++
		switch c.n % 4 {
		case 0:
			later = append(later, m)
			c.holds++
		case 1:
			now = append(now, m)
			later = append(later, m)
			c.dups++
		default:
			now = append(now, m)
		}
	}
	c.held[q] = append(c.held[q], later...)
	c.mu.Unlock()
	slices.Reverse(now)
	res := *out
	res.Messages = append(now, held...)
	return &res, nil
}

func (c *jumbledClient) counts() (dups, holds int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.dups, c.holds
}

// lossyDeletes fails every third delete call on any queue but the
// request queue without making it: the server hands those messages out
// again when their visibility (5 s on both hosts) ends, late, after the
// ones sent since. It is redelivery as SQS does it, on the server's
// clock.
type lossyDeletes struct {
	*sqs.Client
	requests string
	calls    atomic.Int64
	lost     atomic.Int64
}

var errDeleteLost = errors.New("test: the delete was lost")

func (c *lossyDeletes) lose(q string) bool {
	if q == c.requests || c.calls.Add(1)%3 != 0 {
		return false
	}
	c.lost.Add(1)
	return true
}

func (c *lossyDeletes) DeleteMessageBatch(ctx context.Context, in *sqs.DeleteMessageBatchInput, optFns ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error) {
	if c.lose(aws.ToString(in.QueueUrl)) {
		return nil, errDeleteLost
	}
	return c.Client.DeleteMessageBatch(ctx, in, optFns...)
}

func (c *lossyDeletes) DeleteMessage(ctx context.Context, in *sqs.DeleteMessageInput, optFns ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error) {
	if c.lose(aws.ToString(in.QueueUrl)) {
		return nil, errDeleteLost
	}
	return c.Client.DeleteMessage(ctx, in, optFns...)
}

// recordingEcho is echoSession that also records, per handler run, the
// bodies it read, in the order Recv returned them.
type recordingEcho struct {
	mu   sync.Mutex
	runs [][]string
}

func (h *recordingEcho) handle(ctx context.Context, req *responder.Request) (*responder.Reply, error) {
	h.mu.Lock()
	run := len(h.runs)
	h.runs = append(h.runs, nil)
	h.mu.Unlock()
	for {
		m, err := req.Recv(ctx)
		if errors.Is(err, io.EOF) {
			h.mu.Lock()
			n := len(h.runs[run])
			h.mu.Unlock()
			return &responder.Reply{Body: req.Body() + ": " + strconv.Itoa(n) + " messages"}, nil
		}
		if err != nil {
			return nil, err
		}
		h.mu.Lock()
		h.runs[run] = append(h.runs[run], aws.ToString(m.Body))
		h.mu.Unlock()
		if err := req.Send(ctx, &responder.Reply{Body: strings.ToUpper(aws.ToString(m.Body))}); err != nil {
			return nil, err
		}
	}
}

func (h *recordingEcho) recorded() [][]string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.runs)
}

// chat streams n messages ("msg i"), every pace, while it reads the
// replies, and checks that the session ended with each reply once, in
// order, and the handler's final count.
func chat(t *testing.T, ctx context.Context, s *requester.Session, n int, pace time.Duration) {
	t.Helper()
	sendErr := make(chan error, 1)
	go func() {
		for i := range n {
			if err := s.Send(ctx, &requester.Message{Body: "msg " + strconv.Itoa(i)}); err != nil {
				sendErr <- err
				return
			}
			testtime.Pause(pace)
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
	want := make([]string, 0, n+1)
	for i := range n {
		want = append(want, "MSG "+strconv.Itoa(i))
	}
	want = append(want, "chat: "+strconv.Itoa(n)+" messages")
	if !slices.Equal(got, want) {
		t.Fatalf("the caller read %d replies, want %d, each once and in order:\n got %q\nwant %q", len(got), len(want), got, want)
	}
}

// checkHandlerRead checks that the handler ran once and read the n
// messages once each, in order.
func checkHandlerRead(t *testing.T, h *recordingEcho, n int) {
	t.Helper()
	runs := h.recorded()
	if len(runs) != 1 {
		t.Fatalf("the handler ran %d times, want once", len(runs))
	}
	want := make([]string, n)
	for i := range want {
		want[i] = "msg " + strconv.Itoa(i)
	}
	if !slices.Equal(runs[0], want) {
		t.Fatalf("the handler read %d messages, want %d, each once and in order:\n got %q\nwant %q", len(runs[0]), n, runs[0], want)
	}
}

// Messages of both directions handed out twice and out of order (the
// control messages too: open, credit, the end mark): the handler reads
// each of the caller's once, in order, and the caller each reply.
func TestSessionJumbledDeliveryKeepsOrderAndOnce(t *testing.T) {
	t.Parallel()
	inBubble(t, func(t *testing.T, b *sqstestenv.Backend) {
		e := newEnv(t, b)
		jc := &jumbledClient{Client: e.raw, requests: e.queue, held: map[string][]types.Message{}}
		h := &recordingEcho{}
		startResponder(t, e, jc, h.handle)
		r := requesterVia(t, e, jc)
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		s := openSession(t, ctx, r, e, "chat")
		const n = 150 // past the window both ways: credit messages go too
		chat(t, ctx, s, n, 0)
		checkHandlerRead(t, h, n)
		dups, holds := jc.counts()
		t.Logf("%d messages handed out twice, %d held back", dups, holds)
		if dups < n/4 || holds < n/4 {
			t.Fatalf("the client jumbled too little to test anything: %d duplicates, %d held back", dups, holds)
		}
	})
}

// Messages whose deletes were lost are handed out again by the server
// when their visibility ends, seconds later, behind newer ones; the
// session outlives the responder's visibility timeout (3 s) too, so its
// request must be kept hidden meanwhile. Each side still reads each
// message once, in order, and the request is handled once.
func TestSessionRedeliveryKeepsOrderAndOnce(t *testing.T) {
	t.Parallel()
	inBubble(t, func(t *testing.T, b *sqstestenv.Backend) {
		e := newEnv(t, b)
		lc := &lossyDeletes{Client: e.raw, requests: e.queue}
		h := &recordingEcho{}
		var rec observetest.Recorder
		resp, _ := startResponder(t, e, lc, h.handle, func(o *responder.Options) { o.Observer = &rec })
		r := requesterVia(t, e, lc)
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		s := openSession(t, ctx, r, e, "chat")
		// 8 s of messages: what lost its delete early comes again (5 s
		// later) while the session goes on.
		const n = 80
		chat(t, ctx, s, n, 100*time.Millisecond)
		checkHandlerRead(t, h, n)
		t.Logf("%d of %d delete calls lost", lc.lost.Load(), lc.calls.Load())
		if lc.lost.Load() < 3 {
			t.Fatalf("only %d deletes lost: nothing was redelivered", lc.lost.Load())
		}
		if st := resp.Stats(); st.Received != 1 || st.Handled != 1 {
			t.Errorf("responder stats %+v: want the request received and handled once", st)
		}
	})
}

// A caller that stops reading makes the handler's Send wait once a window
// of replies is unread: the caller buffers no more than the session window.
// When it reads again, the rest flows.
func TestSessionHandlerWaitsForACallerThatStopsReading(t *testing.T) {
	t.Parallel()
	inBubble(t, func(t *testing.T, b *sqstestenv.Backend) {
		e := newEnv(t, b)
		const n = 100
		var sent atomic.Int64
		startResponder(t, e, e.raw, func(ctx context.Context, req *responder.Request) (*responder.Reply, error) {
			for i := range n {
				if err := req.Send(ctx, &responder.Reply{Body: "r " + strconv.Itoa(i)}); err != nil {
					return nil, err
				}
				sent.Store(int64(i + 1))
			}
			return &responder.Reply{Body: "done"}, nil
		})
		r := e.requester(t)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		s := openSession(t, ctx, r, e, "firehose")
		defer s.Close()
		// Wait until the handler is stuck: no progress in 2 s of the
		// bubble's clock.
		testtime.Advance(2 * time.Second)
		last := sent.Load()
		if last != sessionWindow {
			t.Fatalf("the handler sent %d replies to a caller that read none, want it to wait after %d", last, sessionWindow)
		}
		for i := range n {
			m, err := s.Next(ctx)
			if err != nil {
				t.Fatalf("Next %d once the caller reads: %v (the handler sent %d)", i, err, sent.Load())
			}
			if want := "r " + strconv.Itoa(i); aws.ToString(m.Body) != want {
				t.Fatalf("reply %d is %q, want %q", i, aws.ToString(m.Body), want)
			}
		}
		if m, err := s.Next(ctx); err != nil || aws.ToString(m.Body) != "done" {
			t.Fatalf("final reply %v, %v", m, err)
		}
		if _, err := s.Next(ctx); !errors.Is(err, io.EOF) {
			t.Fatalf("after the final reply: %v, want io.EOF", err)
		}
	})
}

// handlerEnd is how a handler's run ended: when, why (its context's
// cause) and what Recv returned.
type handlerEnd struct {
	at    time.Time
	cause error
	err   error
}

// blockingHandler reads the caller's messages until Recv fails, and
// reports each run's start and end.
type blockingHandler struct {
	runs    atomic.Int32
	started chan string // request ids
	ended   chan handlerEnd
}

func newBlockingHandler() *blockingHandler {
	return &blockingHandler{started: make(chan string, 10), ended: make(chan handlerEnd, 10)}
}

func (h *blockingHandler) handle(ctx context.Context, req *responder.Request) (*responder.Reply, error) {
	h.runs.Add(1)
	h.started <- req.ID
	for {
		if _, err := req.Recv(ctx); err != nil {
			h.ended <- handlerEnd{at: time.Now(), cause: context.Cause(ctx), err: err}
			return nil, err
		}
	}
}

func waitFor[T any](t *testing.T, c <-chan T, within time.Duration, what string) T {
	t.Helper()
	select {
	case v := <-c:
		return v
	case <-time.After(within):
		t.Fatalf("no %s within %v", what, within)
		panic("unreachable")
	}
}

// checkRequestQueueEmpty fails t unless the request queue holds no
// message, visible or in flight: the request was deleted, not released.
func checkRequestQueueEmpty(t *testing.T, e *env) {
	t.Helper()
	out, err := e.raw.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{QueueUrl: aws.String(e.queue),
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameApproximateNumberOfMessages, types.QueueAttributeNameApproximateNumberOfMessagesNotVisible}})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range []types.QueueAttributeName{types.QueueAttributeNameApproximateNumberOfMessages, types.QueueAttributeNameApproximateNumberOfMessagesNotVisible} {
		if v := out.Attributes[string(a)]; v != "0" {
			t.Errorf("request queue %s = %s, want 0: the request was not deleted", a, v)
		}
	}
}

// The caller going away, whichever way, cancels the handler's context
// (cause ErrCallerGone, or the deadline itself) within about a second;
// the request is finished: dropped as "cancelled", deleted, not released
// and not received again.
func TestSessionCallerGoneCancelsTheHandler(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		timeout  time.Duration // of the session's context
		end      func(s *requester.Session, cancel context.CancelFunc, r *requester.Requester)
		wantNext error // from Next afterwards
	}{
		{"Close", 30 * time.Second, func(s *requester.Session, _ context.CancelFunc, _ *requester.Requester) { s.Close() }, sqsapi.ErrClosed},
		{"cancel", 30 * time.Second, func(_ *requester.Session, cancel context.CancelFunc, _ *requester.Requester) { cancel() }, context.Canceled},
		{"requester-Close", 30 * time.Second, func(_ *requester.Session, _ context.CancelFunc, r *requester.Requester) {
			_ = r.Close(context.Background())
		}, sqsapi.ErrClosed},
		{"deadline", 3 * time.Second, nil, requester.ErrTimeout},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inBubble(t, func(t *testing.T, b *sqstestenv.Backend) {
				e := newEnv(t, b)
				h := newBlockingHandler()
				var rec observetest.Recorder
				resp, _ := startResponder(t, e, e.raw, h.handle, func(o *responder.Options) { o.Observer = &rec })
				r := e.requester(t)
				ctx, cancel := context.WithTimeout(context.Background(), tc.timeout)
				defer cancel()
				s := openSession(t, ctx, r, e, "long")
				// Send returns once the responder named the session's
				// queue: the session is open.
				if err := s.Send(ctx, &requester.Message{Body: "hello"}); err != nil {
					t.Fatal(err)
				}
				waitFor(t, h.started, 10*time.Second, "handler run")
				endAt, _ := ctx.Deadline()
				if tc.end != nil {
					endAt = time.Now()
					tc.end(s, cancel, r)
				}
				end := waitFor(t, h.ended, tc.timeout+5*time.Second, "end of the handler's run")
				lag := end.at.Sub(endAt)
				t.Logf("the handler's context ended %v after the caller went (cause %v)", lag, end.cause)
				if lag > 1500*time.Millisecond {
					t.Errorf("the handler's context ended %v after the caller went, want about a second at most", lag)
				}
				if !errors.Is(end.cause, responder.ErrCallerGone) && (tc.end != nil || !errors.Is(end.cause, context.DeadlineExceeded)) {
					t.Errorf("the handler's context ended with cause %v, want ErrCallerGone", end.cause)
				}
				wctx, wcancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer wcancel()
				if !rec.Wait(wctx, observe.Dropped, "cancelled", 1) {
					t.Fatalf("no Dropped, cancelled event; events %v", rec.Events())
				}
				if _, err := s.Next(context.Background()); !errors.Is(err, tc.wantNext) {
					t.Errorf("Next after the caller went: %v, want %v", err, tc.wantNext)
				}
				// Past the responder's visibility timeout: a released or
				// undeleted request would be received again.
				testtime.Advance(4 * time.Second)
				if n := h.runs.Load(); n != 1 {
					t.Errorf("the handler ran %d times, want once", n)
				}
				if st := resp.Stats(); st.Received != 1 || st.Failed != 0 || st.Released != 0 {
					t.Errorf("responder stats %+v: want the request received once, not failed or released", st)
				}
				if n := rec.Count(observe.Released, ""); n != 0 {
					t.Errorf("%d Released events, want none", n)
				}
				checkRequestQueueEmpty(t, e)
			})
		})
	}
}

// A caller that goes away before the responder's open message reached it
// (it has no session queue to send its cancel to yet) still cancels the
// handler: the cancel goes when the open arrives.
func TestSessionCallerGoneBeforeTheOpenCancelsTheHandler(t *testing.T) {
	t.Parallel()
	inBubble(t, func(t *testing.T, b *sqstestenv.Backend) {
		e := newEnv(t, b)
		h := newBlockingHandler()
		var rec observetest.Recorder
		r := e.requester(t)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		s := openSession(t, ctx, r, e, "early")
		s.Close()
		// Only now a responder takes the request.
		startResponder(t, e, e.raw, h.handle, func(o *responder.Options) { o.Observer = &rec })
		waitFor(t, h.started, 10*time.Second, "handler run")
		started := time.Now()
		end := waitFor(t, h.ended, 10*time.Second, "end of the handler's run")
		t.Logf("the handler's context ended %v after it started (cause %v)", end.at.Sub(started), end.cause)
		if lag := end.at.Sub(started); lag > 1500*time.Millisecond {
			t.Errorf("the handler ran %v for a caller that was gone, want about a second at most", lag)
		}
		if !errors.Is(end.cause, responder.ErrCallerGone) {
			t.Errorf("cause %v, want ErrCallerGone", end.cause)
		}
		if !rec.Wait(ctx, observe.Dropped, "cancelled", 1) {
			t.Fatal("no Dropped, cancelled event")
		}
	})
}

// A handler that returns while its caller still sends, and no longer
// reads, ends the caller's sends: Send returns io.EOF (even one waiting
// for credit), and Next the final reply.
func TestSessionHandlerReturningEarlyEndsTheCallersSends(t *testing.T) {
	t.Parallel()
	inBubble(t, func(t *testing.T, b *sqstestenv.Backend) {
		e := newEnv(t, b)
		var rec observetest.Recorder
		resp, _ := startResponder(t, e, e.raw, func(ctx context.Context, req *responder.Request) (*responder.Reply, error) {
			for range 2 {
				if _, err := req.Recv(ctx); err != nil {
					return nil, err
				}
			}
			return &responder.Reply{Body: "enough"}, nil
		}, func(o *responder.Options) { o.Observer = &rec })
		r := e.requester(t)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		s := openSession(t, ctx, r, e, "short")
		sendCtx, sendCancel := context.WithTimeout(ctx, 10*time.Second)
		defer sendCancel()
		sent := 0
		var err error
		for ; sent < 10*sessionWindow; sent++ {
			if err = s.Send(sendCtx, &requester.Message{Body: "m" + strconv.Itoa(sent)}); err != nil {
				break
			}
		}
		if !errors.Is(err, io.EOF) {
			t.Fatalf("Send after %d messages: %v, want io.EOF once the handler returned", sent, err)
		}
		if sent > sessionWindow+2 {
			t.Errorf("Send went on for %d messages, past the window", sent)
		}
		m, err := s.Next(ctx)
		if err != nil || aws.ToString(m.Body) != "enough" {
			t.Fatalf("Next: %v, %v; want the final reply", m, err)
		}
		if _, err := s.Next(ctx); !errors.Is(err, io.EOF) {
			t.Fatalf("after the final reply: %v, want io.EOF", err)
		}
		if st := resp.Stats(); st.Handled != 1 || st.Failed != 0 {
			t.Errorf("responder stats %+v: want one handled request", st)
		}
	})
}

// Shutdown of a responder whose handler waits for a session's caller
// cancels the handler at Shutdown's deadline and tells the caller, who
// gets ErrSessionAborted naming the shutdown rather than waiting for its
// deadline; Shutdown returns within its context (plus the flush), and the
// session host queue is deleted.
func TestSessionResponderShutdownAbortsTheCaller(t *testing.T) {
	t.Parallel()
	inBubble(t, func(t *testing.T, b *sqstestenv.Backend) {
		e := newEnv(t, b)
		h := newBlockingHandler()
		_, stop := startResponder(t, e, e.raw, h.handle)
		r := e.requester(t)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		s := openSession(t, ctx, r, e, "long")
		if err := s.Send(ctx, &requester.Message{Body: "hello"}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, h.started, 10*time.Second, "handler run")
		if got := e.hostQueues(t, e.prefix+"s_"); len(got) != 1 {
			t.Fatalf("session host queues %v, want one", got)
		}
		const grace = 500 * time.Millisecond
		sctx, scancel := context.WithTimeout(context.Background(), grace)
		defer scancel()
		start := time.Now()
		err := stop(sctx)
		took := time.Since(start)
		t.Logf("Shutdown took %v: %v", took, err)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Shutdown: %v, want the deadline (a handler was abandoned)", err)
		}
		if took > grace+2*time.Second {
			t.Errorf("Shutdown took %v with a grace of %v", took, grace)
		}
		end := waitFor(t, h.ended, time.Second, "end of the handler's run")
		if !errors.Is(end.cause, sqsapi.ErrClosed) {
			t.Errorf("the handler's context ended with cause %v, want sqsapi.ErrClosed", end.cause)
		}
		nctx, ncancel := context.WithTimeout(ctx, 5*time.Second)
		defer ncancel()
		_, err = s.Next(nctx)
		if !errors.Is(err, requester.ErrSessionAborted) || !strings.Contains(err.Error(), "shutting down") {
			t.Fatalf("Next after the responder's Shutdown: %v, want ErrSessionAborted naming the shutdown", err)
		}
		if err := s.Send(ctx, &requester.Message{Body: "more"}); !errors.Is(err, requester.ErrSessionAborted) {
			t.Errorf("Send after the abort: %v, want ErrSessionAborted", err)
		}
		if got := e.hostQueues(t, e.prefix+"s_"); len(got) != 0 {
			t.Errorf("session host queues left after Shutdown: %v", got)
		}
	})
}

// A rolling restart: B starts, then A shuts down while sessions run on
// it. A session that finishes within A's grace completes on A; one cut
// at A's deadline ends with ErrSessionAborted, and when B takes its
// released request B's run is cancelled at once (its caller was told
// already) instead of waiting for the caller's deadline. Sessions opened
// after the hand-off go to B.
func TestSessionHandover(t *testing.T) {
	t.Parallel()
	inBubble(t, func(t *testing.T, b *sqstestenv.Backend) {
		e := newEnv(t, b)
		type run struct {
			by    string
			req   string // the request's body
			first string // the first message read, "" for none
			end   handlerEnd
		}
		runs := make(chan run, 10)
		handler := func(name string) responder.HandlerFunc {
			return func(ctx context.Context, req *responder.Request) (*responder.Reply, error) {
				ru := run{by: name, req: req.Body()}
				defer func() { ru.end.at, ru.end.cause = time.Now(), context.Cause(ctx); runs <- ru }()
				n := 0
				for {
					m, err := req.Recv(ctx)
					if errors.Is(err, io.EOF) {
						return &responder.Reply{Body: name + " read " + strconv.Itoa(n)}, nil
					}
					if err != nil {
						ru.end.err = err
						return nil, err
					}
					if n == 0 {
						ru.first = aws.ToString(m.Body)
					}
					n++
					if err := req.Send(ctx, &responder.Reply{Body: name}); err != nil {
						return nil, err
					}
				}
			}
		}
		var recB observetest.Recorder
		_, stopA := startResponder(t, e, e.raw, handler("A"))
		r := e.requester(t)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		// Two sessions on A: "done" ends within A's grace, "cut" does not.
		open := func(body, by string) *requester.Session {
			s := openSession(t, ctx, r, e, body)
			if err := s.Send(ctx, &requester.Message{Body: body}); err != nil {
				t.Fatal(err)
			}
			if m, err := s.Next(ctx); err != nil || aws.ToString(m.Body) != by {
				t.Fatalf("first reply of %s: %v, %v; want %s's", body, m, err, by)
			}
			return s
		}
		done, cut := open("done", "A"), open("cut", "A")
		startResponder(t, e, e.raw, handler("B"), func(o *responder.Options) { o.Observer = &recB })
		testtime.Advance(50 * time.Millisecond) // B's first poll is on its way
		const grace = 1500 * time.Millisecond
		stopped := make(chan error, 1)
		start := time.Now()
		go func() {
			sctx, scancel := context.WithTimeout(context.Background(), grace)
			defer scancel()
			stopped <- stopA(sctx)
		}()
		// "done" finishes while A drains.
		if err := done.CloseSend(); err != nil {
			t.Fatal(err)
		}
		if m, err := done.Next(ctx); err != nil || aws.ToString(m.Body) != "A read 1" {
			t.Fatalf("session finishing during A's Shutdown: %v, %v; want A's answer", m, err)
		}
		// "cut" is aborted at A's deadline: A tells its caller and deletes
		// the request, which no other responder could take up.
		_, err := cut.Next(ctx)
		if !errors.Is(err, requester.ErrSessionAborted) || !strings.Contains(err.Error(), "shutting down") {
			t.Fatalf("session cut by A's Shutdown: %v, want ErrSessionAborted, shutting down", err)
		}
		if err := waitFor(t, stopped, 5*time.Second, "return of A's Shutdown"); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("A's Shutdown: %v, want the deadline (it abandoned a handler)", err)
		}
		t.Logf("A's Shutdown took %v", time.Since(start))
		// A's runs ended: "done" answered, "cut" by the stop.
		for range 2 {
			ru := waitFor(t, runs, 5*time.Second, "end of A's runs")
			if ru.by != "A" {
				t.Fatalf("a run by %s ended before A's", ru.by)
			}
		}
		// B never sees the cut session's request: A deleted it.
		select {
		case ru := <-runs:
			t.Errorf("B ran %q again after the hand-off (read %q)", ru.req, ru.first)
		case <-time.After(2 * time.Second):
		}
		// A new session goes to B.
		s := open("new", "B")
		if err := s.CloseSend(); err != nil {
			t.Fatal(err)
		}
		if m, err := s.Next(ctx); err != nil || aws.ToString(m.Body) != "B read 1" {
			t.Fatalf("session after the hand-off: %v, %v; want B's answer", m, err)
		}
	})
}

// doubleSends sends every message to the request queue twice, as SQS's
// at-least-once delivery may hand one request to two responders.
type doubleSends struct {
	*sqs.Client
	requests string
}

func (c *doubleSends) SendMessage(ctx context.Context, in *sqs.SendMessageInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	out, err := c.Client.SendMessage(ctx, in, optFns...)
	if err == nil && aws.ToString(in.QueueUrl) == c.requests {
		_, err = c.Client.SendMessage(ctx, in, optFns...)
	}
	return out, err
}

func (c *doubleSends) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	out, err := c.Client.SendMessageBatch(ctx, in, optFns...)
	if err == nil && aws.ToString(in.QueueUrl) == c.requests {
		_, err = c.Client.SendMessageBatch(ctx, in, optFns...)
	}
	return out, err
}

// A request delivered twice runs two handlers, and the caller hears two
// open messages: it aborts the session (it cannot tell a live first
// responder from a dead one), and neither handler is left waiting for
// the caller's deadline.
func TestSessionRequestDeliveredTwiceEndsBothRuns(t *testing.T) {
	t.Parallel()
	inBubble(t, func(t *testing.T, b *sqstestenv.Backend) {
		e := newEnv(t, b)
		h := newBlockingHandler()
		var rec observetest.Recorder
		startResponder(t, e, e.raw, h.handle, func(o *responder.Options) { o.Observer = &rec; o.MaxConcurrency = 4 })
		r := requesterVia(t, e, &doubleSends{Client: e.raw, requests: e.queue})
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		s := openSession(t, ctx, r, e, "twice")
		waitFor(t, h.started, 10*time.Second, "first run")
		waitFor(t, h.started, 10*time.Second, "second run")
		_, err := s.Next(ctx)
		aborted := time.Now()
		if !errors.Is(err, requester.ErrSessionAborted) {
			t.Fatalf("Next: %v, want ErrSessionAborted", err)
		}
		for i := range 2 {
			end := waitFor(t, h.ended, 5*time.Second, "end of run "+strconv.Itoa(i+1)+" after the abort")
			t.Logf("a run ended %v after the abort (cause %v)", end.at.Sub(aborted), end.cause)
			if !errors.Is(end.cause, responder.ErrCallerGone) {
				t.Errorf("a run ended with cause %v, want ErrCallerGone", end.cause)
			}
		}
		if !rec.Wait(ctx, observe.Dropped, "cancelled", 2) {
			t.Fatal("the two runs were not dropped as cancelled")
		}
	})
}

// Sessions that complete, are closed early, or are aborted leave no
// goroutine behind once the requester is closed and the responder shut
// down.
func TestSessionsLeaveNoGoroutines(t *testing.T) {
	e := newEnv(t, sqstestenv.SQSTest(t))
	h := &recordingEcho{}
	_, stop := startResponder(t, e, e.raw, func(ctx context.Context, req *responder.Request) (*responder.Reply, error) {
		if req.Body() == "fail" {
			// It reads first: a session opens when its handler reads, and
			// a handler that fails before that is retried, not aborted.
			if _, err := req.Recv(ctx); err != nil {
				return nil, err
			}
			return nil, errors.New("refused")
		}
		return h.handle(ctx, req)
	})
	r := e.requester(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	chat(t, ctx, openSession(t, ctx, r, e, "chat"), 40, 0)
	closed := openSession(t, ctx, r, e, "closed")
	if err := closed.Send(ctx, &requester.Message{Body: "x"}); err != nil {
		t.Fatal(err)
	}
	closed.Close()
	failing := openSession(t, ctx, r, e, "fail")
	if err := failing.Send(ctx, &requester.Message{Body: "x"}); err != nil {
		t.Fatal(err)
	}
	if _, err := failing.Next(ctx); !errors.Is(err, requester.ErrSessionAborted) {
		t.Fatalf("failing handler: %v, want ErrSessionAborted", err)
	}
	if err := stop(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if err := r.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	leakcheck.Check(t)
}

// When the caller goes away, Recv's error and the handler's context
// agree: once Recv failed for it, the context is cancelled, with cause
// ErrCallerGone, so a handler that asks why it stopped is told. Many
// sessions at once, since one would seldom lose the race.
func TestSessionRecvFailsWithTheContextCancelled(t *testing.T) {
	t.Parallel()
	e := newEnv(t, sqstestenv.SQSTest(t))
	const n = 30
	started := make(chan struct{}, n)
	causes := make(chan error, n)
	startResponder(t, e, e.raw, func(ctx context.Context, req *responder.Request) (*responder.Reply, error) {
		started <- struct{}{}
		for {
			if _, err := req.Recv(ctx); err != nil {
				causes <- context.Cause(ctx)
				return nil, err
			}
		}
	}, func(o *responder.Options) { o.MaxConcurrency = n })
	r := e.requester(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var sessions []*requester.Session
	for i := range n {
		s := openSession(t, ctx, r, e, "s"+strconv.Itoa(i))
		if err := s.Send(ctx, &requester.Message{Body: "hello"}); err != nil {
			t.Fatal(err)
		}
		sessions = append(sessions, s)
	}
	for range n {
		waitFor(t, started, 10*time.Second, "handler run")
	}
	for _, s := range sessions {
		s.Close()
	}
	bad := 0
	for range n {
		if cause := waitFor(t, causes, 10*time.Second, "end of a handler run"); !errors.Is(cause, responder.ErrCallerGone) {
			bad++
		}
	}
	if bad > 0 {
		t.Fatalf("%d of %d handlers saw Recv fail for the caller's cancel while their context was not cancelled yet (cause nil)", bad, n)
	}
}
