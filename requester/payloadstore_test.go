package requester_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/internal/payload"
	"github.com/tempqueues/tempqueues/internal/testkit/memstore"
	"github.com/tempqueues/tempqueues/internal/testkit/sqstestenv"
	"github.com/tempqueues/tempqueues/internal/testkit/testbody"
	"github.com/tempqueues/tempqueues/internal/testkit/testtime"
	"github.com/tempqueues/tempqueues/requester"
	"github.com/tempqueues/tempqueues/responder"
	"github.com/tempqueues/tempqueues/sqsapi"
)

// checkPointer fails unless m, as it went on the wire, carries a pointer
// to an object of size bytes, as the extended clients write one.
func checkPointer(t *testing.T, what string, body *string, attrs map[string]types.MessageAttributeValue, size int) {
	t.Helper()
	m := types.Message{Body: body, MessageAttributes: attrs}
	if _, ok := payload.ParsePointer(m); !ok || !strings.HasPrefix(aws.ToString(body), `["software.amazon.payloadoffloading.PayloadS3Pointer",{"s3BucketName":"`) {
		t.Fatalf("%s on the wire: body %.80q: not a pointer", what, aws.ToString(body))
	}
	v := attrs[payload.SizeAttribute]
	if aws.ToString(v.DataType) != "Number" || aws.ToString(v.StringValue) != strconv.Itoa(size) {
		t.Errorf("%s: %s = %s %q, want Number %d", what, payload.SizeAttribute, aws.ToString(v.DataType), aws.ToString(v.StringValue), size)
	}
	if _, ok := attrs[payload.BodyAttribute]; ok {
		t.Errorf("%s carries %s beside the pointer", what, payload.BodyAttribute)
	}
}

// waitEmpty fails unless store holds no object within a few seconds: a
// request's object goes once the request is deleted, asynchronously.
func waitEmpty(t *testing.T, store *memstore.Store) {
	t.Helper()
	if !testtime.Until(10*time.Second, func() bool { return len(store.Keys()) == 0 }) {
		t.Errorf("objects left in the store: %v", store.Keys())
	}
}

// TestPayloadStoreLargeBodies: with a PayloadStore on both sides, a
// 10 MiB request and a 50 MiB reply, too large for SQS even compressed,
// travel as pointers in the extended clients' format and arrive
// byte-exact; no object is left once the call is done.
func TestPayloadStoreLargeBodies(t *testing.T) {
	// Not parallel: 60 MiB of gzip under -race wants the CPU to itself.
	sqstestenv.Each(t, func(t *testing.T, b *sqstestenv.Backend) {
		e := newEnv(t, b)
		store := memstore.New("tq-payloads")
		request, reply := testbody.Random(10<<20, 1), testbody.Random(50<<20, 2)
		_, _ = runResponder(t, e, e.raw, func(ctx context.Context, req *responder.Request) (*responder.Reply, error) {
			if req.Body() != request {
				t.Errorf("the handler got %d bytes, not the request's %d", len(req.Body()), len(request))
			}
			if _, ok := req.Message.MessageAttributes[payload.SizeAttribute]; ok {
				t.Errorf("the handler sees %s", payload.SizeAttribute)
			}
			return &responder.Reply{Body: reply}, nil
		}, func(o *responder.Options) { o.PayloadStore = store })
		r, tap := e.tapped(t, func(o *requester.Options) { o.PayloadStore = store; o.CompressRequests = true })
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()

		m, err := r.SendMessageAndGetResponse(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(e.queue), MessageBody: aws.String(request)})
		if err != nil {
			t.Fatal(err)
		}
		if aws.ToString(m.Body) != reply {
			t.Fatalf("reply of %d bytes, want the %d sent", len(aws.ToString(m.Body)), len(reply))
		}
		if _, ok := m.MessageAttributes[payload.SizeAttribute]; ok {
			t.Errorf("the caller sees %s", payload.SizeAttribute)
		}
		sent := tap.sends()
		if len(sent) != 1 {
			t.Fatalf("%d requests sent, want 1", len(sent))
		}
		checkPointer(t, "the request", sent[0].MessageBody, sent[0].MessageAttributes, len(request))
		got := tap.receives()
		if len(got) != 1 {
			t.Fatalf("%d messages received, want the reply", len(got))
		}
		checkPointer(t, "the reply", got[0].Body, got[0].MessageAttributes, len(reply))
		for _, k := range []string{aws.ToString(sent[0].MessageBody), aws.ToString(got[0].Body)} {
			p, _ := payload.ParsePointer(types.Message{Body: &k, MessageAttributes: map[string]types.MessageAttributeValue{payload.SizeAttribute: {}}})
			if p.Bucket != "tq-payloads" || !strings.HasPrefix(p.Key, payload.KeyPrefix) {
				t.Errorf("pointer %+v: want bucket tq-payloads, key under %s", p, payload.KeyPrefix)
			}
		}
		waitEmpty(t, store)
		if puts, gets, _ := store.Calls(); puts != 2 || gets != 2 {
			t.Errorf("%d puts and %d gets, want 2 of each", puts, gets)
		}
	})
}

// TestStoreTakesWhatCostsMoreInSQS: with a store, a body that would be
// a message over payload.StoreAbove even compressed goes through the
// store, both ways, though SQS would take it; one under it stays in SQS.
func TestStoreTakesWhatCostsMoreInSQS(t *testing.T) {
	t.Parallel()
	inBubble(t, func(t *testing.T, b *sqstestenv.Backend) {
		e := newEnv(t, b)
		store := memstore.New("tq-above")
		_, _ = runResponder(t, e, e.raw, func(ctx context.Context, req *responder.Request) (*responder.Reply, error) {
			return &responder.Reply{Body: req.Body()}, nil
		}, func(o *responder.Options) { o.PayloadStore = store })
		r := e.requester(t, func(o *requester.Options) { o.PayloadStore = store; o.CompressRequests = true })
		for _, c := range []struct {
			size int
			puts int
		}{{300 << 10, 0}, {700 << 10, 2}} { // gzip leaves 3/4 of these: 225 and 525 KiB
			body := testbody.Random(c.size, 3)
			before, _, _ := store.Calls()
			m, err := r.SendMessageAndGetResponse(context.Background(), &sqs.SendMessageInput{QueueUrl: aws.String(e.queue), MessageBody: aws.String(body)})
			if err != nil {
				t.Fatal(err)
			}
			if aws.ToString(m.Body) != body {
				t.Fatalf("a %d-byte body came back as %d bytes", len(body), len(aws.ToString(m.Body)))
			}
			if puts, _, _ := store.Calls(); puts-before != c.puts {
				t.Errorf("a %d-byte body both ways: %d puts, want %d", c.size, puts-before, c.puts)
			}
		}
		waitEmpty(t, store)
	})
}

// TestPayloadStoreBadInput: a body over the maximum, or too large with no
// store, fails before any call; a store out of reach fails the call
// with an error naming the bucket; a pointer reply with no store to read
// it fails the call as a bad response naming the option.
func TestPayloadStoreBadInput(t *testing.T) {
	t.Parallel()
	e := newEnv(t, sqstestenv.SQSTest(t))
	store := memstore.New("tq-bad")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	in := func(body string) *sqs.SendMessageInput {
		return &sqs.SendMessageInput{QueueUrl: aws.String(e.queue), MessageBody: aws.String(body)}
	}

	plain, tap := e.tapped(t)
	_, err := plain.SendMessageAndGetResponse(ctx, in(testbody.Random(2<<20, 3)))
	if !errors.Is(err, sqsapi.ErrInvalidInput) || !strings.Contains(err.Error(), "PayloadStore") {
		t.Errorf("2 MiB with no store: %v, want invalid input naming PayloadStore", err)
	}
	r, tap2 := e.tapped(t, func(o *requester.Options) { o.PayloadStore = store })
	_, err = r.SendMessageAndGetResponse(ctx, in(strings.Repeat("x", payload.MaxPayload+1)))
	if !errors.Is(err, sqsapi.ErrInvalidInput) {
		t.Errorf("over 64 MiB: %v, want invalid input", err)
	}
	store.SetDown(true)
	_, err = r.SendMessageAndGetResponse(ctx, in(testbody.Random(2<<20, 4)))
	if err == nil || !strings.Contains(err.Error(), "tq-bad") {
		t.Errorf("store out of reach: %v, want an error naming the bucket", err)
	}
	store.SetDown(false)
	if n := len(tap.sends()) + len(tap2.sends()); n != 0 {
		t.Errorf("%d requests sent, want none", n)
	}
	if puts, _, _ := store.Calls(); puts != 0 {
		t.Errorf("%d puts, want none", puts)
	}

	// A responder with a store replies through it; a requester without
	// one cannot read the reply.
	_, _ = runResponder(t, e, e.raw, func(ctx context.Context, req *responder.Request) (*responder.Reply, error) {
		return &responder.Reply{Body: testbody.Random(2<<20, 5)}, nil
	}, func(o *responder.Options) { o.PayloadStore = store })
	_, err = plain.SendMessageAndGetResponse(ctx, in("large reply"))
	if !errors.Is(err, requester.ErrBadResponse) || !errors.Is(err, sqsapi.ErrNoPayloadStore) {
		t.Errorf("pointer reply with no store: %v, want ErrBadResponse and ErrNoPayloadStore", err)
	}
}

// TestLateReplyObjectDeleted: a pointer reply that comes after its
// caller gave up is deleted with its object.
func TestLateReplyObjectDeleted(t *testing.T) {
	t.Parallel()
	inBubble(t, func(t *testing.T, b *sqstestenv.Backend) {
		e := newEnv(t, b)
		store := memstore.New("tq-late")
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		e.rawReplier(t, ctx, func(m types.Message) (string, map[string]types.MessageAttributeValue) {
			testtime.Pause(500 * time.Millisecond) // after the caller's deadline
			attrs := map[string]types.MessageAttributeValue{}
			p, err := payload.Offload(context.Background(), store, "a late reply", attrs, time.Time{})
			if err != nil {
				t.Error(err)
			}
			attrs[sqsapi.CorrelationIDAttribute] = m.MessageAttributes[sqsapi.RequestIDAttribute]
			return p.String(), attrs
		})
		r := e.requester(t, func(o *requester.Options) { o.PayloadStore = store })
		cctx, ccancel := context.WithTimeout(ctx, 200*time.Millisecond)
		defer ccancel()
		if _, err := r.SendMessageAndGetResponse(cctx, &sqs.SendMessageInput{QueueUrl: aws.String(e.queue), MessageBody: aws.String("late")}); !errors.Is(err, requester.ErrTimeout) {
			t.Fatalf("%v, want a timeout", err)
		}
		testtime.Eventually(t, 10*time.Second, "the late reply", func() bool { return r.Stats().LateReplies > 0 })
		if puts, _, _ := store.Calls(); puts != 1 {
			t.Fatalf("%d puts, want the late reply's", puts)
		}
		waitEmpty(t, store)
	})
}

// TestPayloadStoreNeedsAnAttributePlace: a request too large for a
// message whose attributes leave no place for ExtendedPayloadSize fails
// before any call.
func TestPayloadStoreNeedsAnAttributePlace(t *testing.T) {
	t.Parallel()
	e := newEnv(t, sqstestenv.SQSTest(t))
	store := memstore.New("tq-full")
	r, tap := e.tapped(t, func(o *requester.Options) { o.PayloadStore = store })
	attrs := map[string]types.MessageAttributeValue{}
	for i := range 8 {
		attrs[fmt.Sprint("a", i)] = types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String("v")}
	}
	_, err := r.SendMessageAndGetResponse(context.Background(), &sqs.SendMessageInput{
		QueueUrl: aws.String(e.queue), MessageBody: aws.String(testbody.Random(2<<20, 6)), MessageAttributes: attrs,
	})
	if !errors.Is(err, sqsapi.ErrInvalidInput) || !strings.Contains(err.Error(), payload.SizeAttribute) {
		t.Errorf("%v, want invalid input naming %s", err, payload.SizeAttribute)
	}
	if puts, _, _ := store.Calls(); puts != 0 || len(tap.sends()) != 0 {
		t.Errorf("%d puts and %d sends, want none", puts, len(tap.sends()))
	}
}

// TestPayloadStoreReplyStream: with a PayloadStore on both sides, a reply
// stream's messages and its final reply too large for one message even
// compressed travel as pointers and reach Next byte-exact, in order;
// every object is deleted once read.
func TestPayloadStoreReplyStream(t *testing.T) {
	e := newEnv(t, sqstestenv.SQSTest(t))
	store := memstore.New("tq-stream")
	bodies := []string{testbody.Random(2<<20, 21), "small", testbody.Random(3<<20, 22)}
	final, request := testbody.Random(2<<20, 23), testbody.Random(2<<20, 24)
	_, _ = runResponder(t, e, e.raw, func(ctx context.Context, req *responder.Request) (*responder.Reply, error) {
		if req.Body() != request {
			return nil, fmt.Errorf("the handler got %d bytes, not the request's %d", len(req.Body()), len(request))
		}
		for _, b := range bodies {
			if err := req.Send(ctx, &responder.Reply{Body: b}); err != nil {
				return nil, err
			}
		}
		return &responder.Reply{Body: final}, nil
	}, func(o *responder.Options) { o.PayloadStore = store })
	r, tap := e.tapped(t, func(o *requester.Options) { o.PayloadStore = store })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s, err := r.SendMessageAndStream(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(e.queue), MessageBody: aws.String(request)})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range append(bodies, final) {
		m, err := s.Next(ctx)
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		if aws.ToString(m.Body) != want {
			t.Fatalf("message %d: %d bytes, want the %d sent", i, len(aws.ToString(m.Body)), len(want))
		}
		if _, ok := m.MessageAttributes[payload.SizeAttribute]; ok {
			t.Errorf("message %d: the caller sees %s", i, payload.SizeAttribute)
		}
	}
	if _, err := s.Next(ctx); !errors.Is(err, io.EOF) {
		t.Fatalf("after the final reply: %v, want io.EOF", err)
	}
	pointers := 0
	for _, m := range tap.receives() {
		if _, ok := payload.ParsePointer(m); ok {
			pointers++
		}
	}
	if pointers != 3 {
		t.Errorf("%d pointers received, want the 3 large messages'", pointers)
	}
	waitEmpty(t, store)
	if puts, _, _ := store.Calls(); puts != 4 {
		t.Errorf("%d puts, want 4: the request, 3 replies", puts)
	}
}

// TestPayloadStoreStreamStoppedEarly: a stream closed before its large
// messages are read leaves no object behind.
func TestPayloadStoreStreamStoppedEarly(t *testing.T) {
	e := newEnv(t, sqstestenv.SQSTest(t))
	store := memstore.New("tq-stopped")
	sent := make(chan struct{})
	_, _ = runResponder(t, e, e.raw, func(ctx context.Context, req *responder.Request) (*responder.Reply, error) {
		for i := range 3 {
			if err := req.Send(ctx, &responder.Reply{Body: testbody.Random(2<<20, uint64(30+i))}); err != nil {
				return nil, err
			}
		}
		close(sent)
		return &responder.Reply{Body: testbody.Random(2<<20, 33)}, nil
	}, func(o *responder.Options) { o.PayloadStore = store })
	r := e.requester(t, func(o *requester.Options) { o.PayloadStore = store })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s, err := r.SendMessageAndStream(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(e.queue), MessageBody: aws.String("stream")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Next(ctx); err != nil {
		t.Fatal(err)
	}
	<-sent
	s.Close()
	if !testtime.Until(10*time.Second, func() bool { puts, _, _ := store.Calls(); return puts == 4 }) {
		t.Fatal("the final reply never went to the store")
	}
	waitEmpty(t, store) // the unread messages' objects, buffered or late
}

// TestPayloadStoreSession: with a PayloadStore on both sides, a
// session's messages too large for one message even compressed travel
// through it both ways, byte-exact and in order; every object is
// deleted once read.
func TestPayloadStoreSession(t *testing.T) {
	e := newEnv(t, sqstestenv.SQSTest(t))
	store := memstore.New("tq-session")
	up := []string{testbody.Random(2<<20, 41), "small", testbody.Random(2<<20, 42)}
	down, request := testbody.Random(2<<20, 43), testbody.Random(2<<20, 44)
	_, _ = runResponder(t, e, e.raw, func(ctx context.Context, req *responder.Request) (*responder.Reply, error) {
		if req.Body() != request {
			return nil, fmt.Errorf("the handler got %d bytes, not the request's %d", len(req.Body()), len(request))
		}
		for i := 0; ; i++ {
			m, err := req.Recv(ctx)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return nil, err
			}
			if i >= len(up) || aws.ToString(m.Body) != up[i] {
				return nil, fmt.Errorf("message %d: %d bytes, not the %d sent", i, len(aws.ToString(m.Body)), len(up[i%len(up)]))
			}
			if _, ok := m.MessageAttributes[payload.SizeAttribute]; ok {
				return nil, fmt.Errorf("message %d: the handler sees %s", i, payload.SizeAttribute)
			}
			if err := req.Send(ctx, &responder.Reply{Body: down}); err != nil {
				return nil, err
			}
		}
		return &responder.Reply{Body: "done"}, nil
	}, func(o *responder.Options) { o.PayloadStore = store })
	r := e.requester(t, func(o *requester.Options) { o.PayloadStore = store })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s, err := r.OpenSession(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(e.queue), MessageBody: aws.String(request)})
	if err != nil {
		t.Fatal(err)
	}
	for i, b := range up {
		if err := s.Send(ctx, &requester.Message{Body: b}); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
	}
	s.CloseSend()
	for i := range up {
		m, err := s.Next(ctx)
		if err != nil {
			t.Fatalf("reply %d: %v", i, err)
		}
		if aws.ToString(m.Body) != down {
			t.Fatalf("reply %d: %d bytes, not the %d sent", i, len(aws.ToString(m.Body)), len(down))
		}
	}
	if m, err := s.Next(ctx); err != nil || aws.ToString(m.Body) != "done" {
		t.Fatalf("final reply: %v", err)
	}
	waitEmpty(t, store)
	if puts, _, _ := store.Calls(); puts != 6 {
		t.Errorf("%d puts, want 6: the request and 2 up, 3 down", puts)
	}
}

// TestPayloadStoreGather: a PublishGather's replies too large for one
// message even compressed come through the PayloadStore, each read
// byte-exact and its object deleted.
func TestPayloadStoreGather(t *testing.T) {
	e := newEnv(t, sqstestenv.SQSTest(t))
	store := memstore.New("tq-gather")
	out, err := e.raw.CreateQueue(context.Background(), &sqs.CreateQueueInput{QueueName: aws.String(sqstestenv.QueueName(t, "other"))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = e.raw.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: out.QueueUrl}) })
	other := *e
	other.queue = *out.QueueUrl
	replies := map[string]string{e.queue: testbody.Random(2<<20, 51), other.queue: testbody.Random(2<<20, 52)}
	for _, env := range []*env{e, &other} {
		_, _ = runResponder(t, env, e.raw, func(ctx context.Context, req *responder.Request) (*responder.Reply, error) {
			return &responder.Reply{Body: replies[req.QueueURL]}, nil
		}, func(o *responder.Options) { o.PayloadStore = store })
	}
	pub := publisherFunc(func(ctx context.Context, body string, attrs map[string]types.MessageAttributeValue) error {
		for q := range replies {
			if _, err := e.raw.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(q), MessageBody: aws.String(body), MessageAttributes: attrs}); err != nil {
				return err
			}
		}
		return nil
	})
	r := e.requester(t, func(o *requester.Options) { o.PayloadStore = store })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	got, err := r.PublishGather(ctx, pub, &sqs.SendMessageInput{MessageBody: aws.String("report?")}, 2)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range got {
		if want := replies[g.Origin]; aws.ToString(g.Message.Body) != want {
			t.Errorf("the reply from %s: %d bytes, want the %d sent", g.Origin, len(aws.ToString(g.Message.Body)), len(want))
		}
	}
	waitEmpty(t, store)
}
