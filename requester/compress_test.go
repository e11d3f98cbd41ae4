package requester_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/internal/payload"
	"github.com/tempqueues/tempqueues/internal/testkit/sqstestenv"
	"github.com/tempqueues/tempqueues/internal/testkit/testbody"
	"github.com/tempqueues/tempqueues/internal/wire"
	"github.com/tempqueues/tempqueues/requester"
	"github.com/tempqueues/tempqueues/responder"
	"github.com/tempqueues/tempqueues/sqsapi"
)

// wireTap is a requester's client that keeps what went on the wire: every
// message the requester sent, and every message its host queue's
// receives returned, as SQS had them.
type wireTap struct {
	sqsapi.Client

	mu       sync.Mutex
	sent     []types.SendMessageBatchRequestEntry
	received []types.Message
}

func (w *wireTap) SendMessage(ctx context.Context, in *sqs.SendMessageInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	w.mu.Lock()
	w.sent = append(w.sent, types.SendMessageBatchRequestEntry{MessageBody: in.MessageBody, MessageAttributes: in.MessageAttributes})
	w.mu.Unlock()
	return w.Client.SendMessage(ctx, in, optFns...)
}

func (w *wireTap) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	w.mu.Lock()
	w.sent = append(w.sent, in.Entries...)
	w.mu.Unlock()
	return w.Client.SendMessageBatch(ctx, in, optFns...)
}

func (w *wireTap) ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, optFns ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	out, err := w.Client.ReceiveMessage(ctx, in, optFns...)
	if err == nil {
		w.mu.Lock()
		w.received = append(w.received, out.Messages...)
		w.mu.Unlock()
	}
	return out, err
}

// sends returns the messages sent so far and forgets them.
func (w *wireTap) sends() []types.SendMessageBatchRequestEntry {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.sent
	w.sent = nil
	return s
}

// receives returns the messages received so far and forgets them.
func (w *wireTap) receives() []types.Message {
	w.mu.Lock()
	defer w.mu.Unlock()
	r := w.received
	w.received = nil
	return r
}

// tapped returns a requester over a wireTap of e's client.
func (e *env) tapped(t *testing.T, optFns ...func(*requester.Options)) (*requester.Requester, *wireTap) {
	t.Helper()
	tap := &wireTap{Client: e.raw}
	return requesterVia(t, e, tap, optFns...), tap
}

// chunks is what SQS bills for a message of n bytes: each started 64 KiB.
func chunks(n int) int { return (n + 64<<10 - 1) / (64 << 10) }

// checkCarried fails unless m, as it went on the wire, carries a body of
// plain bytes compressed, billed as fewer chunks than plain.
func checkCarried(t *testing.T, what string, m types.Message, plain int) {
	t.Helper()
	v, ok := m.MessageAttributes[payload.BodyAttribute]
	if !ok || aws.ToString(v.DataType) != "Binary.gzip" || aws.ToString(m.Body) != payload.Placeholder {
		t.Fatalf("%s on the wire: body %.40q, attributes %v: not compressed", what, aws.ToString(m.Body), keys(m.MessageAttributes))
	}
	n := wire.MessageSize(m.Body, m.MessageAttributes)
	if n > plain/3 || chunks(n) >= chunks(plain) {
		t.Errorf("%s: %d bytes plain travel in %d (%d billed chunks, %d plain)", what, plain, n, chunks(n), chunks(plain))
	}
}

// checkPlain fails when m, as the user sees it, is not body, or carries
// the attributes of compression.
func checkPlain(t *testing.T, what string, m *types.Message, body string) {
	t.Helper()
	if got := aws.ToString(m.Body); got != body {
		t.Fatalf("%s: body of %d bytes %.40q, want %d bytes %.40q", what, len(got), got, len(body), body)
	}
	for _, a := range []string{payload.BodyAttribute, payload.AcceptAttribute} {
		if _, ok := m.MessageAttributes[a]; ok {
			t.Errorf("%s carries %s", what, a)
		}
	}
}

func keys(m map[string]types.MessageAttributeValue) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}

// TestCompressedReplies: a requester offers compressed replies on each
// request, and a responder sends a large reply, and each message of a
// large stream, compressed on the wire: fewer bytes and billed chunks.
// The caller sees the plain bodies.
func TestCompressedReplies(t *testing.T) {
	t.Parallel()
	sqstestenv.Each(t, func(t *testing.T, b *sqstestenv.Backend) {
		e := newEnv(t, b)
		big := testbody.JSON(200<<10, 1)
		serve(t, e.raw, func(ctx context.Context, req *responder.Request) (*responder.Reply, error) {
			if _, ok := req.Message.MessageAttributes[payload.AcceptAttribute]; ok {
				t.Errorf("the handler sees %s", payload.AcceptAttribute)
			}
			if req.Body() == "stream" {
				for i := range 2 {
					if err := req.Send(ctx, &responder.Reply{Body: big[i:]}); err != nil {
						return nil, err
					}
				}
			}
			return &responder.Reply{Body: big}, nil
		}, e.queue)
		r, tap := e.tapped(t)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()

		m, err := r.SendMessageAndGetResponse(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(e.queue), MessageBody: aws.String("call")})
		if err != nil {
			t.Fatal(err)
		}
		checkPlain(t, "the reply", m, big)
		sent := tap.sends()
		if len(sent) != 1 || !payload.Accepts(sent[0].MessageAttributes) {
			t.Fatalf("requests sent %v, want one offering gzip", sent)
		}
		got := tap.receives()
		if len(got) != 1 {
			t.Fatalf("%d messages received, want the reply", len(got))
		}
		checkCarried(t, "the reply", got[0], len(big))

		s, err := r.SendMessageAndStream(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(e.queue), MessageBody: aws.String("stream")})
		if err != nil {
			t.Fatal(err)
		}
		for i, want := range []string{big, big[1:], big} {
			m, err := s.Next(ctx)
			if err != nil {
				t.Fatalf("reply %d: %v", i, err)
			}
			checkPlain(t, "a streamed reply", m, want)
		}
		if _, err := s.Next(ctx); !errors.Is(err, io.EOF) {
			t.Fatalf("after the final reply: %v", err)
		}
		got = tap.receives()
		if len(got) != 3 {
			t.Fatalf("%d stream messages received, want 3", len(got))
		}
		for _, m := range got {
			checkCarried(t, "a stream's message", m, len(big))
		}
	})
}

// TestCompressionDisabled: a requester with DisableCompression offers
// nothing, and a responder with DisableCompression compresses nothing:
// either way the reply travels as it is.
func TestCompressionDisabled(t *testing.T) {
	t.Parallel()
	e := newEnv(t, sqstestenv.SQSTest(t))
	big := testbody.JSON(200<<10, 1)
	serve(t, e.raw, func(ctx context.Context, req *responder.Request) (*responder.Reply, error) {
		return &responder.Reply{Body: big}, nil
	}, e.queue)
	other, err := e.raw.CreateQueue(context.Background(), &sqs.CreateQueueInput{QueueName: aws.String(sqstestenv.QueueName(t, "plain"))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = e.raw.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: other.QueueUrl})
	})
	plain, err := responder.New(e.raw, func(o *responder.Options) {
		o.PollWaitTime = time.Second
		o.AllowReplyTo = []string{"tq"}
		o.DisableCompression = true
	})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		done <- plain.Serve(context.Background(), *other.QueueUrl, responder.HandlerFunc(func(ctx context.Context, req *responder.Request) (*responder.Reply, error) {
			return &responder.Reply{Body: big}, nil
		}))
	}()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = plain.Shutdown(ctx)
		<-done
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, c := range []struct {
		name  string
		queue string
		opts  func(*requester.Options)
	}{
		{"requester with DisableCompression", e.queue, func(o *requester.Options) { o.DisableCompression = true }},
		{"responder with DisableCompression", *other.QueueUrl, func(*requester.Options) {}},
	} {
		r, tap := e.tapped(t, c.opts)
		m, err := r.SendMessageAndGetResponse(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(c.queue), MessageBody: aws.String("call")})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		checkPlain(t, c.name, m, big)
		for _, s := range tap.sends() {
			if ok := payload.Accepts(s.MessageAttributes); ok != (c.queue == *other.QueueUrl) {
				t.Errorf("%s: the request offers gzip: %v", c.name, ok)
			}
			if !payload.AcceptsParts(s.MessageAttributes) {
				t.Errorf("%s: the call does not offer parts", c.name)
			}
		}
		for _, m := range tap.receives() {
			if _, ok := m.MessageAttributes[payload.BodyAttribute]; ok || aws.ToString(m.Body) != big {
				t.Errorf("%s: the reply travelled compressed", c.name)
			}
		}
	}
}

// TestJavaStyleResponderIgnoresTheOffer: a responder that knows nothing
// of compression (the Java client's) gets TempQueues.Accept, ignores it
// and replies plain, which the requester takes as it is.
func TestJavaStyleResponderIgnoresTheOffer(t *testing.T) {
	t.Parallel()
	e := newEnv(t, sqstestenv.SQSTest(t))
	r, tap := e.tapped(t)
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	e.rawResponder(t, ctx, 0) // replies "re: " and the request's body
	big := testbody.JSON(200<<10, 2)
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	m, err := r.SendMessageAndGetResponse(cctx, &sqs.SendMessageInput{QueueUrl: aws.String(e.queue), MessageBody: aws.String(big)})
	if err != nil {
		t.Fatal(err)
	}
	checkPlain(t, "the reply", m, "re: "+big)
	if sent := tap.sends(); len(sent) != 1 || !payload.Accepts(sent[0].MessageAttributes) {
		t.Fatalf("requests sent %v, want one offering gzip", sent)
	}
}

// TestCompressRequests: with CompressRequests, a request, and each
// message of a session, travels compressed when that pays, and the
// handler sees plain bodies. The size limit applies to what is sent: a
// 3 MiB JSON request fits; 3 MiB of base64, which gzip shrinks by a
// quarter only, fails before any send, as it does without compression.
func TestCompressRequests(t *testing.T) {
	t.Parallel()
	sqstestenv.Each(t, func(t *testing.T, b *sqstestenv.Backend) {
		e := newEnv(t, b)
		big, huge := testbody.JSON(200<<10, 3), testbody.JSON(3<<20, 4)
		serve(t, e.raw, func(ctx context.Context, req *responder.Request) (*responder.Reply, error) {
			if _, ok := req.Message.MessageAttributes[payload.BodyAttribute]; ok {
				t.Errorf("the handler sees %s", payload.BodyAttribute)
			}
			switch req.Body() {
			case big, huge:
				return &responder.Reply{Body: "ok"}, nil
			case "session":
				m, err := req.Recv(ctx)
				if err != nil {
					return nil, err
				}
				if aws.ToString(m.Body) != big {
					return &responder.Reply{Body: "session message of " + strings.Repeat("?", min(len(aws.ToString(m.Body)), 40))}, nil
				}
				return &responder.Reply{Body: "ok"}, nil
			}
			return &responder.Reply{Body: "unexpected body of " + strings.Repeat("?", min(len(req.Body()), 40))}, nil
		}, e.queue)
		r, tap := e.tapped(t, func(o *requester.Options) { o.CompressRequests = true })
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for _, body := range []string{big, huge} {
			m, err := r.SendMessageAndGetResponse(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(e.queue), MessageBody: aws.String(body)})
			if err != nil {
				t.Fatalf("a request of %d bytes: %v", len(body), err)
			}
			checkPlain(t, "the reply", m, "ok")
			sent := tap.sends()
			if len(sent) != 1 {
				t.Fatalf("%d messages sent, want the request", len(sent))
			}
			checkCarried(t, "the request", types.Message{Body: sent[0].MessageBody, MessageAttributes: sent[0].MessageAttributes}, len(body))
		}

		sess, err := r.OpenSession(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(e.queue), MessageBody: aws.String("session")})
		if err != nil {
			t.Fatal(err)
		}
		if err := sess.Send(ctx, &requester.Message{Body: big}); err != nil {
			t.Fatal(err)
		}
		m, err := sess.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		checkPlain(t, "the session's reply", m, "ok")
		sess.Close()
		carried := 0
		for _, s := range tap.sends() {
			if _, ok := s.MessageAttributes[payload.BodyAttribute]; ok {
				checkCarried(t, "the session's message", types.Message{Body: s.MessageBody, MessageAttributes: s.MessageAttributes}, len(big))
				carried++
			}
		}
		if carried != 1 {
			t.Errorf("%d compressed messages sent in the session, want 1", carried)
		}

		// Too large even compressed, or not compressed: no send.
		noise := testbody.Random(3<<20, 5)
		plain := e.requester(t)
		for name, c := range map[string]struct {
			r    *requester.Requester
			body string
		}{"base64, compressed": {r, noise}, "JSON, not compressed": {plain, huge}} {
			_, err := c.r.SendMessageAndGetResponse(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(e.queue), MessageBody: aws.String(c.body)})
			if !errors.Is(err, sqsapi.ErrInvalidInput) {
				t.Errorf("%s: %v, want ErrInvalidInput", name, err)
			}
		}
		if s := tap.sends(); len(s) != 0 {
			t.Errorf("%d messages sent for requests too large", len(s))
		}
	})
}

// rawReplier answers each request on e's queue with the message reply
// makes of it, sent raw to the request's reply queue: a responder that
// breaks the wire format.
func (e *env) rawReplier(t *testing.T, ctx context.Context, reply func(types.Message) (string, map[string]types.MessageAttributeValue)) {
	e.rawRequests(t, ctx, new(sync.WaitGroup), func(m types.Message, host, name string) {
		body, attrs := reply(m)
		attrs[sqsapi.VirtualQueueNameAttribute] = wire.StringAttribute(name)
		if _, err := e.raw.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: aws.String(host), MessageBody: aws.String(body), MessageAttributes: attrs}); err != nil {
			t.Errorf("reply: %v", err)
		}
		_, _ = e.raw.DeleteMessage(context.Background(), &sqs.DeleteMessageInput{QueueUrl: aws.String(e.queue), ReceiptHandle: m.ReceiptHandle})
	})
}

// bomb is a gzip stream of 64 MiB and one byte: what payload.Decode
// refuses to inflate.
var bomb = sync.OnceValue(func() []byte {
	attrs := map[string]types.MessageAttributeValue{}
	payload.Encode(strings.Repeat("a", payload.MaxInflated), attrs, 1)
	z := attrs[payload.BodyAttribute].BinaryValue
	// One more byte: a second gzip member, which Decode reads on.
	extra := map[string]types.MessageAttributeValue{}
	payload.Encode(strings.Repeat("b", payload.Threshold), extra, 1)
	return append(z[:len(z):len(z)], extra[payload.BodyAttribute].BinaryValue...)
})

// TestUnreadableRepliesFail: a compressed reply that does not decompress,
// or would inflate past 64 MiB, fails its call, or its stream, with an
// error matching ErrBadResponse.
func TestUnreadableRepliesFail(t *testing.T) {
	t.Parallel()
	inBubble(t, func(t *testing.T, b *sqstestenv.Backend) {
		e := newEnv(t, b)
		r := e.requester(t)
		ctx, stop := context.WithCancel(context.Background())
		defer stop()
		e.rawReplier(t, ctx, func(m types.Message) (string, map[string]types.MessageAttributeValue) {
			z := []byte("not gzip")
			if aws.ToString(m.Body) == "bomb" {
				z = bomb()
			}
			return payload.Placeholder, map[string]types.MessageAttributeValue{
				sqsapi.CorrelationIDAttribute: m.MessageAttributes[sqsapi.RequestIDAttribute],
				payload.BodyAttribute:         {DataType: aws.String(payload.DataType), BinaryValue: z},
			}
		})
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		for _, body := range []string{"corrupt", "bomb"} {
			_, err := r.SendMessageAndGetResponse(cctx, &sqs.SendMessageInput{QueueUrl: aws.String(e.queue), MessageBody: aws.String(body)})
			if !errors.Is(err, requester.ErrBadResponse) {
				t.Fatalf("%s reply: %v, want ErrBadResponse", body, err)
			}
			if body == "bomb" && !strings.Contains(err.Error(), "64 MiB") {
				t.Errorf("the bomb's error does not say the limit: %v", err)
			}
		}
		s, err := r.SendMessageAndStream(cctx, &sqs.SendMessageInput{QueueUrl: aws.String(e.queue), MessageBody: aws.String("corrupt")})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Next(cctx); !errors.Is(err, requester.ErrBadResponse) {
			t.Fatalf("a stream's corrupt reply: %v, want ErrBadResponse", err)
		}
	})
}

// corrupting is a requester's client that damages the carrier of every
// compressed message it sends.
type corrupting struct{ sqsapi.Client }

func (c corrupting) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	for i, e := range in.Entries {
		if v, ok := e.MessageAttributes[payload.BodyAttribute]; ok {
			v.BinaryValue = []byte("damaged")
			in.Entries[i].MessageAttributes[payload.BodyAttribute] = v
		}
	}
	return c.Client.SendMessageBatch(ctx, in, optFns...)
}

// TestUnreadableSessionMessageAbortsTheSession: a session's message whose
// compressed body the handler cannot read is an error for its Recv; the
// handler that fails on it aborts the session, and the caller hears it.
func TestUnreadableSessionMessageAbortsTheSession(t *testing.T) {
	t.Parallel()
	e := newEnv(t, sqstestenv.SQSTest(t))
	recvErr := make(chan error, 1)
	serve(t, e.raw, func(ctx context.Context, req *responder.Request) (*responder.Reply, error) {
		_, err := req.Recv(ctx)
		recvErr <- err
		if err != nil {
			return nil, err
		}
		return &responder.Reply{Body: "read it"}, nil
	}, e.queue)
	r, err := requester.New(corrupting{e.raw}, func(o *requester.Options) {
		o.Prefix = e.prefix
		o.DisableSweeping = true
		o.CompressRequests = true
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close(context.Background()) })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	sess, err := r.OpenSession(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(e.queue), MessageBody: aws.String("session")})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	if err := sess.Send(ctx, &requester.Message{Body: testbody.JSON(64<<10, 1)}); err != nil {
		t.Fatal(err)
	}
	if err := <-recvErr; err == nil || !strings.Contains(err.Error(), "cannot be read") {
		t.Fatalf("the handler's Recv: %v, want the message unreadable", err)
	}
	if _, err := sess.Next(ctx); !errors.Is(err, requester.ErrSessionAborted) {
		t.Fatalf("the caller: %v, want ErrSessionAborted", err)
	}
}
