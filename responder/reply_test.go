package responder

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/internal/testkit/sqstestenv"
	"github.com/tempqueues/tempqueues/internal/wire"
	"github.com/tempqueues/tempqueues/sqsapi"
)

func msgWith(attrs map[string]string) types.Message {
	m := types.Message{MessageId: aws.String("mid-1"), Body: aws.String("x"), MessageAttributes: map[string]types.MessageAttributeValue{}}
	for k, v := range attrs {
		m.MessageAttributes[k] = wire.StringAttribute(v)
	}
	return m
}

func nAttrs(n int) map[string]types.MessageAttributeValue {
	a := map[string]types.MessageAttributeValue{}
	for i := range n {
		a[fmt.Sprintf("a%d", i)] = wire.StringAttribute("v")
	}
	return a
}

func TestResponseRequested(t *testing.T) {
	if responseRequested(msgWith(nil)) {
		t.Error("no attribute: want false")
	}
	if responseRequested(msgWith(map[string]string{sqsapi.ResponseQueueURLAttribute: ""})) {
		t.Error("empty attribute: want false")
	}
	if !responseRequested(msgWith(map[string]string{sqsapi.ResponseQueueURLAttribute: "http://h/1/q#v"})) {
		t.Error("attribute set: want true")
	}
}

func TestBuildReplyWireFormat(t *testing.T) {
	const host = "http://127.0.0.1:1/000000000000/host"
	req := msgWith(map[string]string{sqsapi.ResponseQueueURLAttribute: host + "#vq", sqsapi.RequestIDAttribute: "rid"})
	target, e, err := buildReply(req, &Reply{Body: "b", Attributes: nAttrs(8)}, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	if target != host || attr(types.Message{MessageAttributes: e.MessageAttributes}, sqsapi.VirtualQueueNameAttribute) != "vq" ||
		*e.MessageAttributes[sqsapi.CorrelationIDAttribute].StringValue != "rid" || len(e.MessageAttributes) != 10 {
		t.Fatalf("reply to virtual queue: target %q attrs %v", target, keys(e.MessageAttributes))
	}
	// No request id: the MessageId correlates; a plain URL gets no routing.
	req = msgWith(map[string]string{sqsapi.ResponseQueueURLAttribute: host})
	target, e, err = buildReply(req, &Reply{Body: "b"}, nil, false)
	if err != nil || target != host || len(e.MessageAttributes) != 1 || *e.MessageAttributes[sqsapi.CorrelationIDAttribute].StringValue != "mid-1" {
		t.Fatalf("reply to plain queue: %q %v %v", target, keys(e.MessageAttributes), err)
	}
}

func TestSendResponseMessageBadInputMakesNoCall(t *testing.T) {
	sqstestenv.Each(t, func(t *testing.T, be *sqstestenv.Backend) {
		e := newEnv(t, be)
		r := newResponder(t, e.client)
		ctx := context.Background()
		const requests = "http://127.0.0.1:1/000000000000/requests"
		const host = "http://127.0.0.1:1/000000000000/" + sqsapi.DefaultQueuePrefix + "host"
		virtual := msgWith(map[string]string{sqsapi.ResponseQueueURLAttribute: host + "#vq"})
		cases := []struct {
			name  string
			req   types.Message
			reply *Reply
		}{
			{"malformed virtual URL", msgWith(map[string]string{sqsapi.ResponseQueueURLAttribute: host + "#bad name"}), &Reply{Body: "b"}},
			{"virtual URL without host", msgWith(map[string]string{sqsapi.ResponseQueueURLAttribute: "#vq"}), &Reply{Body: "b"}},
			{"relative URL", msgWith(map[string]string{sqsapi.ResponseQueueURLAttribute: "queue-name"}), &Reply{Body: "b"}},
			{"too many attributes with ours", virtual, &Reply{Body: "b", Attributes: nAttrs(9)}},
			{"reserved attribute", virtual, &Reply{Body: "b", Attributes: map[string]types.MessageAttributeValue{sqsapi.CorrelationIDAttribute: wire.StringAttribute("x")}}},
			{"attribute without type", virtual, &Reply{Body: "b", Attributes: map[string]types.MessageAttributeValue{"k": {StringValue: aws.String("v")}}}},
			{"empty body", virtual, &Reply{}},
			{"nil reply", virtual, nil},
			{"oversized", virtual, &Reply{Body: strings.Repeat("x", sqsapi.MaxMessageSize)}},
			{"NUL in body", virtual, &Reply{Body: "a\x00"}},
			{"U+FFFF body", virtual, &Reply{Body: "\uffff"}},
			{"invalid UTF-8 body", virtual, &Reply{Body: "\xff"}},
			{"bad attribute value", virtual, &Reply{Body: "b", Attributes: map[string]types.MessageAttributeValue{"k": wire.StringAttribute("\x00")}}},
		}
		for _, c := range cases {
			err := r.SendResponseMessage(ctx, requests, c.req, c.reply)
			var ie *sqsapi.InvalidInputError
			if !errors.As(err, &ie) || !errors.Is(err, sqsapi.ErrInvalidInput) || ie.Op != opSendResponse {
				t.Errorf("%s: err = %v, want *InvalidInputError from %s", c.name, err, opSendResponse)
			}
		}
		if err := r.SendResponseMessage(ctx, requests, msgWith(nil), &Reply{Body: "b"}); !errors.Is(err, ErrNoResponseRequested) {
			t.Errorf("no ResponseQueueUrl: err = %v, want ErrNoResponseRequested", err)
		}
		if n := e.counter.Total(); n != 0 {
			t.Errorf("%d API calls for rejected replies, want 0: %v", n, e.counter.Snapshot())
		}
	})
}

func TestReplyToDeletedQueueDroppedOnce(t *testing.T) {
	t.Parallel()
	sqstestenv.Each(t, func(t *testing.T, be *sqstestenv.Backend) {
		t.Parallel()
		e := newEnv(t, be)
		ctx := context.Background()
		host := e.replyQueue("host", nil)
		if _, err := e.client.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: &host}); err != nil {
			t.Fatal(err)
		}
		r := newResponder(t, e.client, func(o *Options) { o.PollWaitTime = time.Second })
		e.counter.Reset()
		req := msgWith(map[string]string{sqsapi.ResponseQueueURLAttribute: host + "#gone", sqsapi.RequestIDAttribute: "rid"})
		err := r.SendResponseMessage(ctx, host, req, &Reply{Body: "late"})
		var qdne *types.QueueDoesNotExist
		if !errors.Is(err, ErrResponseQueueGone) || !errors.As(err, &qdne) {
			t.Fatalf("err = %v, want ErrResponseQueueGone wrapping *types.QueueDoesNotExist", err)
		}
		if n := e.counter.Total(); n != 1 {
			t.Errorf("%d calls (%v), want 1 send and no retry loop", n, e.counter.Snapshot())
		}
		if s := r.Stats(); s.Dropped != 0 || s.Errors != 0 {
			t.Errorf("stats %+v, want nothing counted: the caller has the error", s)
		}

		// Through Serve: the request is handled, the reply dropped once, the
		// request deleted (the requester is gone; retrying cannot help).
		reqQ := e.queue("req", map[string]string{"VisibilityTimeout": "1"})
		e.request(reqQ, "hello", host+"#gone", "rid-2")
		serve(t, r, reqQ, echo)
		waitFor(t, "request deleted", func() bool { return r.stats.Deleted.Load() == 1 })
		if s := r.Stats(); s.Dropped != 1 || s.Handled != 1 {
			t.Errorf("stats %+v, want 1 dropped and 1 handled", s)
		}
		if v, inflight := e.depth(reqQ); v != "0" || inflight != "0" {
			t.Errorf("request queue holds %s visible, %s in flight; want empty", v, inflight)
		}
	})
}
