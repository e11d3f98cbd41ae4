package requester_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/internal/awserr"
	"github.com/tempqueues/tempqueues/internal/callcount"
	"github.com/tempqueues/tempqueues/internal/testkit/leakcheck"
	"github.com/tempqueues/tempqueues/internal/testkit/observetest"
	"github.com/tempqueues/tempqueues/internal/testkit/sqstestenv"
	"github.com/tempqueues/tempqueues/internal/testkit/testtime"
	"github.com/tempqueues/tempqueues/internal/wire"
	"github.com/tempqueues/tempqueues/observe"
	"github.com/tempqueues/tempqueues/requester"
	"github.com/tempqueues/tempqueues/sqsapi"
)

type env struct {
	raw     *sqs.Client
	counter *callcount.Counter
	queue   string // request queue
	prefix  string
}

func newEnv(t testing.TB, b *sqstestenv.Backend) *env {
	t.Helper()
	raw, counter := b.Client(t)
	out, err := raw.CreateQueue(context.Background(), &sqs.CreateQueueInput{QueueName: aws.String(sqstestenv.QueueName(t, "req"))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = raw.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: out.QueueUrl}) })
	// A prefix per test keeps each test's host queues apart.
	prefix := "tq" + strings.ReplaceAll(sqstestenv.QueueName(t, "")[len(sqstestenv.QueueName(t, ""))-8:], "-", "") + "_"
	return &env{raw: raw, counter: counter, queue: *out.QueueUrl, prefix: prefix}
}

// inBubble runs fn in a testing/synctest bubble with an in-process sqstest
// server made in it: the backend of the tests whose subject is time
// (timeouts, sessions' pings and cancels, redelivery), which then cost no
// real time.
func inBubble(t *testing.T, fn func(t *testing.T, b *sqstestenv.Backend)) {
	t.Helper()
	synctest.Test(t, func(t *testing.T) { fn(t, sqstestenv.InProcess(t)) })
}

func (e *env) requester(t testing.TB, optFns ...func(*requester.Options)) *requester.Requester {
	t.Helper()
	r, err := requester.New(e.raw, append([]func(*requester.Options){func(o *requester.Options) {
		o.Prefix = e.prefix
		o.DisableSweeping = true
	}}, optFns...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close(context.Background()) })
	return r
}

// rawRequests receives the requests on e's queue with the raw client until
// ctx ends, and calls handle with each and its reply queue's host and
// virtual queue name, as a responder that speaks only the documented wire
// format would: a Java responder, or one that breaks the format. The loop
// (and whatever handle adds to wg) ends before the test's other cleanups.
func (e *env) rawRequests(t *testing.T, ctx context.Context, wg *sync.WaitGroup, handle func(m types.Message, host, name string)) {
	t.Cleanup(wg.Wait)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			out, err := e.raw.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
				QueueUrl: aws.String(e.queue), MaxNumberOfMessages: 10, WaitTimeSeconds: 1, MessageAttributeNames: []string{"All"},
			})
			if err != nil {
				continue
			}
			for _, m := range out.Messages {
				replyTo := aws.ToString(m.MessageAttributes[sqsapi.ResponseQueueURLAttribute].StringValue)
				host, name, err := wire.ParseVirtualQueueURL(replyTo)
				if err != nil {
					t.Errorf("request has ResponseQueueUrl %q: %v", replyTo, err)
					continue
				}
				handle(m, host, name)
			}
		}
	}()
}

// rawResponder answers requests using only the documented wire format, as a
// Java responder does: reply to the host with the routing attribute. It
// replies after delay, or never when delay < 0. Replies still on their way
// finish before the test's other cleanups (the requester's Close, the
// queues' deletion): a reply failing afterwards could not be reported.
func (e *env) rawResponder(t *testing.T, ctx context.Context, delay time.Duration) *sync.WaitGroup {
	var wg sync.WaitGroup
	e.rawRequests(t, ctx, &wg, func(m types.Message, host, name string) {
		if delay < 0 {
			return
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			testtime.Pause(delay) // in a bubble when delay > 0
			_, err := e.raw.SendMessage(context.Background(), &sqs.SendMessageInput{
				QueueUrl: aws.String(host), MessageBody: aws.String("re: " + aws.ToString(m.Body)),
				MessageAttributes: map[string]types.MessageAttributeValue{
					sqsapi.VirtualQueueNameAttribute: {DataType: aws.String("String"), StringValue: aws.String(name)},
					sqsapi.CorrelationIDAttribute:    m.MessageAttributes[sqsapi.RequestIDAttribute],
				},
			})
			if err != nil {
				t.Errorf("reply: %v", err)
			}
			_, _ = e.raw.DeleteMessage(context.Background(), &sqs.DeleteMessageInput{QueueUrl: aws.String(e.queue), ReceiptHandle: m.ReceiptHandle})
		}()
	})
	return &wg
}

func TestRoundTripsWithAJavaStyleResponder(t *testing.T) {
	t.Parallel()
	sqstestenv.Each(t, func(t *testing.T, b *sqstestenv.Backend) {
		e := newEnv(t, b)
		r := e.requester(t)
		ctx, stop := context.WithCancel(context.Background())
		defer stop()
		e.rawResponder(t, ctx, 0)

		var wg sync.WaitGroup
		for i := 0; i < 20; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				defer cancel()
				body := fmt.Sprint("ping ", i)
				m, err := r.SendMessageAndGetResponse(cctx, &sqs.SendMessageInput{QueueUrl: aws.String(e.queue), MessageBody: aws.String(body)})
				if err != nil {
					t.Errorf("request %d: %v", i, err)
					return
				}
				if aws.ToString(m.Body) != "re: "+body {
					t.Errorf("request %d got %q", i, aws.ToString(m.Body))
				}
				if aws.ToString(m.MessageAttributes[sqsapi.CorrelationIDAttribute].StringValue) == "" {
					t.Errorf("reply without correlation id")
				}
			}()
		}
		wg.Wait()
		s := r.Stats()
		if requester.Replied(r) != 20 || s.Pending != 0 || s.Failed != 0 || s.TimedOut != 0 {
			t.Fatalf("stats %+v", s)
		}
		t.Logf("calls for 20 concurrent round trips (requester side): %v", s.Calls)
	})
}

func TestTimeoutIsDistinctAndLateReplyIsOrphaned(t *testing.T) {
	t.Parallel()
	inBubble(t, func(t *testing.T, b *sqstestenv.Backend) {
		e := newEnv(t, b)
		var rec observetest.Recorder
		r := e.requester(t, func(o *requester.Options) { o.Observer = &rec })
		ctx, stop := context.WithCancel(context.Background())
		defer stop()
		e.rawResponder(t, ctx, 1500*time.Millisecond)

		cctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		defer cancel()
		_, err := r.SendMessageAndGetResponse(cctx, &sqs.SendMessageInput{QueueUrl: aws.String(e.queue), MessageBody: aws.String("slow")})
		if !errors.Is(err, requester.ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err = %v, want ErrTimeout and DeadlineExceeded", err)
		}
		if !strings.Contains(err.Error(), "no response to request ") {
			t.Fatalf("err = %v, want the timeout to name the request", err)
		}
		// Keep the host polled so the late reply arrives and is orphaned.
		c2, cancel2 := context.WithTimeout(ctx, 3*time.Second)
		defer cancel2()
		_, _ = r.SendMessageAndGetResponse(c2, &sqs.SendMessageInput{QueueUrl: aws.String(e.queue), MessageBody: aws.String("keeps the poller busy")})
		testtime.Until(5*time.Second, func() bool { return r.Stats().LateReplies >= 1 })
		if s := r.Stats(); s.LateReplies < 1 || s.TimedOut != 1 {
			t.Fatalf("stats %+v: want the late reply orphaned and one timeout", s)
		}
		wctx, wcancel := context.WithTimeout(ctx, 5*time.Second) // told after it is counted
		defer wcancel()
		if !rec.Wait(wctx, observe.Dropped, "late-reply", 1) {
			t.Errorf("the Observer heard of no late reply")
		}
		if o := rec.Outcomes(); len(o) != 2 || !errors.Is(o[0].Err, requester.ErrTimeout) {
			t.Errorf("outcomes %+v, want the timeout first", o)
		}
	})
}

func TestCancelledContextIsNotATimeout(t *testing.T) {
	t.Parallel()
	sqstestenv.Each(t, func(t *testing.T, b *sqstestenv.Backend) {
		e := newEnv(t, b)
		r := e.requester(t)
		ctx, cancel := context.WithCancel(context.Background())
		call, err := r.SendMessageAndGetResponseAsync(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(e.queue), MessageBody: aws.String("x")})
		if err != nil {
			t.Fatal(err)
		}
		cancel()
		_, err = call.Wait(context.Background())
		if !errors.Is(err, context.Canceled) || errors.Is(err, requester.ErrTimeout) {
			t.Fatalf("err = %v, want context.Canceled only", err)
		}
	})
}

// TestAsyncCallsShareOnePoller sends 50 async calls at once to a
// responder that answers after 100 ms: they share the one host queue and
// its pollers, with no receive and no goroutine per call. It runs in a
// synctest bubble on an in-process sqstest, so that the calls are all
// pending when the receives and goroutines are counted, and the host's
// pollers follow its demand rule: one receive per 10 waiting calls, up to 4
// (hostq's demandPollers), and one spare.
func TestAsyncCallsShareOnePoller(t *testing.T) {
	// Not parallel: it counts every goroutine of the process.
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, sqstestenv.InProcess(t))
		e.counter.Reset()
		hostReceives := &receiveCounter{Client: e.raw, prefix: e.prefix}
		r, err := requester.New(hostReceives, func(o *requester.Options) {
			o.Prefix = e.prefix
			o.DisableSweeping = true
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = r.Close(context.Background()) })
		ctx, stop := context.WithCancel(context.Background())
		defer stop()
		e.rawResponder(t, ctx, 100*time.Millisecond)
		// The host queue first, with the requester's goroutines that live
		// with it (its pollers park only while calls wait).
		if _, err := r.SendMessageAndGetResponse(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(e.queue), MessageBody: aws.String("warm-up")}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		goroutines := libraryGoroutines()
		cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		defer cancel()
		calls := make([]*requester.Call, 50)
		for i := range calls {
			c, err := r.SendMessageAndGetResponseAsync(cctx, &sqs.SendMessageInput{QueueUrl: aws.String(e.queue), MessageBody: aws.String(fmt.Sprint(i))})
			if err != nil {
				t.Fatal(err)
			}
			calls[i] = c
		}
		// All 50 wait (the responder answers at 100 ms of the bubble's
		// clock, which has not moved): count what they cost.
		synctest.Wait()
		inFlight, peak := hostReceives.now()
		extra := libraryGoroutines() - goroutines
		t.Logf("50 pending calls: %d host receives in flight (peak %d), %d more goroutines", inFlight, peak, extra)
		if inFlight > 5 || peak > 5 {
			t.Errorf("%d receives of the host queue in flight (peak %d) for 50 waiting calls, want at most 5: 4 by the demand (one per 10 waiting), one spare", inFlight, peak)
		}
		if extra > 10 {
			t.Errorf("%d goroutines more with 50 calls pending: want no goroutine per call", extra)
		}
		for i, c := range calls {
			m, err := c.Wait(context.Background())
			if err != nil || aws.ToString(m.Body) != fmt.Sprint("re: ", i) {
				t.Fatalf("call %d: %v %v", i, m, err)
			}
		}
		if n := e.counter.Get("CreateQueue"); n != 1 {
			t.Errorf("%d CreateQueue calls: want the one host queue", n)
		}
		if _, peak := hostReceives.now(); peak > 5 {
			t.Errorf("peak of %d host receives in flight, want at most 5", peak)
		}
	})
}

// libraryGoroutines counts the goroutines running the library's code, less
// the test's own (rawResponder's, which sleeps before each reply).
func libraryGoroutines() int {
	n := 0
	for _, g := range leakcheck.Leaked() {
		if !strings.Contains(g, "requester_test.go") {
			n++
		}
	}
	return n
}

// receiveCounter counts the receives of queues whose name starts with
// prefix (a requester's host queues) that are in flight, and their peak.
type receiveCounter struct {
	sqsapi.Client
	prefix         string
	mu             sync.Mutex
	inFlight, peak int
}

func (c *receiveCounter) ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, optFns ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	u := aws.ToString(in.QueueUrl)
	if !strings.HasPrefix(u[strings.LastIndexByte(u, '/')+1:], c.prefix) {
		return c.Client.ReceiveMessage(ctx, in, optFns...)
	}
	c.mu.Lock()
	c.inFlight++
	c.peak = max(c.peak, c.inFlight)
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.inFlight--
		c.mu.Unlock()
	}()
	return c.Client.ReceiveMessage(ctx, in, optFns...)
}

func (c *receiveCounter) now() (inFlight, peak int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.inFlight, c.peak
}

func TestSendFailureLeaksNothing(t *testing.T) {
	t.Parallel()
	sqstestenv.Each(t, func(t *testing.T, b *sqstestenv.Backend) {
		e := newEnv(t, b)
		r := e.requester(t)
		_, err := r.SendMessageAndGetResponse(context.Background(), &sqs.SendMessageInput{
			QueueUrl: aws.String(e.queue + "-does-not-exist"), MessageBody: aws.String("x"),
		})
		if !awserr.IsQueueDoesNotExist(err) {
			t.Fatalf("err = %v, want the send's QueueDoesNotExist", err)
		}
		if s := r.Stats(); s.Pending != 0 || s.Failed != 1 {
			t.Fatalf("stats %+v", s)
		}
	})
}

func TestBadRequestsRejectedBeforeAnyCall(t *testing.T) {
	t.Parallel()
	sqstestenv.Each(t, func(t *testing.T, b *sqstestenv.Backend) {
		e := newEnv(t, b)
		r := e.requester(t)
		e.counter.Reset()
		ten := map[string]types.MessageAttributeValue{}
		for i := 0; i < 9; i++ {
			ten[fmt.Sprint("a", i)] = types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String("v")}
		}
		for name, in := range map[string]*sqs.SendMessageInput{
			"nil":           nil,
			"no queue":      {MessageBody: aws.String("x")},
			"no body":       {QueueUrl: aws.String(e.queue)},
			"bad virtual":   {QueueUrl: aws.String("#x"), MessageBody: aws.String("x")},
			"9 + 2 attrs":   {QueueUrl: aws.String(e.queue), MessageBody: aws.String("x"), MessageAttributes: ten},
			"huge body":     {QueueUrl: aws.String(e.queue), MessageBody: aws.String(strings.Repeat("x", 1<<20))},
			"own reply url": {QueueUrl: aws.String(e.queue), MessageBody: aws.String("x"), MessageAttributes: map[string]types.MessageAttributeValue{sqsapi.ResponseQueueURLAttribute: {DataType: aws.String("String"), StringValue: aws.String("u")}}},
			"NUL in body":   {QueueUrl: aws.String(e.queue), MessageBody: aws.String("a\x00b")},
			"U+FFFE body":   {QueueUrl: aws.String(e.queue), MessageBody: aws.String("\ufffe")},
			"bad UTF-8":     {QueueUrl: aws.String(e.queue), MessageBody: aws.String("caf\xc3")},
			"bad attribute": {QueueUrl: aws.String(e.queue), MessageBody: aws.String("x"), MessageAttributes: map[string]types.MessageAttributeValue{"a": wire.StringAttribute("\x01")}},
			"bad list": {QueueUrl: aws.String(e.queue), MessageBody: aws.String("x"), MessageAttributes: map[string]types.MessageAttributeValue{
				"l": {DataType: aws.String("String.list"), StringListValues: []string{"ok", "\uffff"}}}},
			"virtual, NUL": {QueueUrl: aws.String(e.queue + "#v"), MessageBody: aws.String("\x00")},
		} {
			_, err := r.SendMessageAndGetResponse(context.Background(), in)
			if !errors.Is(err, sqsapi.ErrInvalidInput) {
				t.Errorf("%s: err = %v, want ErrInvalidInput", name, err)
			}
		}
		if n := e.counter.Total(); n != 0 {
			t.Fatalf("bad requests made %d calls: %v", n, e.counter.Snapshot())
		}
		for _, p := range []string{strings.Repeat("p", 41), "bad prefix"} { // "" means the default
			if _, err := requester.New(e.raw, func(o *requester.Options) { o.Prefix = p }); !errors.Is(err, sqsapi.ErrInvalidInput) {
				t.Errorf("prefix %q: err = %v", p, err)
			}
		}
	})
}

func TestCloseFailsPendingAndDeletesHostQueue(t *testing.T) {
	sqstestenv.Each(t, func(t *testing.T, b *sqstestenv.Backend) {
		e := newEnv(t, b)
		r, err := requester.New(e.raw, func(o *requester.Options) { o.Prefix = e.prefix; o.DisableSweeping = true })
		if err != nil {
			t.Fatal(err)
		}
		call, err := r.SendMessageAndGetResponseAsync(context.Background(), &sqs.SendMessageInput{QueueUrl: aws.String(e.queue), MessageBody: aws.String("x")})
		if err != nil {
			t.Fatal(err)
		}
		list := func() []string {
			out, err := e.raw.ListQueues(context.Background(), &sqs.ListQueuesInput{QueueNamePrefix: aws.String(e.prefix)})
			if err != nil {
				t.Fatal(err)
			}
			return out.QueueUrls
		}
		if got := list(); len(got) != 1 {
			t.Fatalf("host queues %v, want 1", got)
		}
		tags, err := e.raw.ListQueueTags(context.Background(), &sqs.ListQueueTagsInput{QueueUrl: aws.String(list()[0])})
		if err != nil || tags.Tags[sqsapi.RetentionTag] != "300" || tags.Tags[sqsapi.HeartbeatTag] == "" {
			t.Fatalf("host queue tags %v, %v", tags.Tags, err)
		}
		if err := r.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		if _, err := call.Wait(context.Background()); !errors.Is(err, sqsapi.ErrClosed) {
			t.Fatalf("pending call got %v, want sqsapi.ErrClosed", err)
		}
		if got := list(); len(got) != 0 {
			t.Fatalf("host queues left after Close: %v", got)
		}
		if _, err := r.SendMessageAndGetResponse(context.Background(), &sqs.SendMessageInput{QueueUrl: aws.String(e.queue), MessageBody: aws.String("x")}); !errors.Is(err, sqsapi.ErrClosed) {
			t.Fatalf("after Close: %v", err)
		}
		leakcheck.Check(t)
	})
}

// slowRequestSends answers sends to one queue only after a reply could
// arrive, and gives up with the context's error when it ends first, as the
// SDK does when a call's context is cancelled under it.
type slowRequestSends struct {
	*sqs.Client
	queue string
}

func (s slowRequestSends) hold(ctx context.Context, queueURL *string) error {
	if aws.ToString(queueURL) != s.queue {
		return nil
	}
	select {
	case <-time.After(3 * time.Second):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s slowRequestSends) SendMessage(ctx context.Context, in *sqs.SendMessageInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	out, err := s.Client.SendMessage(ctx, in, optFns...)
	if err == nil {
		err = s.hold(ctx, in.QueueUrl)
	}
	return out, err
}

func (s slowRequestSends) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	out, err := s.Client.SendMessageBatch(ctx, in, optFns...)
	if err == nil {
		err = s.hold(ctx, in.QueueUrl)
	}
	return out, err
}

// TestReplyBeforeTheSendReturns: when the reply arrives while the request's
// send still waits for its own response, the call succeeds; finishing it
// must not turn into a failed send.
func TestReplyBeforeTheSendReturns(t *testing.T) {
	t.Parallel()
	sqstestenv.Each(t, func(t *testing.T, b *sqstestenv.Backend) {
		e := newEnv(t, b)
		r, err := requester.New(slowRequestSends{Client: e.raw, queue: e.queue}, func(o *requester.Options) {
			o.Prefix = e.prefix
			o.DisableSweeping = true
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = r.Close(context.Background()) })
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		wg := e.rawResponder(t, ctx, 0)
		defer wg.Wait()
		defer cancel()
		reply, err := r.SendMessageAndGetResponse(context.Background(), &sqs.SendMessageInput{QueueUrl: aws.String(e.queue), MessageBody: aws.String("early")})
		if err != nil || aws.ToString(reply.Body) != "re: early" {
			t.Fatalf("reply %v, err %v: want the reply that arrived during the send", reply, err)
		}
		if s := r.Stats(); s.Failed != 0 || s.Pending != 0 {
			t.Errorf("stats %+v", s)
		}
	})
}

// A host queue deleted from under the requester fails the calls waiting on
// it with QueueDoesNotExist, and the next request gets a new host queue.
func TestHostQueueDeletedFromUnderPendingCalls(t *testing.T) {
	t.Parallel()
	sqstestenv.Each(t, func(t *testing.T, b *sqstestenv.Backend) {
		e := newEnv(t, b)
		r := e.requester(t)
		ctx, stop := context.WithCancel(context.Background())
		defer stop()
		// Take the request without replying, and learn the host queue.
		hosts := make(chan string, 1)
		go func() {
			for ctx.Err() == nil {
				out, err := e.raw.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(e.queue), WaitTimeSeconds: 1, MessageAttributeNames: []string{"All"}})
				if err != nil || len(out.Messages) == 0 {
					continue
				}
				host, _, _ := wire.ParseVirtualQueueURL(aws.ToString(out.Messages[0].MessageAttributes[sqsapi.ResponseQueueURLAttribute].StringValue))
				hosts <- host
				return
			}
		}()
		call, err := r.SendMessageAndGetResponseAsync(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(e.queue), MessageBody: aws.String("orphaned by the delete")})
		if err != nil {
			t.Fatal(err)
		}
		host := <-hosts
		if _, err := e.raw.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: aws.String(host)}); err != nil {
			t.Fatal(err)
		}
		wctx, cancel := context.WithTimeout(ctx, 25*time.Second)
		defer cancel()
		if _, err := call.Wait(wctx); !awserr.IsQueueDoesNotExist(err) {
			t.Fatalf("pending call = %v, want QueueDoesNotExist", err)
		}
		// The next request is answered through a new host queue.
		e.rawResponder(t, ctx, 0)
		m, err := r.SendMessageAndGetResponse(wctx, &sqs.SendMessageInput{QueueUrl: aws.String(e.queue), MessageBody: aws.String("again")})
		if err != nil || aws.ToString(m.Body) != "re: again" {
			t.Fatalf("request after the host was deleted: %v, %v", m, err)
		}
	})
}

// lostCreate is a client whose first CreateQueue reaches the server but
// loses its response, as when every SDK attempt's response is dropped.
type lostCreate struct {
	*sqs.Client
	lost sync.Once
}

func (c *lostCreate) CreateQueue(ctx context.Context, in *sqs.CreateQueueInput, o ...func(*sqs.Options)) (*sqs.CreateQueueOutput, error) {
	out, err := c.Client.CreateQueue(ctx, in, o...)
	lost := false
	c.lost.Do(func() { lost = true })
	if lost && err == nil {
		return nil, errors.New("injected: CreateQueue's response was lost")
	}
	return out, err
}

// hostQueues lists the queues under prefix.
func (e *env) hostQueues(t *testing.T, prefix string) []string {
	t.Helper()
	out, err := e.raw.ListQueues(context.Background(), &sqs.ListQueuesInput{QueueNamePrefix: aws.String(prefix)})
	if err != nil {
		t.Fatal(err)
	}
	var urls []string
	for _, u := range out.QueueUrls {
		if !strings.HasSuffix(u, "sweeper.fifo") {
			urls = append(urls, u)
		}
	}
	return urls
}

// A host queue whose CreateQueue response was lost is not left behind:
// the next request asks for the same name, and Close deletes it; a
// requester closed before any retry deletes it too.
func TestLostCreateQueueResponseLeavesNoHostQueue(t *testing.T) {
	t.Parallel()
	sqstestenv.Each(t, func(t *testing.T, b *sqstestenv.Backend) {
		e := newEnv(t, b)
		ctx, stop := context.WithCancel(context.Background())
		defer stop()
		e.rawResponder(t, ctx, 0)

		r, err := requester.New(&lostCreate{Client: e.raw}, func(o *requester.Options) { o.Prefix = e.prefix; o.DisableSweeping = true })
		if err != nil {
			t.Fatal(err)
		}
		in := &sqs.SendMessageInput{QueueUrl: aws.String(e.queue), MessageBody: aws.String("x")}
		if _, err := r.SendMessageAndGetResponse(ctx, in); err == nil {
			t.Fatal("the first request succeeded although its host queue's CreateQueue failed")
		}
		if m, err := r.SendMessageAndGetResponse(ctx, in); err != nil || aws.ToString(m.Body) != "re: x" {
			t.Fatalf("second request: %v, %v", m, err)
		}
		if got := e.hostQueues(t, e.prefix); len(got) != 1 || !strings.HasSuffix(got[0], "-0") {
			t.Fatalf("host queues %v: want the one first asked for, -0", got)
		}
		if err := r.Close(ctx); err != nil {
			t.Fatal(err)
		}
		if got := e.hostQueues(t, e.prefix); len(got) != 0 {
			t.Fatalf("host queues left after Close: %v", got)
		}

		// Closed before any retry: Close finds the queue by name.
		r2, err := requester.New(&lostCreate{Client: e.raw}, func(o *requester.Options) { o.Prefix = e.prefix + "b"; o.DisableSweeping = true })
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r2.SendMessageAndGetResponse(ctx, in); err == nil {
			t.Fatal("request succeeded although CreateQueue failed")
		}
		if got := e.hostQueues(t, e.prefix+"b"); len(got) != 1 {
			t.Fatalf("the server has %v: want the queue whose response was lost", got)
		}
		if err := r2.Close(ctx); err != nil {
			t.Fatal(err)
		}
		if got := e.hostQueues(t, e.prefix+"b"); len(got) != 0 {
			t.Fatalf("host queues left after Close: %v", got)
		}
	})
}

func TestHostQueueTags(t *testing.T) {
	t.Parallel()
	sqstestenv.Each(t, func(t *testing.T, b *sqstestenv.Backend) {
		e := newEnv(t, b)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		e.rawResponder(t, ctx, 0)
		user := map[string]string{"team": "payments", "cost center": "4711 / ops", "owner": ""}
		r := e.requester(t, func(o *requester.Options) { o.HostQueueTags = user })
		user["team"] = "changed after New" // New keeps its own copy
		e.counter.Reset()
		reply, err := r.SendMessageAndGetResponse(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(e.queue), MessageBody: aws.String("x")})
		if err != nil || aws.ToString(reply.Body) != "re: x" {
			t.Fatalf("round trip: %v, %v", reply, err)
		}
		// All the tags in the one CreateQueue, no TagQueue.
		if n, tq := e.counter.Get("CreateQueue"), e.counter.Get("TagQueue"); n != 1 || tq != 0 {
			t.Errorf("%d CreateQueue and %d TagQueue calls, want 1 and 0: %v", n, tq, e.counter.Snapshot())
		}
		hosts, err := e.raw.ListQueues(ctx, &sqs.ListQueuesInput{QueueNamePrefix: aws.String(e.prefix)})
		if err != nil || len(hosts.QueueUrls) != 1 {
			t.Fatalf("host queues %v, %v", hosts, err)
		}
		tags, err := e.raw.ListQueueTags(ctx, &sqs.ListQueueTagsInput{QueueUrl: aws.String(hosts.QueueUrls[0])})
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]string{"team": "payments", "cost center": "4711 / ops", "owner": "", sqsapi.RetentionTag: "300"}
		for k, v := range want {
			if got, ok := tags.Tags[k]; !ok || got != v {
				t.Errorf("host queue tag %q = %q (present %v), want %q; all: %v", k, got, ok, v, tags.Tags)
			}
		}
		if len(tags.Tags) != len(want)+1 || tags.Tags[sqsapi.HeartbeatTag] == "" {
			t.Errorf("host queue tags %v: want the user's 3 and the reaper's 2", tags.Tags)
		}
	})
}

func TestBadHostQueueTagsRejectedBeforeAnyCall(t *testing.T) {
	t.Parallel()
	b := sqstestenv.SQSTest(t)
	raw, counter := b.Client(t)
	fifty := map[string]string{}
	for i := range 49 {
		fifty[fmt.Sprint("k", i)] = "v"
	}
	for name, tags := range map[string]map[string]string{
		"reaper's retention key": {sqsapi.RetentionTag: "1"},
		"reaper's heartbeat key": {sqsapi.HeartbeatTag: "1"},
		"49 tags":                fifty,
		"empty key":              {"": "v"},
		"aws: prefix":            {"aws:team": "v"},
		"bad character":          {"team": "a,b"},
		"long value":             {"team": strings.Repeat("v", 257)},
	} {
		_, err := requester.New(raw, func(o *requester.Options) { o.HostQueueTags = tags })
		var ie *sqsapi.InvalidInputError
		if !errors.Is(err, sqsapi.ErrInvalidInput) || !errors.As(err, &ie) || ie.Param != "HostQueueTags" {
			t.Errorf("%s: New = %v, want ErrInvalidInput on HostQueueTags", name, err)
		}
	}
	if n := counter.Total(); n != 0 {
		t.Fatalf("bad tags made %d API calls: %v", n, counter.Snapshot())
	}
}
