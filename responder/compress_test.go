package responder

import (
	"context"
	"errors"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/internal/payload"
	"github.com/tempqueues/tempqueues/internal/testkit/observetest"
	"github.com/tempqueues/tempqueues/internal/testkit/sqstestenv"
	"github.com/tempqueues/tempqueues/internal/testkit/testbody"
	"github.com/tempqueues/tempqueues/internal/testkit/testtime"
	"github.com/tempqueues/tempqueues/internal/wire"
	"github.com/tempqueues/tempqueues/observe"
	"github.com/tempqueues/tempqueues/sqsapi"
)

// sendRaw sends a request as a raw SDK send: body, a reply route to
// replyURL, and attrs.
func (e *env) sendRaw(queueURL, body, replyURL string, attrs map[string]types.MessageAttributeValue) {
	e.t.Helper()
	if attrs == nil {
		attrs = map[string]types.MessageAttributeValue{}
	}
	attrs[sqsapi.ResponseQueueURLAttribute] = wire.StringAttribute(replyURL)
	if _, err := e.client.SendMessage(context.Background(), &sqs.SendMessageInput{
		QueueUrl: &queueURL, MessageBody: &body, MessageAttributes: attrs,
	}); err != nil {
		e.t.Fatalf("SendMessage: %v", err)
	}
}

var offer = map[string]types.MessageAttributeValue{payload.AcceptAttribute: wire.StringAttribute("gzip")}

// TestCompressionOnTheWire: a request that offers gzip gets a large reply
// compressed in TempQueues.Body, a Java requester's (no offer) gets it
// plain, and a compressed request reaches the handler plain, without the
// attributes of compression.
func TestCompressionOnTheWire(t *testing.T) {
	t.Parallel()
	sqstestenv.Each(t, func(t *testing.T, be *sqstestenv.Backend) {
		t.Parallel()
		e := newEnv(t, be)
		host := e.replyQueue("host", nil)
		reqQ := e.queue("req", nil)
		r := newResponder(t, e.client, func(o *Options) { o.PollWaitTime = time.Second })
		big := testbody.JSON(200<<10, 1)
		var mu sync.Mutex
		var seen []types.Message
		serve(t, r, reqQ, HandlerFunc(func(_ context.Context, req *Request) (*Reply, error) {
			mu.Lock()
			seen = append(seen, req.Message)
			mu.Unlock()
			return &Reply{Body: big}, nil
		}))

		// A Java requester: no offer, a plain reply.
		e.sendRaw(reqQ, "java", host+"#java", nil)
		got := e.replies(host, 1, 10*time.Second)
		if len(got) != 1 || aws.ToString(got[0].Body) != big || attr(got[0], sqsapi.VirtualQueueNameAttribute) != "java" {
			t.Fatalf("the reply to a Java requester: %d messages", len(got))
		}
		if _, ok := got[0].MessageAttributes[payload.BodyAttribute]; ok {
			t.Fatal("the reply to a Java requester travelled compressed")
		}

		// An offer: the reply travels compressed, in a quarter of its bytes.
		e.sendRaw(reqQ, "go", host+"#go", maps.Clone(offer))
		got = e.replies(host, 1, 10*time.Second)
		if len(got) != 1 {
			t.Fatalf("%d replies to a request that offers gzip", len(got))
		}
		if n := wire.MessageSize(got[0].Body, got[0].MessageAttributes); aws.ToString(got[0].Body) != payload.Placeholder || n > len(big)/3 {
			t.Fatalf("the reply to an offer of gzip travelled in %d bytes, body %.40q", n, aws.ToString(got[0].Body))
		}
		m, accept, err := payload.Decode(got[0])
		if err != nil || aws.ToString(m.Body) != big || accept {
			t.Fatalf("the compressed reply decodes to %d bytes, %v", len(aws.ToString(m.Body)), err)
		}

		// A compressed request: the handler sees it plain.
		attrs := maps.Clone(offer)
		sent, ok := payload.Encode(big, attrs, 2)
		if !ok {
			t.Fatal("the request was not compressed")
		}
		e.sendRaw(reqQ, sent, host+"#compressed", attrs)
		if got = e.replies(host, 1, 10*time.Second); len(got) != 1 {
			t.Fatalf("%d replies to a compressed request", len(got))
		}
		mu.Lock()
		defer mu.Unlock()
		if len(seen) != 3 {
			t.Fatalf("the handler ran %d times", len(seen))
		}
		for _, m := range seen {
			for _, a := range []string{payload.BodyAttribute, payload.AcceptAttribute} {
				if _, ok := m.MessageAttributes[a]; ok {
					t.Errorf("the handler sees %s", a)
				}
			}
		}
		if aws.ToString(seen[2].Body) != big {
			t.Errorf("the handler sees a compressed request's body as %.40q", aws.ToString(seen[2].Body))
		}
	})
}

// TestUnreadableRequestsAreDropped: a request whose compressed body does
// not decompress (not gzip, another codec, a zip bomb past 64 MiB) can
// never be handled: it is deleted unhandled, told as Dropped "malformed",
// and not received again.
func TestUnreadableRequestsAreDropped(t *testing.T) {
	inBubble(t, func(t *testing.T, be *sqstestenv.Backend) {
		e := newEnv(t, be)
		host := e.replyQueue("host", nil)
		reqQ := e.queue("req", map[string]string{"VisibilityTimeout": "5"})
		var rec observetest.Recorder
		r := newResponder(t, e.client, func(o *Options) {
			o.PollWaitTime = time.Second
			o.VisibilityTimeout = 5 * time.Second
			o.Observer = &rec
			o.Logger = testLogger(t)
		})
		serve(t, r, reqQ, HandlerFunc(func(_ context.Context, req *Request) (*Reply, error) {
			t.Errorf("the handler ran for %.40q", req.Body())
			return &Reply{Body: "no"}, nil
		}))
		bomb := map[string]types.MessageAttributeValue{}
		payload.Encode(strings.Repeat("a", payload.MaxInflated), bomb, 1)
		more := map[string]types.MessageAttributeValue{}
		payload.Encode(strings.Repeat("b", payload.Threshold), more, 1)
		z := bomb[payload.BodyAttribute].BinaryValue
		bomb[payload.BodyAttribute] = types.MessageAttributeValue{DataType: aws.String(payload.DataType),
			BinaryValue: append(z[:len(z):len(z)], more[payload.BodyAttribute].BinaryValue...)}
		for name, attrs := range map[string]map[string]types.MessageAttributeValue{
			"not gzip":      {payload.BodyAttribute: {DataType: aws.String(payload.DataType), BinaryValue: []byte("not gzip")}},
			"another codec": {payload.BodyAttribute: {DataType: aws.String("Binary.zstd"), BinaryValue: []byte{1, 2, 3}}},
			"a zip bomb":    bomb,
		} {
			e.sendRaw(reqQ, payload.Placeholder, host+"#"+strings.ReplaceAll(name, " ", "-"), attrs)
		}
		testtime.Until(10*time.Second, func() bool { return r.Stats().Dropped == 3 })
		// Past two visibility timeouts: none comes back.
		testtime.Advance(12 * time.Second)
		s := r.Stats()
		if s.Dropped != 3 || s.Received != 3 || s.Failed != 0 {
			t.Fatalf("stats %+v: want 3 received and dropped, none failed", s)
		}
		if n := rec.Count(observe.Dropped, reasonMalformed); n != 3 {
			t.Errorf("the Observer heard of %d malformed drops, want 3", n)
		}
		if v, f := e.depth(reqQ); v != "0" || f != "0" {
			t.Errorf("request queue: %s visible, %s in flight", v, f)
		}
		if got := e.replies(host, 1, time.Second); len(got) != 0 {
			t.Errorf("%d replies to malformed requests", len(got))
		}
	})
}

// TestLargeRepliesFitCompressed: the 1 MiB limit applies to what is sent.
// A 3 MiB JSON reply to a request that offers gzip goes; without the
// offer, or 3 MiB of base64 (which gzip shrinks by a quarter), or a body
// past what a compressed one may inflate to, it fails before any call.
func TestLargeRepliesFitCompressed(t *testing.T) {
	t.Parallel()
	e := newEnv(t, sqstestenv.SQSTest(t))
	host := e.replyQueue("host", nil)
	reqQ := e.queue("req", nil)
	r := newResponder(t, e.client)
	huge := testbody.JSON(3<<20, 2)
	request := func(attrs map[string]types.MessageAttributeValue) types.Message {
		attrs = maps.Clone(attrs)
		if attrs == nil {
			attrs = map[string]types.MessageAttributeValue{}
		}
		attrs[sqsapi.ResponseQueueURLAttribute] = wire.StringAttribute(host + "#v")
		return types.Message{MessageId: aws.String("m-1"), Body: aws.String("q"), MessageAttributes: attrs}
	}
	sends := func() int64 { c := e.counter.Snapshot(); return c["SendMessage"] + c["SendMessageBatch"] }
	before := sends()
	for name, c := range map[string]struct {
		request types.Message
		body    string
	}{
		"JSON without an offer":   {request(nil), huge},
		"base64 with an offer":    {request(offer), testbody.Random(3<<20, 3)},
		"JSON past what inflates": {request(offer), strings.Repeat("{}", payload.MaxInflated/2+1)},
	} {
		if err := r.SendResponseMessage(context.Background(), reqQ, c.request, &Reply{Body: c.body}); !errors.Is(err, sqsapi.ErrInvalidInput) {
			t.Errorf("%s: %v, want ErrInvalidInput", name, err)
		}
	}
	if n := sends() - before; n != 0 {
		t.Fatalf("%d sends for replies too large", n)
	}
	if err := r.SendResponseMessage(context.Background(), reqQ, request(offer), &Reply{Body: huge}); err != nil {
		t.Fatalf("a 3 MiB JSON reply: %v", err)
	}
	got := e.replies(host, 1, 10*time.Second)
	if len(got) != 1 {
		t.Fatalf("%d replies", len(got))
	}
	m, _, err := payload.Decode(got[0])
	if err != nil || aws.ToString(m.Body) != huge {
		t.Fatalf("the reply decodes to %d bytes, %v", len(aws.ToString(m.Body)), err)
	}
}
