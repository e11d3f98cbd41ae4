package responder

import (
	"context"
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/sqsapi"
)

func TestStreamedReplyAttributeBudget(t *testing.T) {
	req := msgWith(map[string]string{
		sqsapi.ResponseQueueURLAttribute: "https://sqs.us-east-1.amazonaws.com/1/host#r1",
		sqsapi.StreamAttribute:           "1",
	})
	more := map[string]string{sqsapi.StreamAttribute: "4;final"}
	// Routing, correlation and stream attributes leave 7 for the reply.
	_, entry, err := buildReply(req, &Reply{Body: "ok", Attributes: nAttrs(7)}, more, false)
	if err != nil {
		t.Fatal(err)
	}
	if got := aws.ToString(entry.MessageAttributes[sqsapi.StreamAttribute].StringValue); got != "4;final" || len(entry.MessageAttributes) != 10 {
		t.Errorf("stream attribute %q, %d attributes", got, len(entry.MessageAttributes))
	}
	if _, _, err := buildReply(req, &Reply{Body: "ok", Attributes: nAttrs(8)}, more, false); !errors.Is(err, sqsapi.ErrInvalidInput) {
		t.Errorf("8 attributes in a streamed reply: %v", err)
	}
	if _, _, err := buildReply(req, &Reply{Body: "ok", Attributes: map[string]types.MessageAttributeValue{sqsapi.StreamAttribute: nAttrs(1)["a0"]}}, more, false); !errors.Is(err, sqsapi.ErrInvalidInput) {
		t.Errorf("the reply's own %s: %v", sqsapi.StreamAttribute, err)
	}
}

func TestSendWithoutAStream(t *testing.T) {
	ctx := context.Background()
	one := &Request{Message: msgWith(map[string]string{sqsapi.ResponseQueueURLAttribute: "https://sqs.us-east-1.amazonaws.com/1/q"})}
	if err := one.Send(ctx, &Reply{Body: "x"}); !errors.Is(err, ErrStreamNotRequested) {
		t.Errorf("Send to a one-reply requester: %v", err)
	}
	none := &Request{Message: msgWith(nil)}
	if err := none.Send(ctx, &Reply{Body: "x"}); !errors.Is(err, ErrNoResponseRequested) {
		t.Errorf("Send to a fire-and-forget request: %v", err)
	}
	r := &Responder{}
	s := r.newReplyStream(&Request{Message: msgWith(map[string]string{
		sqsapi.ResponseQueueURLAttribute: "https://sqs.us-east-1.amazonaws.com/1/q", sqsapi.StreamAttribute: "1",
	})})
	if s == nil {
		t.Fatal("no stream for a request that asks for one")
	}
	if reply, final := s.end(nil); final[sqsapi.StreamAttribute] != "0;end" || reply == nil || reply.Body == "" {
		t.Errorf("end of an empty stream without a final reply: %v, %v", reply, final)
	}
	if reply, final := s.end(&Reply{Body: "done"}); final[sqsapi.StreamAttribute] != "0;final" || reply.Body != "done" {
		t.Errorf("end of an empty stream with a final reply: %v, %v", reply, final)
	}
	if err := s.send(ctx, &Reply{Body: "late"}); !errors.Is(err, sqsapi.ErrClosed) {
		t.Errorf("Send after the handler returned: %v", err)
	}
}
