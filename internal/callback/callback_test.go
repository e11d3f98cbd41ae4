package callback

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/observe"
)

func TestRunRecoversAndLogs(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	if Run(log, "the hook", func() { panic("boom") }) != true {
		t.Fatal("a panic was not reported")
	}
	if !strings.Contains(buf.String(), "the hook panicked") || !strings.Contains(buf.String(), "boom") {
		t.Fatalf("log %q does not name the hook and the panic", buf.String())
	}
	ran := false
	if Run(nil, "quiet", func() { ran = true }) || !ran {
		t.Fatal("a normal call was reported as a panic, or did not run")
	}
	if !Run(nil, "nil logger", func() { panic(1) }) {
		t.Fatal("a panic with a nil logger was not reported")
	}
}

func TestObserveIsSafe(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	Observe(context.Background(), log, nil, observe.Event{Kind: observe.Send})(nil, nil) // nil observer: a no-op done
	var order []string
	o := observe.Func(func(_ context.Context, e observe.Event) func(*types.Message, error) {
		order = append(order, "observe")
		return func(*types.Message, error) { order = append(order, "done"); panic("in done") }
	})
	Observe(context.Background(), log, o, observe.Event{Kind: observe.Reply})(nil, nil)
	if strings.Join(order, ",") != "observe,done" || !strings.Contains(buf.String(), "observer's done (reply) panicked") {
		t.Fatalf("calls %v, log %q", order, buf.String())
	}
	buf.Reset()
	bad := observe.Func(func(context.Context, observe.Event) func(*types.Message, error) { panic("in observe") })
	Observe(context.Background(), log, bad, observe.Event{Kind: observe.Dropped})(nil, nil)
	if !strings.Contains(buf.String(), "observer (dropped) panicked") {
		t.Fatalf("log %q does not report the observer's panic", buf.String())
	}
}

// A change made through a copy, to any field, map or pointed-to value,
// leaves the original as it was.
func TestCopyMessageIsDeep(t *testing.T) {
	str := func(s string) *string { return &s }
	m := &types.Message{
		Body: str("body"), MessageId: str("id"), ReceiptHandle: str("rh"),
		Attributes: map[string]string{"SentTimestamp": "1"},
		MessageAttributes: map[string]types.MessageAttributeValue{
			"s": {DataType: str("String"), StringValue: str("v")},
			"b": {DataType: str("Binary"), BinaryValue: []byte("x"), BinaryListValues: [][]byte{[]byte("y")}, StringListValues: []string{"z"}},
		},
	}
	c := CopyMessage(m)
	*c.Body, *c.MessageId, *c.ReceiptHandle = "changed", "changed", "changed"
	c.Attributes["SentTimestamp"] = "2"
	*c.MessageAttributes["s"].StringValue = "changed"
	*c.MessageAttributes["s"].DataType = "changed"
	c.MessageAttributes["b"].BinaryValue[0] = 'X'
	c.MessageAttributes["b"].BinaryListValues[0][0] = 'Y'
	c.MessageAttributes["b"].StringListValues[0] = "Z"
	c.MessageAttributes["new"] = types.MessageAttributeValue{}
	if *m.Body != "body" || *m.MessageId != "id" || *m.ReceiptHandle != "rh" || m.Attributes["SentTimestamp"] != "1" ||
		*m.MessageAttributes["s"].StringValue != "v" || *m.MessageAttributes["s"].DataType != "String" ||
		string(m.MessageAttributes["b"].BinaryValue) != "x" || string(m.MessageAttributes["b"].BinaryListValues[0]) != "y" ||
		m.MessageAttributes["b"].StringListValues[0] != "z" || len(m.MessageAttributes) != 2 {
		t.Fatalf("the original changed through its copy: %+v", m)
	}
	if CopyMessage(nil) != nil {
		t.Fatal("a copy of nil is not nil")
	}
}

// A panicking Propagator is recovered and logged; the context stays the
// caller's, as it does when the Propagator returns nil.
func TestInjectIsSafe(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	ctx := context.WithValue(context.Background(), callerKey{}, "caller")
	attrs := map[string]types.MessageAttributeValue{}
	if got := Inject(ctx, log, panicky{}, observe.Event{Kind: observe.Send}, attrs, nil, 3); got != ctx {
		t.Error("a panicking propagator changed the context")
	}
	if !strings.Contains(buf.String(), "propagator (send) panicked") {
		t.Errorf("log %q does not name the propagator", buf.String())
	}
	if got := Inject(ctx, log, nilCtx{}, observe.Event{Kind: observe.Reply}, attrs, nil, -2); got != ctx {
		t.Error("a propagator returning nil left no context")
	}
	if Inject(ctx, log, nil, observe.Event{}, attrs, nil, 1) != ctx {
		t.Error("a nil propagator changed the context")
	}
}

type callerKey struct{}

type panicky struct{}

func (panicky) Inject(context.Context, observe.Event, map[string]types.MessageAttributeValue, map[string]types.MessageSystemAttributeValue, int) context.Context {
	panic("boom")
}

type nilCtx struct{}

func (nilCtx) Inject(_ context.Context, _ observe.Event, _ map[string]types.MessageAttributeValue, _ map[string]types.MessageSystemAttributeValue, room int) context.Context {
	if room != 0 {
		panic("a negative room was not given as 0")
	}
	return nil
}
