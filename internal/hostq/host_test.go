package hostq

import (
	"context"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/internal/clock"
	"github.com/tempqueues/tempqueues/internal/wire"
	"github.com/tempqueues/tempqueues/sqsapi"
)

// memHost is a host queue that exists only for GetQueueAttributes and
// accepts batch acknowledgements, so in-process costs and the ledger can be
// tested alone. Its receives block until their context ends.
type memHost struct {
	sqsapi.Client
	deleted, changed atomic.Int64
}

func (*memHost) GetQueueAttributes(context.Context, *sqs.GetQueueAttributesInput, ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error) {
	return &sqs.GetQueueAttributesOutput{Attributes: map[string]string{"VisibilityTimeout": "30"}}, nil
}

func (m *memHost) DeleteMessageBatch(_ context.Context, in *sqs.DeleteMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error) {
	m.deleted.Add(int64(len(in.Entries)))
	return &sqs.DeleteMessageBatchOutput{}, nil
}

func (m *memHost) ChangeMessageVisibilityBatch(_ context.Context, in *sqs.ChangeMessageVisibilityBatchInput, _ ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error) {
	m.changed.Add(int64(len(in.Entries)))
	return &sqs.ChangeMessageVisibilityBatchOutput{}, nil
}

func (*memHost) ReceiveMessage(ctx context.Context, _ *sqs.ReceiveMessageInput, _ ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

const testHost = "https://sqs.us-east-1.amazonaws.com/123456789012/__RequesterClientQueues__0123456789abcdef0123456789abcdef0123-0"

func openTest(tb testing.TB, o *Options) (*Host, *memHost) {
	tb.Helper()
	o.SetDefaults()
	m := &memHost{}
	h, err := Open(context.Background(), m, testHost, o)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = h.Close(context.Background()) })
	return h, m
}

func msg(name, handle string) types.Message {
	return types.Message{
		MessageId: aws.String("m-" + handle), ReceiptHandle: aws.String(handle), Body: aws.String("body"),
		MessageAttributes: map[string]types.MessageAttributeValue{sqsapi.VirtualQueueNameAttribute: wire.StringAttribute(name)},
	}
}

// The ledger and the queue buffers hold the same entries in the same order:
// taking from one queue unlinks from the ledger, and the release scheduler
// releases only what nobody took, oldest first.
func TestLedgerReleasesOnlyUntakenMessagesInOrder(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	var nowNanos atomic.Int64
	nowNanos.Store(now.UnixNano())
	h, _ := openTest(t, &Options{Clock: clock.Clock{NowFunc: func() time.Time { return time.Unix(0, nowNanos.Load()) }}})
	a, _ := h.CreateQueue("a", 0, nil, 0)
	b, _ := h.CreateQueue("b", 0, nil, 0)
	h.route([]types.Message{msg("a", "a1"), msg("b", "b1"), msg("a", "a2"), msg("b", "b2")})
	if got, _, _ := a.Receive(1, false, nil); len(got) != 1 || *got[0].ReceiptHandle != "a1" {
		t.Fatalf("first receive on a = %v", got)
	}
	h.mu.Lock()
	if h.held.n != 3 {
		t.Errorf("ledger holds %d entries after one take, want 3", h.held.n)
	}
	// Nothing is due yet; then everything is.
	if due := h.dueReleasesLocked(now); len(due) != 0 {
		t.Errorf("released %d messages before their time", len(due))
	}
	due := h.dueReleasesLocked(now.Add(time.Minute))
	h.mu.Unlock()
	var handles []string
	for _, m := range due {
		handles = append(handles, *m.ReceiptHandle)
	}
	if want := "b1 a2 b2"; strings.Join(handles, " ") != want {
		t.Fatalf("released %q, want %q", strings.Join(handles, " "), want)
	}
	if v, _ := a.Counts(); v != 0 {
		t.Errorf("queue a still holds %d messages", v)
	}
	if v, _ := b.Counts(); v != 0 {
		t.Errorf("queue b still holds %d messages", v)
	}
}

// An expectation takes exactly one message, which the host then deletes; a
// second message for the same name is an orphan.
func TestExpectTakesOneMessageAndDeletesIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var orphans atomic.Int64
		h, m := openTest(t, &Options{Orphan: func(context.Context, string, string, types.Message) OrphanAction {
			orphans.Add(1)
			return Delete
		}})
		got := make(chan types.Message, 2)
		if err := h.Expect("reply-1", func(m types.Message, err error) {
			if err != nil {
				t.Error(err)
			}
			got <- m
		}); err != nil {
			t.Fatal(err)
		}
		if err := h.Expect("reply-1", func(types.Message, error) {}); err == nil {
			t.Error("a second expectation under one name was accepted")
		}
		h.route([]types.Message{msg("reply-1", "r1"), msg("reply-1", "r2")})
		if m := <-got; *m.ReceiptHandle != "r1" {
			t.Fatalf("expectation got %s", *m.ReceiptHandle)
		}
		if orphans.Load() != 1 {
			t.Errorf("%d orphans, want 1 (the duplicate)", orphans.Load())
		}
		if h.Unexpect("reply-1") {
			t.Error("Unexpect reported a delivered expectation as pending")
		}
		if err := h.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		if n := m.deleted.Load(); n != 2 {
			t.Errorf("%d deletes after Close, want 2 (the answer and the orphan)", n)
		}
	})
}

// Close fails pending expectations and waiting receivers with ErrClosed and
// releases held messages.
func TestCloseFailsWaitersAndReleases(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, m := openTest(t, &Options{})
		q, _ := h.CreateQueue("q", 0, nil, 0)
		h.route([]types.Message{msg("q", "h1")})
		errs := make(chan error, 2)
		if err := h.Expect("call", func(_ types.Message, err error) { errs <- err }); err != nil {
			t.Fatal(err)
		}
		other, _ := h.CreateQueue("other", 0, nil, 0)
		if _, cancel, err := other.Receive(1, true, func(_ []types.Message, err error) { errs <- err }); err != nil || cancel == nil {
			t.Fatalf("Receive = %v, registered %v", err, cancel != nil)
		}
		_ = q
		if err := h.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		for range 2 {
			if err := <-errs; err != sqsapi.ErrClosed {
				t.Errorf("waiter got %v, want ErrClosed", err)
			}
		}
		if n := m.changed.Load(); n != 1 {
			t.Errorf("%d releases, want 1", n)
		}
	})
}

// BenchmarkRoute measures routing received host messages to waiting
// receivers of 100 virtual queues: the in-process cost per message, without
// SQS.
func BenchmarkRoute(b *testing.B) {
	h, _ := openTest(b, &Options{})
	const queues = 100
	qs := make([]*Queue, queues)
	for i := range qs {
		qs[i], _ = h.CreateQueue("q"+strconv.Itoa(i), 0, nil, 0)
	}
	msgs := make([]types.Message, 10)
	b.ReportAllocs()
	b.ResetTimer()
	delivered := 0
	for i := 0; i < b.N; i += len(msgs) {
		for j := range msgs {
			msgs[j] = msg("q"+strconv.Itoa((i+j)%queues), "r"+strconv.Itoa(i+j))
		}
		h.route(msgs)
		for j := range msgs {
			got, _, err := qs[(i+j)%queues].Receive(1, false, nil)
			if err != nil {
				b.Fatal(err)
			}
			delivered += len(got)
		}
	}
	b.StopTimer()
	if delivered < b.N {
		b.Fatalf("delivered %d of %d", delivered, b.N)
	}
}

// BenchmarkExpect measures a requester's reply path in process: expect a
// reply, route it, hand it over.
func BenchmarkExpect(b *testing.B) {
	h, _ := openTest(b, &Options{})
	names := make([]string, 1024)
	for i := range names {
		names[i] = "reply-" + strconv.Itoa(i)
	}
	got := make(chan struct{}, 1)
	fn := func(types.Message, error) { got <- struct{}{} }
	m := []types.Message{{}}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		name := names[i%len(names)]
		if err := h.Expect(name, fn); err != nil {
			b.Fatal(err)
		}
		m[0] = msg(name, "r")
		h.route(m)
		<-got
	}
}
