package requester_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
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
	"github.com/tempqueues/tempqueues/internal/wire"
	"github.com/tempqueues/tempqueues/requester"
	"github.com/tempqueues/tempqueues/responder"
	"github.com/tempqueues/tempqueues/sqsapi"
)

// TestReplyInParts: with no PayloadStore on either side, a 50 MiB JSON
// reply, too large for one message even compressed, travels as parts of
// a reply stream and reaches SendMessageAndGetResponse byte-exact, with
// the handler's attributes; the request offered to join parts.
func TestReplyInParts(t *testing.T) {
	sqstestenv.Each(t, func(t *testing.T, b *sqstestenv.Backend) {
		e := newEnv(t, b)
		reply := testbody.JSON(50<<20, 7)
		var offer atomic.Value
		_, _ = runResponder(t, e, e.raw, func(ctx context.Context, req *responder.Request) (*responder.Reply, error) {
			return &responder.Reply{Body: reply, Attributes: map[string]types.MessageAttributeValue{"kind": wire.StringAttribute("report")}}, nil
		})
		r, tap := e.tapped(t)
		ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
		defer cancel()
		start := time.Now()
		m, err := r.SendMessageAndGetResponse(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(e.queue), MessageBody: aws.String("report")})
		if err != nil {
			t.Fatal(err)
		}
		took := time.Since(start)
		if aws.ToString(m.Body) != reply {
			t.Fatalf("reply of %d bytes, not the %d sent", len(aws.ToString(m.Body)), len(reply))
		}
		if v := m.MessageAttributes["kind"]; aws.ToString(v.StringValue) != "report" {
			t.Errorf("the reply's attribute: %v", v)
		}
		for _, k := range []string{sqsapi.StreamAttribute, payload.BodyAttribute} {
			if _, ok := m.MessageAttributes[k]; ok {
				t.Errorf("the caller sees %s", k)
			}
		}
		sent := tap.sends()
		if len(sent) != 1 {
			t.Fatalf("%d requests sent, want 1", len(sent))
		}
		offer.Store(aws.ToString(sent[0].MessageAttributes[payload.AcceptAttribute].StringValue))
		if got := offer.Load(); got != "gzip,parts" {
			t.Errorf("the request's offer is %q, want gzip,parts", got)
		}
		parts := tap.receives()
		var wire int
		for _, p := range parts {
			wire += len(p.MessageAttributes[payload.BodyAttribute].BinaryValue) + len(aws.ToString(p.Body))
		}
		if len(parts) < 2 {
			t.Fatalf("%d messages received, want the reply's parts", len(parts))
		}
		t.Logf("50 MiB of JSON in %d parts, %d bytes on the wire, in %v", len(parts), wire, took.Round(time.Millisecond))
		if st := r.Stats(); st.Pending != 0 {
			t.Errorf("%d calls pending", st.Pending)
		}
	})
}

// part is a part a partsReplier sends: its number in the pieces of a
// reply, and the run it names.
type part struct {
	seq int
	run string
}

// partsReplier answers each request with the parts of the replies in
// runs (by run), cut in pieces of size, sent as order says (the parts'
// numbers and runs, in the order and as often as they are to go), on the
// documented wire format alone.
func (e *env) partsReplier(t *testing.T, ctx context.Context, runs map[string]string, size int, order []part) {
	pieces := map[string][]string{}
	for run, reply := range runs {
		pieces[run] = payload.Split(reply, size)
	}
	e.rawRequests(t, ctx, new(sync.WaitGroup), func(m types.Message, host, name string) {
		for _, p := range order {
			i, pieces := p.seq, pieces[p.run]
			pos := wire.StreamPos{Seq: i, Run: p.run}
			if i == len(pieces)-1 {
				pos.Mark = wire.MarkFinal
			}
			attrs := map[string]types.MessageAttributeValue{
				sqsapi.VirtualQueueNameAttribute: wire.StringAttribute(name),
				sqsapi.StreamAttribute:           wire.StringAttribute(wire.FormatStream(pos)),
			}
			_, err := e.raw.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: aws.String(host), MessageBody: aws.String(pieces[i]), MessageAttributes: attrs})
			// A duplicate sent after the call had its whole reply may find
			// the host queue deleted by the requester's Close.
			var gone *types.QueueDoesNotExist
			if err != nil && !errors.As(err, &gone) {
				t.Errorf("part %d: %v", i, err)
			}
		}
		_, _ = e.raw.DeleteMessage(context.Background(), &sqs.DeleteMessageInput{QueueUrl: aws.String(e.queue), ReceiptHandle: m.ReceiptHandle})
	})
}

// TestReplyPartsOutOfOrderAndTwice: parts that arrive out of order, some
// twice, the last one first, are joined byte-exact; the duplicates are
// dropped.
func TestReplyPartsOutOfOrderAndTwice(t *testing.T) {
	inBubble(t, func(t *testing.T, b *sqstestenv.Backend) {
		e := newEnv(t, b)
		reply := testbody.Text(5*payload.MinPart+100, 8) // six parts
		ctx, stop := context.WithCancel(context.Background())
		defer stop()
		var order []part
		for _, i := range []int{5, 2, 0, 2, 4, 1, 0, 3, 5} {
			order = append(order, part{i, "r1"})
		}
		e.partsReplier(t, ctx, map[string]string{"r1": reply}, payload.MinPart, order)
		r := e.requester(t)
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		m, err := r.SendMessageAndGetResponse(cctx, &sqs.SendMessageInput{QueueUrl: aws.String(e.queue), MessageBody: aws.String("shuffled")})
		if err != nil {
			t.Fatal(err)
		}
		if aws.ToString(m.Body) != reply {
			t.Fatalf("joined %d bytes, not the %d sent", len(aws.ToString(m.Body)), len(reply))
		}
	})
}

// TestReplyPartsOfTwoRuns: the parts of a second run of the handler (its
// request delivered again after the first run failed to send them all)
// replace the first run's, whose stragglers are ignored: the reply joined
// is the second run's alone.
func TestReplyPartsOfTwoRuns(t *testing.T) {
	inBubble(t, func(t *testing.T, b *sqstestenv.Backend) {
		e := newEnv(t, b)
		first, second := strings.Repeat("1", 3*payload.MinPart), strings.Repeat("2", 3*payload.MinPart)
		ctx, stop := context.WithCancel(context.Background())
		defer stop()
		e.partsReplier(t, ctx, map[string]string{"a": first, "b": second}, payload.MinPart,
			[]part{{0, "a"}, {1, "a"}, {1, "b"}, {2, "a"}, {0, "b"}, {2, "b"}})
		r := e.requester(t)
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		m, err := r.SendMessageAndGetResponse(cctx, &sqs.SendMessageInput{QueueUrl: aws.String(e.queue), MessageBody: aws.String("twice")})
		if err != nil {
			t.Fatal(err)
		}
		if aws.ToString(m.Body) != second {
			t.Fatalf("joined %d bytes, not the second run's reply", len(aws.ToString(m.Body)))
		}
	})
}

// TestReplyPartsGivenUp: a caller whose deadline passes while parts are
// still missing gets ErrTimeout; what it held is freed, nothing stays
// pending, and the parts that come later are deleted as late replies.
func TestReplyPartsGivenUp(t *testing.T) {
	inBubble(t, func(t *testing.T, b *sqstestenv.Backend) {
		e := newEnv(t, b)
		reply := testbody.Text(3*payload.MinPart, 9)
		ctx, stop := context.WithCancel(context.Background())
		defer stop()
		pieces := payload.Split(reply, payload.MinPart)
		e.rawRequests(t, ctx, new(sync.WaitGroup), func(m types.Message, host, name string) {
			for i, p := range pieces {
				if i == 2 {
					testtime.Pause(2 * time.Second) // past the caller's deadline
				}
				pos := wire.StreamPos{Seq: i}
				if i == len(pieces)-1 {
					pos.Mark = wire.MarkFinal
				}
				_, _ = e.raw.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: aws.String(host), MessageBody: aws.String(p), MessageAttributes: map[string]types.MessageAttributeValue{
					sqsapi.VirtualQueueNameAttribute: wire.StringAttribute(name),
					sqsapi.StreamAttribute:           wire.StringAttribute(wire.FormatStream(pos)),
				}})
			}
		})
		r := e.requester(t)
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		call, err := r.SendMessageAndGetResponseAsync(cctx, &sqs.SendMessageInput{QueueUrl: aws.String(e.queue), MessageBody: aws.String("slow")})
		if err != nil {
			t.Fatal(err)
		}
		testtime.Eventually(t, 500*time.Millisecond, "the first parts held", func() bool { return requester.Held(call) == 2*payload.MinPart })
		if _, err := call.Wait(ctx); !errors.Is(err, requester.ErrTimeout) {
			t.Fatalf("%v, want ErrTimeout", err)
		}
		if n := requester.Held(call); n != 0 {
			t.Errorf("%d bytes held after the call ended", n)
		}
		testtime.Eventually(t, 10*time.Second, "the late parts", func() bool { return r.Stats().LateReplies >= 1 })
		if st := r.Stats(); st.Pending != 0 {
			t.Errorf("%d calls pending", st.Pending)
		}
	})
}

// TestReplyTooLargeForParts: a reply over the largest that travels in
// parts fails on the responder's side before any part is sent, and its
// caller gets ErrBadResponse saying why at once, not at its deadline.
func TestReplyTooLargeForParts(t *testing.T) {
	inBubble(t, func(t *testing.T, b *sqstestenv.Backend) {
		e := newEnv(t, b)
		reply := strings.Repeat("x", payload.MaxJoined+1)
		_, _ = runResponder(t, e, e.raw, func(ctx context.Context, req *responder.Request) (*responder.Reply, error) {
			return &responder.Reply{Body: reply}, nil
		})
		r, tap := e.tapped(t)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		start := time.Now()
		_, err := r.SendMessageAndGetResponse(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(e.queue), MessageBody: aws.String("too much")})
		if !errors.Is(err, requester.ErrBadResponse) || !strings.Contains(err.Error(), "64 MiB") {
			t.Fatalf("%v, want ErrBadResponse naming the limit", err)
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("the caller heard after %v, not at once", d)
		}
		for _, m := range tap.receives() {
			if _, ok := m.MessageAttributes[sqsapi.StreamAttribute]; ok {
				t.Errorf("a part was sent: %.40q", aws.ToString(m.Body))
			}
		}
	})
}

// slowParts passes a responder's sends on to SQS, but holds each part
// numbered from 2 until its call's context ends, as a network too slow
// for the caller's deadline would: it counts the parts that went.
type slowParts struct {
	sqsapi.MessageClient
	went atomic.Int64
}

func (s *slowParts) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	for _, e := range in.Entries {
		v, ok := e.MessageAttributes[sqsapi.StreamAttribute]
		if !ok {
			continue
		}
		if pos, _ := wire.ParseStream(aws.ToString(v.StringValue)); pos.Seq >= 2 {
			<-ctx.Done()
			return nil, ctx.Err()
		}
		s.went.Add(1)
	}
	return s.MessageClient.SendMessageBatch(ctx, in, optFns...)
}

// TestReplyPartsStopWithTheCaller: when the caller's deadline passes
// while a reply's parts are being sent, the responder sends no more of
// them and drops the request as cancelled, and the caller keeps nothing.
func TestReplyPartsStopWithTheCaller(t *testing.T) {
	inBubble(t, func(t *testing.T, b *sqstestenv.Backend) {
		e := newEnv(t, b)
		slow := &slowParts{MessageClient: e.raw}
		reply := testbody.Random(6<<20, 10) // six parts, sent as they are
		resp, _ := runResponder(t, e, slow, func(ctx context.Context, req *responder.Request) (*responder.Reply, error) {
			return &responder.Reply{Body: reply}, nil
		}, func(o *responder.Options) { o.DisableCompression = true })
		r := e.requester(t)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err := r.SendMessageAndGetResponse(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(e.queue), MessageBody: aws.String("slow")})
		if !errors.Is(err, requester.ErrTimeout) {
			t.Fatalf("%v, want ErrTimeout", err)
		}
		testtime.Eventually(t, 30*time.Second, "the request dropped", func() bool { return resp.Stats().Dropped == 1 })
		if n := slow.went.Load(); n != 2 {
			t.Errorf("%d parts went, want the 2 sent before the deadline", n)
		}
		if st := r.Stats(); st.Pending != 0 {
			t.Errorf("%d calls pending", st.Pending)
		}
	})
}

// BenchmarkLargeReplyPartsOrStore measures what decides between parts
// and a PayloadStore for a reply too large for one message even
// compressed (docs/limits.md): in parts, a 50 MiB reply costs SQS a
// billed request per 64 KiB sent and received; through a store, a few.
// On sqstest with an in-memory store, so its times say what SQS's side
// costs, not S3's:
//
//	go test -run '^$' -bench LargeReplyPartsOrStore -benchtime 3x ./requester
func BenchmarkLargeReplyPartsOrStore(b *testing.B) {
	for _, c := range []struct {
		name string
		body string
	}{{"JSON", testbody.JSON(50<<20, 12)}, {"base64", testbody.Random(50<<20, 13)}} {
		for _, viaStore := range []bool{false, true} {
			b.Run(fmt.Sprintf("%s/store=%v", c.name, viaStore), func(b *testing.B) {
				benchLargeReply(b, c.body, viaStore)
			})
		}
	}
}

func benchLargeReply(b *testing.B, body string, viaStore bool) {
	e := newEnv(b, sqstestenv.SQSTest(b))
	store := memstore.New("tq-measure")
	opt := func(o *responder.Options) {}
	ropt := func(o *requester.Options) {}
	if viaStore {
		opt = func(o *responder.Options) { o.PayloadStore = store }
		ropt = func(o *requester.Options) { o.PayloadStore = store }
	}
	_, _ = runResponder(b, e, e.raw, func(ctx context.Context, req *responder.Request) (*responder.Reply, error) {
		if req.Body() == "warm" {
			return &responder.Reply{Body: "ok"}, nil
		}
		return &responder.Reply{Body: body}, nil
	}, opt)
	r := e.requester(b, ropt)
	ctx := context.Background()
	// A first call opens the host queue, out of the measure.
	if _, err := r.SendMessageAndGetResponse(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(e.queue), MessageBody: aws.String("warm")}); err != nil {
		b.Fatal(err)
	}
	e.counter.Reset()
	b.ResetTimer()
	for range b.N {
		m, err := r.SendMessageAndGetResponse(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(e.queue), MessageBody: aws.String("measure")})
		if err != nil || aws.ToString(m.Body) != body {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	n := float64(b.N)
	puts, gets, deletes := store.Calls()
	b.ReportMetric(float64(e.counter.BilledTotal())/n, "billed/op")
	b.ReportMetric(float64(e.counter.Total())/n, "calls/op")
	b.ReportMetric(float64(puts+gets+deletes)/n, "store-calls/op")
}
