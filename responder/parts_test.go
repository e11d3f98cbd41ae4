package responder

import (
	"context"
	"errors"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/internal/payload"
	"github.com/tempqueues/tempqueues/internal/testkit/memstore"
	"github.com/tempqueues/tempqueues/internal/testkit/sqstestenv"
	"github.com/tempqueues/tempqueues/internal/testkit/testbody"
	"github.com/tempqueues/tempqueues/internal/wire"
	"github.com/tempqueues/tempqueues/sqsapi"
)

// join joins the parts of a reply as a requester does, failing the test
// on a message that is no part.
func join(t *testing.T, msgs []types.Message) (string, types.Message) {
	t.Helper()
	var j payload.Joiner
	var last types.Message
	for _, m := range msgs {
		pos, ok := wire.StreamOf(m)
		if !ok {
			t.Fatalf("a message that is no part: %.60q", aws.ToString(m.Body))
		}
		d, _, err := payload.Decode(m)
		if err != nil {
			t.Fatal(err)
		}
		if pos.Mark == wire.MarkFinal {
			last = d
		}
		if done, err := j.Add(pos.Seq, pos.Mark == wire.MarkFinal, aws.ToString(d.Body)); err != nil || done {
			if err != nil {
				t.Fatal(err)
			}
			return j.Body(), last
		}
	}
	t.Fatalf("%d parts, the reply incomplete", len(msgs))
	return "", last
}

// TestRepliesInParts: a reply too large for one message even compressed,
// to a request that offers parts, goes in parts (compressed each when the
// request offers gzip too) that join byte-exact, its attributes on the
// last; with a PayloadStore it goes to the store instead; over the
// limit it fails before any part, and the requester hears of it.
func TestRepliesInParts(t *testing.T) {
	t.Parallel()
	e := newEnv(t, sqstestenv.SQSTest(t))
	host := e.replyQueue("host", nil)
	reqQ := e.queue("req", nil)
	r := newResponder(t, e.client)
	stored := newResponder(t, e.client, func(o *Options) { o.PayloadStore = memstore.New("tq-parts") })
	request := func(offer string) types.Message {
		return types.Message{MessageId: aws.String("m-1"), Body: aws.String("q"), MessageAttributes: map[string]types.MessageAttributeValue{
			sqsapi.ResponseQueueURLAttribute: wire.StringAttribute(host + "#v"),
			payload.AcceptAttribute:          wire.StringAttribute(offer),
		}}
	}
	body := testbody.Random(3<<20, 11)
	attrs := map[string]types.MessageAttributeValue{"kind": wire.StringAttribute("report")}
	for _, offer := range []string{"gzip,parts", "parts"} {
		if err := r.SendResponseMessage(context.Background(), reqQ, request(offer), &Reply{Body: body, Attributes: maps.Clone(attrs)}); err != nil {
			t.Fatalf("%s: %v", offer, err)
		}
		const want = 4 // 3 MiB cut in pieces of 1 MiB less the attributes
		msgs := e.replies(host, want, 10*time.Second)
		if len(msgs) != want {
			t.Fatalf("%s: %d parts, want %d", offer, len(msgs), want)
		}
		compressed := 0
		for _, m := range msgs {
			if _, ok := m.MessageAttributes[payload.BodyAttribute]; ok {
				compressed++
			}
		}
		if offer == "parts" && compressed > 0 || offer != "parts" && compressed < want-1 { // the last, small, may go plain
			t.Errorf("%s: %d of %d parts compressed", offer, compressed, want)
		}
		got, last := join(t, msgs)
		if got != body {
			t.Fatalf("%s: joined %d bytes, not the %d sent", offer, len(got), len(body))
		}
		if v := last.MessageAttributes["kind"]; aws.ToString(v.StringValue) != "report" {
			t.Errorf("%s: the last part lacks the reply's attribute", offer)
		}
	}

	if err := stored.SendResponseMessage(context.Background(), reqQ, request("gzip,parts"), &Reply{Body: body}); err != nil {
		t.Fatal(err)
	}
	msgs := e.replies(host, 1, 10*time.Second)
	if _, ok := payload.ParsePointer(msgs[0]); len(msgs) != 1 || !ok {
		t.Fatalf("with a store: %d messages, the first %.60q; want one pointer", len(msgs), aws.ToString(msgs[0].Body))
	}

	err := r.SendResponseMessage(context.Background(), reqQ, request("gzip,parts"), &Reply{Body: strings.Repeat("x", payload.MaxJoined+1)})
	if !errors.Is(err, sqsapi.ErrInvalidInput) || !strings.Contains(err.Error(), "64 MiB") {
		t.Fatalf("over the limit: %v, want ErrInvalidInput naming it", err)
	}
	msgs = e.replies(host, 1, 10*time.Second)
	if len(msgs) != 1 {
		t.Fatalf("over the limit: %d messages, want the abort alone", len(msgs))
	}
	if c, isControl, ok := wire.ControlOf(msgs[0]); !isControl || !ok || c.Verb != wire.ControlAbort || !strings.Contains(c.Reason, "64 MiB") {
		t.Errorf("over the limit: the requester got %+v, want an abort naming the limit", c)
	}
}
