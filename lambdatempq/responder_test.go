package lambdatempq_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/internal/testkit/sqstestenv"
	"github.com/tempqueues/tempqueues/lambdatempq"
	"github.com/tempqueues/tempqueues/requester"
	"github.com/tempqueues/tempqueues/responder"
	"github.com/tempqueues/tempqueues/sqsapi"
)

// TestResponderAnswersGoAndJavaRequests is the acceptance test: 64 requests
// of the Go requester and 10 raw Java-format requests, delivered in events
// of 10 records, are answered; exactly the failed and panicked ones are
// reported; a redelivered request is answered from the Store without
// running the handler.
func TestResponderAnswersGoAndJavaRequests(t *testing.T) {
	sqstestenv.Each(t, func(t *testing.T, b *sqstestenv.Backend) {
		ctx := context.Background()
		client, _ := b.Client(t)
		qs := newQueues(t, client)
		reqURL, reqARN := qs.create("lreq")
		javaHost, _ := qs.createHost() // a Java requester's host queue

		var runs sync.Map // request id -> *atomic.Int32
		h := responder.HandlerFunc(func(ctx context.Context, req *responder.Request) (*responder.Reply, error) {
			n, _ := runs.LoadOrStore(req.ID, new(atomic.Int32))
			n.(*atomic.Int32).Add(1)
			switch req.Body() {
			case "fail":
				return nil, errors.New("refused")
			case "panic":
				panic("handler bug")
			}
			return &responder.Reply{Body: "re: " + req.Body()}, nil
		})
		var middlewareRuns atomic.Int32
		fn, err := lambdatempq.NewResponder(client, h, func(o *lambdatempq.Options) {
			o.QueueURL = qs.url
			o.Responder = append(o.Responder, func(o *responder.Options) {
				o.Store = responder.NewMemoryStore()
				o.Middleware = []func(responder.Handler) responder.Handler{func(next responder.Handler) responder.Handler {
					return responder.HandlerFunc(func(ctx context.Context, req *responder.Request) (*responder.Reply, error) {
						middlewareRuns.Add(1)
						return next.HandleRequest(ctx, req)
					})
				}}
			})
		})
		if err != nil {
			t.Fatal(err)
		}

		// 64 Go requests, waiting for their replies.
		rq, err := requester.New(client, func(o *requester.Options) { o.DisableSweeping = true })
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = rq.Close(context.Background()) })
		cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		defer cancel()
		calls := make([]*requester.Call, 64)
		for i := range calls {
			if calls[i], err = rq.SendMessageAndGetResponseAsync(cctx, &sqs.SendMessageInput{QueueUrl: &reqURL, MessageBody: aws.String(fmt.Sprint("go-", i))}); err != nil {
				t.Fatal(err)
			}
		}
		// 10 Java-format requests: a virtual reply queue on the Java host,
		// no request id.
		javaBodies := []string{"j0", "j1", "fail", "j3", "panic", "j5", "j6", "j7", "j8", "j9"}
		for i, body := range javaBodies {
			if _, err := client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &reqURL, MessageBody: aws.String(body),
				MessageAttributes: map[string]types.MessageAttributeValue{sqsapi.ResponseQueueURLAttribute: str(fmt.Sprintf("%s#jvq%d", javaHost, i))},
			}); err != nil {
				t.Fatal(err)
			}
		}

		msgs := receive(t, client, reqURL, 74, 30*time.Second)
		if len(msgs) != 74 {
			t.Fatalf("received %d of 74 requests", len(msgs))
		}
		var wantFailed, gotFailed []string
		var redeliver types.Message
		for start := 0; start < len(msgs); start += 10 {
			batch := msgs[start:min(len(msgs), start+10)]
			resp, err := fn.HandleSQSEvent(ctx, lambdatempq.Event(reqARN, batch))
			if err != nil {
				t.Fatal(err)
			}
			failed := map[string]bool{}
			for _, f := range resp.BatchItemFailures {
				failed[f.ItemIdentifier] = true
				gotFailed = append(gotFailed, f.ItemIdentifier)
			}
			var done []types.Message
			for _, m := range batch {
				switch aws.ToString(m.Body) {
				case "fail", "panic":
					wantFailed = append(wantFailed, aws.ToString(m.MessageId))
				case "j3":
					redeliver = m
				}
				if !failed[aws.ToString(m.MessageId)] {
					done = append(done, m)
				}
			}
			deleteAll(t, client, reqURL, done)
		}
		slices.Sort(wantFailed)
		slices.Sort(gotFailed)
		if !slices.Equal(gotFailed, wantFailed) {
			t.Errorf("batch item failures %v, want exactly the failed and panicked requests %v", gotFailed, wantFailed)
		}

		for i, c := range calls {
			m, err := c.Wait(cctx)
			if err != nil {
				t.Fatalf("Go request %d: %v", i, err)
			}
			if got := aws.ToString(m.Body); got != fmt.Sprint("re: go-", i) {
				t.Errorf("Go request %d: reply %q", i, got)
			}
		}

		// The redelivered Java request: answered again, from the Store.
		resp, err := fn.HandleSQSEvent(ctx, lambdatempq.Event(reqARN, []types.Message{redeliver}))
		if err != nil || len(resp.BatchItemFailures) != 0 {
			t.Fatalf("redelivery: %v %v", resp, err)
		}
		replies := receive(t, client, javaHost, 9, 20*time.Second)
		byQueue := map[string][]string{}
		for _, m := range replies {
			name := attr(m, sqsapi.VirtualQueueNameAttribute)
			byQueue[name] = append(byQueue[name], aws.ToString(m.Body))
		}
		for i, body := range javaBodies {
			name := fmt.Sprint("jvq", i)
			want := []string{"re: " + body}
			switch body {
			case "fail", "panic":
				want = nil
			case "j3":
				want = []string{"re: j3", "re: j3"}
			}
			if !slices.Equal(byQueue[name], want) {
				t.Errorf("replies routed to %s: %q, want %q", name, byQueue[name], want)
			}
		}
		for _, m := range replies {
			if attr(m, sqsapi.CorrelationIDAttribute) == "<none>" {
				t.Errorf("reply %q without correlation id", aws.ToString(m.Body))
			}
		}
		n, _ := runs.Load(aws.ToString(redeliver.MessageId))
		if got := n.(*atomic.Int32).Load(); got != 1 {
			t.Errorf("the redelivered request's handler ran %d times, want 1", got)
		}
		if got := middlewareRuns.Load(); got != 74 {
			t.Errorf("middleware ran %d times, want 74 (not for the stored answer)", got)
		}
		st := fn.Responder().Stats()
		t.Logf("responder stats: %+v", st)
	})
}

// TestResponderReleasesWithBackoff checks that a request the responder's
// retry policy releases gets its visibility changed, and that a FIFO batch
// stops at its first failure.
func TestResponderReleasesAndFIFO(t *testing.T) {
	b := sqstestenv.SQSTest(t)
	ctx := context.Background()
	client, _ := b.Client(t)
	qs := newQueues(t, client)
	reqURL, reqARN := qs.create("lrel")
	fn, err := lambdatempq.NewResponder(client, responder.HandlerFunc(func(ctx context.Context, req *responder.Request) (*responder.Reply, error) {
		if strings.HasPrefix(req.Body(), "fail") {
			return nil, errors.New("no")
		}
		return nil, nil
	}), func(o *lambdatempq.Options) {
		o.QueueURL = qs.url
		o.Responder = append(o.Responder, func(o *responder.Options) { o.BackoffBase = -1 }) // released at once
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, body := range []string{"ok", "fail"} {
		if _, err := client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &reqURL, MessageBody: aws.String(body)}); err != nil {
			t.Fatal(err)
		}
	}
	msgs := receive(t, client, reqURL, 2, 10*time.Second) // hidden for 60 s
	resp, err := fn.HandleSQSEvent(ctx, lambdatempq.Event(reqARN, msgs))
	if err != nil || len(resp.BatchItemFailures) != 1 {
		t.Fatalf("%v %v", resp, err)
	}
	// Released at once: visible again, not after the 60 s of its receive.
	again := receive(t, client, reqURL, 1, 5*time.Second)
	if len(again) != 1 || aws.ToString(again[0].Body) != "fail" || aws.ToString(again[0].MessageId) != resp.BatchItemFailures[0].ItemIdentifier {
		t.Fatalf("after the release received %v", again)
	}
	if st := fn.Stats(); st.Released != 1 || st.Failed != 1 || st.Handled != 1 {
		t.Errorf("Stats: Released %d, Failed %d, Handled %d; want 1, 1, 1", st.Released, st.Failed, st.Handled)
	}

	// A FIFO event: the records after a failure are reported too.
	ev := events.SQSEvent{}
	for i, body := range []string{"a", "fail", "b"} {
		ev.Records = append(ev.Records, events.SQSMessage{MessageId: fmt.Sprint("m", i), Body: body, EventSourceARN: "arn:aws:sqs:eu-west-1:123456789012:q.fifo"})
	}
	fifo, err := lambdatempq.NewResponder(client, responder.HandlerFunc(func(ctx context.Context, req *responder.Request) (*responder.Reply, error) {
		if req.Body() == "fail" {
			return nil, errors.New("no")
		}
		return nil, nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	resp, err = fifo.HandleSQSEvent(ctx, ev)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, f := range resp.BatchItemFailures {
		ids = append(ids, f.ItemIdentifier)
	}
	if !slices.Equal(ids, []string{"m1", "m2"}) {
		t.Errorf("FIFO failures %v, want [m1 m2]", ids)
	}
}

func TestQueueURL(t *testing.T) {
	u, err := lambdatempq.QueueURL("arn:aws:sqs:eu-west-1:123456789012:orders")
	if err != nil || u != "https://sqs.eu-west-1.amazonaws.com/123456789012/orders" {
		t.Errorf("QueueURL = %q, %v", u, err)
	}
	if _, err := lambdatempq.QueueURL("arn:aws:sns:eu-west-1:123456789012:topic"); !errors.Is(err, sqsapi.ErrInvalidInput) {
		t.Errorf("an SNS ARN: %v, want ErrInvalidInput", err)
	}
}

// A request whose ResponseQueueUrl names a queue the responder may not
// reply to (here not a requester's host queue) is done unanswered: the
// handler does not run, nothing is sent there, and the record is not
// retried; responder.Options.AllowReplyTo widens it.
func TestResponderRefusesForeignReplyQueues(t *testing.T) {
	b := sqstestenv.SQSTest(t)
	ctx := context.Background()
	client, _ := b.Client(t)
	qs := newQueues(t, client)
	reqURL, reqARN := qs.create("lref")
	victim, _ := qs.create("lvictim")
	var runs atomic.Int32
	h := responder.HandlerFunc(func(ctx context.Context, req *responder.Request) (*responder.Reply, error) {
		runs.Add(1)
		return &responder.Reply{Body: "re: " + req.Body()}, nil
	})
	request := func() []types.Message {
		t.Helper()
		if _, err := client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &reqURL, MessageBody: aws.String("x"),
			MessageAttributes: map[string]types.MessageAttributeValue{sqsapi.ResponseQueueURLAttribute: {DataType: aws.String("String"), StringValue: &victim}},
		}); err != nil {
			t.Fatal(err)
		}
		return receive(t, client, reqURL, 1, 10*time.Second)
	}
	fn, err := lambdatempq.NewResponder(client, h, func(o *lambdatempq.Options) { o.QueueURL = qs.url })
	if err != nil {
		t.Fatal(err)
	}
	resp, err := fn.HandleSQSEvent(ctx, lambdatempq.Event(reqARN, request()))
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("refused request: %v %v, want done", resp, err)
	}
	if got := receive(t, client, victim, 1, time.Second); len(got) != 0 || runs.Load() != 0 || fn.Responder().Stats().Dropped != 1 {
		t.Fatalf("refused request: %d replies sent, %d handler runs, stats %+v", len(got), runs.Load(), fn.Responder().Stats())
	}

	wide, err := lambdatempq.NewResponder(client, h, func(o *lambdatempq.Options) {
		o.QueueURL = qs.url
		o.Responder = append(o.Responder, func(o *responder.Options) { o.AllowReplyTo = []string{"tq-"} })
	})
	if err != nil {
		t.Fatal(err)
	}
	if resp, err := wide.HandleSQSEvent(ctx, lambdatempq.Event(reqARN, request())); err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("allowed request: %v %v", resp, err)
	}
	if got := receive(t, client, victim, 1, 10*time.Second); len(got) != 1 || aws.ToString(got[0].Body) != "re: x" {
		t.Fatalf("with AllowReplyTo: replies %v", got)
	}
}
