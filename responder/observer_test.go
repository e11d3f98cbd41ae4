package responder

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/internal/testkit/sqstestenv"
	"github.com/tempqueues/tempqueues/internal/testkit/testtime"
	"github.com/tempqueues/tempqueues/internal/wire"
	"github.com/tempqueues/tempqueues/observe"
	"github.com/tempqueues/tempqueues/sqsapi"
)

const testTraceHeader = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"

func traceHeaderOf(v string) map[string]types.MessageSystemAttributeValue {
	return map[string]types.MessageSystemAttributeValue{
		string(types.MessageSystemAttributeNameForSendsAWSTraceHeader): {DataType: aws.String("String"), StringValue: aws.String(v)},
	}
}

func TestReplySystemAttributes(t *testing.T) {
	req := msgWith(map[string]string{sqsapi.ResponseQueueURLAttribute: "https://sqs.us-east-1.amazonaws.com/1/host#r1"})
	// Beside 8 attributes of its own: system attributes do not count.
	_, entry, err := buildReply(req, &Reply{Body: "ok", Attributes: nAttrs(8), SystemAttributes: traceHeaderOf(testTraceHeader)}, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	if got := aws.ToString(entry.MessageSystemAttributes["AWSTraceHeader"].StringValue); got != testTraceHeader {
		t.Errorf("entry's AWSTraceHeader %q", got)
	}
	for name, sys := range map[string]map[string]types.MessageSystemAttributeValue{
		"empty header": traceHeaderOf(""),
		"other name":   {"SenderId": {DataType: aws.String("String"), StringValue: aws.String("x")}},
		"binary":       {"AWSTraceHeader": {DataType: aws.String("Binary"), BinaryValue: []byte("x")}},
	} {
		if _, _, err := buildReply(req, &Reply{Body: "ok", SystemAttributes: sys}, nil, false); !errors.Is(err, sqsapi.ErrInvalidInput) {
			t.Errorf("%s: %v, want ErrInvalidInput", name, err)
		}
	}
}

type ctxKey struct{}

// hookRecord is what an Observer saw of Reply events.
type hookRecord struct {
	mu     sync.Mutex
	bodies []string
	values []any   // ctx's ctxKey value per call
	errs   []error // done's argument per call, in the order done ran

	propagated []bool // whether the observer's ctx was the propagator's
	rooms      []int  // the propagator's room per call
}

// propagator adds sys to each reply's system attributes and notes the
// room it was given.
func (h *hookRecord) propagator(sys map[string]types.MessageSystemAttributeValue) observe.Propagator {
	return propagatorFunc(func(ctx context.Context, e observe.Event, _ map[string]types.MessageAttributeValue, out map[string]types.MessageSystemAttributeValue, room int) context.Context {
		if e.Kind != observe.Reply {
			panic("a propagator called for " + e.Kind.String())
		}
		h.mu.Lock()
		h.rooms = append(h.rooms, room)
		h.mu.Unlock()
		maps.Copy(out, sys)
		return context.WithValue(ctx, propagatedKey{}, true)
	})
}

// observer records the Reply events it is told of, and changes all it is
// given: the message, the request and the attributes, none of which may
// reach the wire.
func (h *hookRecord) observer() observe.Observer {
	return observe.Func(func(ctx context.Context, e observe.Event) func(*types.Message, error) {
		if e.Kind != observe.Reply {
			return nil
		}
		req, ok := e.Detail.(*Request)
		if !ok {
			panic("a Reply event without its request")
		}
		h.mu.Lock()
		h.bodies = append(h.bodies, aws.ToString(e.Message.Body))
		h.values = append(h.values, ctx.Value(ctxKey{}))
		h.propagated = append(h.propagated, ctx.Value(propagatedKey{}) == true)
		h.mu.Unlock()
		*e.Message.Body = "changed"
		if e.Message.MessageAttributes != nil { // nil when the reply has none
			e.Message.MessageAttributes["observer"] = wire.StringAttribute("yes")
		}
		for k, v := range req.Message.MessageAttributes {
			*v.StringValue = "changed"
			req.Message.MessageAttributes[k] = v
		}
		if err := req.Send(ctx, &Reply{Body: "from the observer"}); err == nil {
			panic("an observer sent on its request's copy")
		}
		return func(_ *types.Message, err error) {
			h.mu.Lock()
			h.errs = append(h.errs, err)
			h.mu.Unlock()
		}
	})
}

// propagatorFunc makes an observe.Propagator of a function.
type propagatorFunc func(ctx context.Context, e observe.Event, attrs map[string]types.MessageAttributeValue, sys map[string]types.MessageSystemAttributeValue, room int) context.Context

func (f propagatorFunc) Inject(ctx context.Context, e observe.Event, attrs map[string]types.MessageAttributeValue, sys map[string]types.MessageSystemAttributeValue, room int) context.Context {
	return f(ctx, e, attrs, sys, room)
}

type propagatedKey struct{}

// The propagator and the observer see each reply Serve sends, final and
// streamed, under the handler's context, before its check; what the
// propagator adds goes on the wire, what the observer changes does not,
// and its done function gets each send's result. A stream's end mark is
// no reply of the handler's: neither hook sees it.
func TestObserverReplyInServe(t *testing.T) {
	e := newEnv(t, sqstestenv.SQSTest(t))
	q := e.queue("onreply", nil)
	replies := e.replyQueue("onreply-replies", nil)
	var rec hookRecord
	r := newResponder(t, e.client, func(o *Options) {
		o.PollWaitTime = time.Second
		o.Middleware = []func(Handler) Handler{func(next Handler) Handler {
			return HandlerFunc(func(ctx context.Context, req *Request) (*Reply, error) {
				return next.HandleRequest(context.WithValue(ctx, ctxKey{}, "mw"), req)
			})
		}}
		o.Propagator = rec.propagator(traceHeaderOf(testTraceHeader))
		o.Observer = rec.observer()
	})
	serve(t, r, q, HandlerFunc(func(ctx context.Context, req *Request) (*Reply, error) {
		if err := req.Send(ctx, &Reply{Body: req.Body() + "-s0"}); err != nil {
			return nil, err
		}
		if req.Body() == "open" {
			return nil, nil // the end mark ends the stream
		}
		return &Reply{Body: req.Body() + "-final"}, nil
	}))
	for _, body := range []string{"a", "open"} {
		if _, err := e.client.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: &q, MessageBody: aws.String(body),
			MessageAttributes: map[string]types.MessageAttributeValue{
				sqsapi.ResponseQueueURLAttribute: wire.StringAttribute(replies),
				sqsapi.RequestIDAttribute:        wire.StringAttribute("id-" + body),
				sqsapi.StreamAttribute:           wire.StringAttribute("1"),
			}}); err != nil {
			t.Fatal(err)
		}
	}
	var got []types.Message
	deadline := time.Now().Add(10 * time.Second)
	for len(got) < 4 && time.Now().Before(deadline) {
		out, err := e.client.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: &replies, MaxNumberOfMessages: 10, WaitTimeSeconds: 1,
			MessageAttributeNames: []string{"All"}, MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAWSTraceHeader}})
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, out.Messages...)
	}
	if len(got) != 4 {
		t.Fatalf("got %d replies, want 4 (two streamed, one final, one end mark)", len(got))
	}
	var traced []string
	for _, m := range got {
		if _, ok := m.MessageAttributes["observer"]; ok || aws.ToString(m.Body) == "changed" {
			t.Errorf("reply %q carries the observer's changes: %v", aws.ToString(m.Body), m.MessageAttributes)
		}
		if m.Attributes["AWSTraceHeader"] == testTraceHeader {
			traced = append(traced, aws.ToString(m.Body))
		}
	}
	slices.Sort(traced)
	if want := []string{"a-final", "a-s0", "open-s0"}; !slices.Equal(traced, want) {
		t.Errorf("replies carrying the hook's AWSTraceHeader: %v, want %v", traced, want)
	}
	// done runs after the send, which may come after the reply arrived.
	testtime.Until(5*time.Second, func() bool {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		return len(rec.errs) >= 3
	})
	rec.mu.Lock()
	defer rec.mu.Unlock()
	slices.Sort(rec.bodies)
	if want := []string{"a-final", "a-s0", "open-s0"}; !slices.Equal(rec.bodies, want) {
		t.Errorf("hook saw %v, want %v", rec.bodies, want)
	}
	for i, v := range rec.values {
		if v != "mw" || !rec.propagated[i] {
			t.Errorf("hook call %d: context value %v, propagated %v; want the middleware's, through the propagator", i, v, rec.propagated[i])
		}
	}
	// 10 less the correlation id, a stream's sequence number (the request
	// asks for a stream); the reply queue is no virtual queue.
	if !slices.Equal(rec.rooms, []int{8, 8, 8}) {
		t.Errorf("propagator's rooms %v, want [8 8 8]", rec.rooms)
	}
	if len(rec.errs) != 3 || rec.errs[0] != nil || rec.errs[1] != nil || rec.errs[2] != nil {
		t.Errorf("done got %v, want three nil", rec.errs)
	}
}

// What the propagator adds is checked before any call: a bad system
// attribute fails the request, and the observer's done gets the error.
func TestObserverReplyCheckedBeforeSend(t *testing.T) {
	e := newEnv(t, sqstestenv.SQSTest(t))
	q := e.queue("onreply-bad", nil)
	replies := e.replyQueue("onreply-bad-replies", nil)
	var rec hookRecord
	r := newResponder(t, e.client, func(o *Options) {
		o.Propagator = rec.propagator(map[string]types.MessageSystemAttributeValue{"SenderId": {DataType: aws.String("String"), StringValue: aws.String("x")}})
		o.Observer = rec.observer()
	})
	m := msgWith(map[string]string{sqsapi.ResponseQueueURLAttribute: replies})
	err := r.Process(context.Background(), q, m, HandlerFunc(func(context.Context, *Request) (*Reply, error) {
		return &Reply{Body: "ok"}, nil
	}))
	var re *RetryError
	if !errors.As(err, &re) || !errors.Is(err, sqsapi.ErrInvalidInput) {
		t.Fatalf("Process = %v, want a *RetryError for invalid input", err)
	}
	if len(rec.errs) != 1 || !errors.Is(rec.errs[0], sqsapi.ErrInvalidInput) {
		t.Errorf("done got %v, want the check's error", rec.errs)
	}
	if got := e.replies(replies, 1, time.Second); len(got) != 0 {
		t.Errorf("%d replies sent, want none", len(got))
	}
}

// A middleware that answers without the handler: the hook gets the
// context the middleware got, values included.
func TestObserverReplyWithoutHandler(t *testing.T) {
	e := newEnv(t, sqstestenv.SQSTest(t))
	q := e.queue("onreply-mw", nil)
	replies := e.replyQueue("onreply-mw-replies", nil)
	var rec hookRecord
	r := newResponder(t, e.client, func(o *Options) {
		o.Observer = rec.observer()
		o.Middleware = []func(Handler) Handler{func(Handler) Handler {
			return HandlerFunc(func(context.Context, *Request) (*Reply, error) { return &Reply{Body: "cached"}, nil })
		}}
	})
	m := msgWith(map[string]string{sqsapi.ResponseQueueURLAttribute: replies})
	ctx := context.WithValue(context.Background(), ctxKey{}, "outer")
	if err := r.Process(ctx, q, m, HandlerFunc(func(context.Context, *Request) (*Reply, error) {
		t.Error("the handler ran")
		return nil, nil
	})); err != nil {
		t.Fatal(err)
	}
	if len(rec.values) != 1 || rec.values[0] != "outer" || len(rec.errs) != 1 || rec.errs[0] != nil {
		t.Errorf("hook saw values %v, done %v; want [outer], [nil]", rec.values, rec.errs)
	}
	if got := e.replies(replies, 1, 5*time.Second); len(got) != 1 || aws.ToString(got[0].Body) != "cached" {
		t.Errorf("replies %v, want the middleware's", got)
	}
}
