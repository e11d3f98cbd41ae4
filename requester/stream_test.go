package requester_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/internal/testkit/observetest"
	"github.com/tempqueues/tempqueues/internal/testkit/sqstestenv"
	"github.com/tempqueues/tempqueues/internal/testkit/testtime"
	"github.com/tempqueues/tempqueues/observe"
	"github.com/tempqueues/tempqueues/requester"
	"github.com/tempqueues/tempqueues/responder"
	"github.com/tempqueues/tempqueues/sqsapi"
)

// serve runs a responder on each queue with h until the test ends. It
// replies to the tests' requesters, whose prefixes (newEnv) start with
// "tq".
func serve(t *testing.T, client *sqs.Client, h responder.HandlerFunc, queues ...string) *responder.Responder {
	t.Helper()
	resp, err := responder.New(client, func(o *responder.Options) {
		o.PollWaitTime = time.Second
		o.AllowReplyTo = []string{"tq"}
	})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for _, q := range queues {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := resp.Serve(context.Background(), q, h); err != nil {
				t.Errorf("Serve %s: %v", q, err)
			}
		}()
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := resp.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		wg.Wait()
	})
	return resp
}

// streamHandler sends n partial replies, pause apart, then a final one.
func streamHandler(n int, pause time.Duration) responder.HandlerFunc {
	return func(ctx context.Context, req *responder.Request) (*responder.Reply, error) {
		for i := range n {
			err := req.Send(ctx, &responder.Reply{Body: "part " + strconv.Itoa(i)})
			if errors.Is(err, responder.ErrStreamNotRequested) {
				break // the requester takes one reply: send only the final one
			}
			if err != nil {
				return nil, err
			}
			testtime.Pause(pause) // in a bubble when pause > 0
		}
		return &responder.Reply{Body: "final of " + req.Body()}, nil
	}
}

func TestStreamDeliversEveryReplyInOrderOnce(t *testing.T) {
	t.Parallel()
	sqstestenv.Each(t, func(t *testing.T, b *sqstestenv.Backend) {
		e := newEnv(t, b)
		serve(t, e.raw, streamHandler(100, 0), e.queue)
		r := e.requester(t)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		s, err := r.SendMessageAndStream(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(e.queue), MessageBody: aws.String("job")})
		if err != nil {
			t.Fatal(err)
		}
		var bodies []string
		for m, err := range s.All(ctx) {
			if err != nil {
				t.Fatalf("after %d replies: %v", len(bodies), err)
			}
			if got, want := aws.ToString(m.MessageAttributes[sqsapi.StreamAttribute].StringValue), strconv.Itoa(len(bodies)); got != want && got != want+";final" {
				t.Errorf("reply %d has %s %q", len(bodies), sqsapi.StreamAttribute, got)
			}
			// Streamed messages go to the request's own virtual queue and
			// leave the correlation id to the final reply.
			corr, has := m.MessageAttributes[sqsapi.CorrelationIDAttribute]
			if final := len(bodies) == 100; has != final || final && aws.ToString(corr.StringValue) != s.RequestID() {
				t.Errorf("reply %d: correlation id %v %q, want it on the final reply alone, %s", len(bodies), has, aws.ToString(corr.StringValue), s.RequestID())
			}
			bodies = append(bodies, aws.ToString(m.Body))
		}
		want := make([]string, 0, 101)
		for i := range 100 {
			want = append(want, "part "+strconv.Itoa(i))
		}
		want = append(want, "final of job")
		if !slices.Equal(bodies, want) {
			t.Fatalf("got %d replies %q..., want the 100 parts and the final one in order", len(bodies), bodies[:min(5, len(bodies))])
		}
		if _, err := s.Next(ctx); !errors.Is(err, io.EOF) {
			t.Errorf("Next after the end: %v, want io.EOF", err)
		}

		// A requester that takes one reply (as a Java one does) gets the
		// final reply alone: the handler's Sends are refused.
		m, err := r.SendMessageAndGetResponse(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(e.queue), MessageBody: aws.String("one")})
		if err != nil {
			t.Fatal(err)
		}
		if aws.ToString(m.Body) != "final of one" {
			t.Errorf("single reply %q, want the final one", aws.ToString(m.Body))
		}
		waitHostEmpty(t, e, r, 102)
	})
}

// waitHostEmpty waits until the requester's host queue holds nothing and
// the replies it took or drained add up to at least replies.
func waitHostEmpty(t *testing.T, e *env, r *requester.Requester, replies int64) {
	t.Helper()
	ctx := context.Background()
	var last string
	if !testtime.Until(20*time.Second, func() bool {
		st := r.Stats()
		list, err := e.raw.ListQueues(ctx, &sqs.ListQueuesInput{QueueNamePrefix: aws.String(e.prefix)})
		if err != nil {
			t.Fatal(err)
		}
		left := 0
		for _, u := range list.QueueUrls {
			out, err := e.raw.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(u), AttributeNames: []types.QueueAttributeName{
				types.QueueAttributeNameApproximateNumberOfMessages, types.QueueAttributeNameApproximateNumberOfMessagesNotVisible,
			}})
			if err != nil {
				t.Fatal(err)
			}
			for _, v := range out.Attributes {
				n, _ := strconv.Atoi(v)
				left += n
			}
		}
		taken := requester.Replied(r)
		last = fmt.Sprintf("%d messages on the host queue, %d replies taken, %d late", left, taken, st.LateReplies)
		return left == 0 && taken+st.LateReplies >= replies
	}) {
		t.Fatalf("host queue not cleared: %s", last)
	}
}

// A handler that returns no final Reply still ends the stream: the
// responder sends an end mark, which the requester does not return, so the
// caller gets io.EOF after the streamed messages instead of waiting for its
// deadline.
func TestStreamWithoutFinalReplyEnds(t *testing.T) {
	t.Parallel()
	sqstestenv.Each(t, func(t *testing.T, b *sqstestenv.Backend) {
		e := newEnv(t, b)
		serve(t, e.raw, func(ctx context.Context, req *responder.Request) (*responder.Reply, error) {
			n, _ := strconv.Atoi(req.Body())
			for i := range n {
				if err := req.Send(ctx, &responder.Reply{Body: "part " + strconv.Itoa(i)}); err != nil {
					return nil, err
				}
			}
			return nil, nil
		}, e.queue)
		r := e.requester(t)
		for _, n := range []int{0, 3} {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			s, err := r.SendMessageAndStream(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(e.queue), MessageBody: aws.String(strconv.Itoa(n))})
			if err != nil {
				t.Fatal(err)
			}
			var bodies []string
			for m, err := range s.All(ctx) {
				if err != nil {
					t.Fatalf("stream of %d: after %d messages: %v", n, len(bodies), err)
				}
				bodies = append(bodies, aws.ToString(m.Body))
			}
			if len(bodies) != n || n > 0 && bodies[n-1] != "part "+strconv.Itoa(n-1) {
				t.Errorf("stream of %d: got %q", n, bodies)
			}
			if ctx.Err() != nil {
				t.Errorf("stream of %d ended at its deadline", n)
			}
			cancel()
		}
		waitHostEmpty(t, e, r, 5) // 3 messages and two end marks
		if st := r.Stats(); st.LateReplies != 0 {
			t.Errorf("late replies: %+v", st)
		}
	})
}

func TestStreamStoppedEarlyLeavesNothingBehind(t *testing.T) {
	t.Parallel()
	inBubble(t, func(t *testing.T, b *sqstestenv.Backend) {
		e := newEnv(t, b)
		// A handler that ignores its context sends all 101 messages, even
		// after its caller closed the stream or passed its deadline: every
		// one the caller does not take must be cleared as a late reply.
		stream := streamHandler(100, 5*time.Millisecond)
		serve(t, e.raw, responder.HandlerFunc(func(ctx context.Context, req *responder.Request) (*responder.Reply, error) {
			return stream(context.WithoutCancel(ctx), req)
		}), e.queue)
		var rec observetest.Recorder
		r := e.requester(t, func(o *requester.Options) { o.Observer = &rec })
		ctx := context.Background()

		// The caller closes the stream after 10 replies.
		s, err := r.SendMessageAndStream(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(e.queue), MessageBody: aws.String("closed")})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, err := range s.All(ctx) {
			if err != nil {
				t.Fatal(err)
			}
			if n++; n == 10 {
				break // closes the stream
			}
		}
		if _, err := s.Next(ctx); !errors.Is(err, sqsapi.ErrClosed) {
			t.Errorf("Next after Close: %v, want sqsapi.ErrClosed", err)
		}
		waitHostEmpty(t, e, r, 101)
		st := r.Stats()
		if st.LateReplies == 0 {
			t.Errorf("no late reply counted: %+v", st)
		}
		// Each is told after it is counted.
		wctx, wcancel := context.WithTimeout(ctx, 5*time.Second)
		defer wcancel()
		if !rec.Wait(wctx, observe.Dropped, "late-reply", int(st.LateReplies)) {
			t.Errorf("late replies: %+v, the Observer heard of %d", st, rec.Count(observe.Dropped, "late-reply"))
		}

		// The stream's deadline passes while the handler still sends.
		before, taken := r.Stats(), requester.Replied(r)
		tctx, cancel := context.WithTimeout(ctx, 150*time.Millisecond)
		defer cancel()
		s, err = r.SendMessageAndStream(tctx, &sqs.SendMessageInput{QueueUrl: aws.String(e.queue), MessageBody: aws.String("timed out")})
		if err != nil {
			t.Fatal(err)
		}
		for {
			_, err := s.Next(ctx)
			if err == nil {
				continue
			}
			if !errors.Is(err, requester.ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("stream ended with %v, want ErrTimeout", err)
			}
			break
		}
		waitHostEmpty(t, e, r, taken+before.LateReplies+101)
		if st := r.Stats(); st.LateReplies == before.LateReplies || st.TimedOut == before.TimedOut {
			t.Errorf("timeout not counted, or no late reply: %+v", st)
		}
	})
}

func TestScatterGather(t *testing.T) {
	t.Parallel()
	inBubble(t, func(t *testing.T, b *sqstestenv.Backend) {
		e := newEnv(t, b)
		queues := []string{e.queue}
		for i := 1; i < 5; i++ {
			out, err := e.raw.CreateQueue(context.Background(), &sqs.CreateQueueInput{QueueName: aws.String(sqstestenv.QueueName(t, "sg"+strconv.Itoa(i)))})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _, _ = e.raw.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: out.QueueUrl}) })
			queues = append(queues, *out.QueueUrl)
		}
		echo := func(ctx context.Context, req *responder.Request) (*responder.Reply, error) {
			return &responder.Reply{Body: req.QueueURL}, nil
		}
		serve(t, e.raw, echo, queues[:4]...) // the fifth responder is down
		r := e.requester(t)
		in := &sqs.SendMessageInput{MessageBody: aws.String("price?")}

		check := func(got []requester.Gathered, origins []string) {
			t.Helper()
			var seen []string
			for _, g := range got {
				if aws.ToString(g.Message.Body) != g.Origin {
					t.Errorf("reply %q from origin %q", aws.ToString(g.Message.Body), g.Origin)
				}
				seen = append(seen, g.Origin)
			}
			slices.Sort(seen)
			origins = slices.Sorted(slices.Values(origins))
			if !slices.Equal(seen, origins) {
				t.Errorf("origins %q, want %q", seen, origins)
			}
		}

		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		got, err := r.ScatterGather(ctx, queues[:4], in, 0)
		if err != nil {
			t.Fatal(err)
		}
		check(got, queues[:4])

		// One of five down: the four replies at the deadline, and how many
		// are missing.
		dctx, dcancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer dcancel()
		start := time.Now()
		got, err = r.ScatterGather(dctx, queues, in, 5)
		if !errors.Is(err, requester.ErrIncomplete) || len(got) != 4 || !errors.Is(err, requester.ErrTimeout) || !strings.Contains(err.Error(), "1 missing") {
			t.Fatalf("err %v with %d replies, want ErrIncomplete with 1 missing that matches ErrTimeout", err, len(got))
		}
		if d := time.Since(start); d < 1500*time.Millisecond {
			t.Errorf("returned after %v, before the deadline", d)
		}
		check(got, queues[:4])

		// Through a topic: the fake publishes to the queues as an SNS
		// topic with raw message delivery does.
		pub := publisherFunc(func(ctx context.Context, body string, attrs map[string]types.MessageAttributeValue) error {
			for _, q := range queues {
				if _, err := e.raw.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(q), MessageBody: aws.String(body), MessageAttributes: attrs}); err != nil {
					return err
				}
			}
			return nil
		})
		got, err = r.PublishGather(ctx, pub, in, 4)
		if err != nil {
			t.Fatal(err)
		}
		check(got, queues[:4])
		pctx, pcancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer pcancel()
		got, err = r.PublishGather(pctx, pub, in, 5)
		if !errors.Is(err, requester.ErrIncomplete) || len(got) != 4 || !errors.Is(err, requester.ErrTimeout) {
			t.Fatalf("err %v with %d replies, want ErrIncomplete with 1 missing that matches ErrTimeout", err, len(got))
		}
		check(got, queues[:4])
	})
}

type publisherFunc func(ctx context.Context, body string, attrs map[string]types.MessageAttributeValue) error

func (f publisherFunc) Publish(ctx context.Context, body string, attrs map[string]types.MessageAttributeValue) error {
	return f(ctx, body, attrs)
}

func TestStreamInputChecks(t *testing.T) {
	t.Parallel()
	b := sqstestenv.SQSTest(t)
	e := newEnv(t, b)
	r := e.requester(t)
	calls := e.counter.Total()
	attrs := map[string]types.MessageAttributeValue{}
	for i := range 8 {
		attrs["a"+strconv.Itoa(i)] = types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String("v")}
	}
	ctx := context.Background()
	// 8 attributes fit a request (with ResponseQueueUrl and RequestId),
	// not a stream request, which also carries TempQueues.Stream.
	_, err := r.SendMessageAndStream(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(e.queue), MessageBody: aws.String("x"), MessageAttributes: attrs})
	if !errors.Is(err, sqsapi.ErrInvalidInput) {
		t.Errorf("9 attributes with the stream's: %v", err)
	}
	_, err = r.SendMessageAndStream(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(e.queue), MessageBody: aws.String("x"),
		MessageAttributes: map[string]types.MessageAttributeValue{sqsapi.StreamAttribute: {DataType: aws.String("String"), StringValue: aws.String("1")}}})
	if !errors.Is(err, sqsapi.ErrInvalidInput) {
		t.Errorf("caller's %s: %v", sqsapi.StreamAttribute, err)
	}
	if _, err := r.ScatterGather(ctx, []string{e.queue}, &sqs.SendMessageInput{MessageBody: aws.String("x")}, 2); !errors.Is(err, sqsapi.ErrInvalidInput) {
		t.Errorf("want 2 of 1 queue: %v", err)
	}
	if _, err := r.PublishGather(ctx, nil, &sqs.SendMessageInput{MessageBody: aws.String("x")}, 1); !errors.Is(err, sqsapi.ErrInvalidInput) {
		t.Errorf("nil publisher: %v", err)
	}
	if n := e.counter.Total(); n != calls {
		t.Errorf("bad input made %d API calls", n-calls)
	}
}

// Options.Propagator writes into a stream's request (what it adds reaches
// the handler), and the Observer's done function is called once, with the
// final reply;
// a stream to a FIFO request queue gets its deduplication id from the
// request id, as a call does.
func TestStreamObserver(t *testing.T) {
	t.Parallel()
	sqstestenv.Each(t, func(t *testing.T, b *sqstestenv.Backend) {
		e := newEnv(t, b)
		fifo, err := e.raw.CreateQueue(context.Background(), &sqs.CreateQueueInput{
			QueueName:  aws.String(sqstestenv.QueueName(t, "sreq") + ".fifo"),
			Attributes: map[string]string{"FifoQueue": "true"},
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _, _ = e.raw.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: fifo.QueueUrl}) })
		inner := streamHandler(3, 0)
		serve(t, e.raw, func(ctx context.Context, req *responder.Request) (*responder.Reply, error) {
			if v, _ := req.Attribute("hooked"); v != "yes" {
				return nil, fmt.Errorf("request without the attribute the Propagator added")
			}
			return inner(ctx, req)
		}, *fifo.QueueUrl)
		type done struct {
			body string
			err  error
		}
		dones := make(chan done, 4)
		r := e.requester(t, func(o *requester.Options) {
			o.Propagator = propagatorFunc(func(ctx context.Context, _ observe.Event, attrs map[string]types.MessageAttributeValue, _ map[string]types.MessageSystemAttributeValue, room int) context.Context {
				if room != 7 {
					t.Errorf("a stream's request with none of the caller's attributes has room for %d, want 7", room)
				}
				attrs["hooked"] = types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String("yes")}
				return ctx
			})
			o.Observer = observe.Func(func(_ context.Context, ev observe.Event) func(*types.Message, error) {
				return func(m *types.Message, err error) {
					var body string
					if m != nil {
						body = aws.ToString(m.Body)
					}
					dones <- done{body, err}
				}
			})
		})
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		s, err := r.SendMessageAndStream(ctx, &sqs.SendMessageInput{QueueUrl: fifo.QueueUrl, MessageBody: aws.String("job"), MessageGroupId: aws.String("g")})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, err := range s.All(ctx) {
			if err != nil {
				t.Fatalf("after %d replies: %v", n, err)
			}
			n++
		}
		if n != 4 {
			t.Fatalf("got %d replies, want 4", n)
		}
		s.Close()
		select {
		case d := <-dones:
			if d.err != nil || d.body != "final of job" {
				t.Errorf("the Observer's done got (%q, %v), want the final reply", d.body, d.err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("the Observer's done was not called")
		}
		select {
		case d := <-dones:
			t.Errorf("the Observer's done called again: %+v", d)
		case <-time.After(100 * time.Millisecond):
		}
	})
}
