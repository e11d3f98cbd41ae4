package hostq

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/internal/testkit/testtime"
)

// On a FIFO host a queue hands out nothing while a message taken from it
// is in flight; a delete hands the next one to a waiting receiver; a
// message whose visibility ended undeleted makes the buffered ones stale,
// and they are released rather than handed out.
func TestFIFOQueueHoldsBackBehindInFlightMessage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		o := &Options{}
		o.SetDefaults()
		m := &memHost{}
		h, err := Open(context.Background(), m, testHost+".fifo", o)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = h.Close(context.Background()) })
		if !h.FIFO() || h.ContentBasedDeduplication() {
			t.Fatalf("FIFO %v, content-based %v", h.FIFO(), h.ContentBasedDeduplication())
		}
		q, _ := h.CreateQueue("q", 0, nil, 0)
		h.route([]types.Message{msg("q", "m1"), msg("q", "m2"), msg("q", "m3")})
		got, _, _ := q.Receive(1, false, nil)
		if len(got) != 1 || *got[0].ReceiptHandle != "m1" {
			t.Fatalf("first receive %v", got)
		}
		served := make(chan []types.Message, 1)
		got, cancel, _ := q.Receive(10, true, func(msgs []types.Message, err error) { served <- msgs })
		if len(got) != 0 || cancel == nil {
			t.Fatalf("got %d messages while m1 is in flight", len(got))
		}
		q.Settle(time.Time{}, "m1") // deleted
		select {
		case msgs := <-served:
			if len(msgs) != 2 || *msgs[0].ReceiptHandle != "m2" || *msgs[1].ReceiptHandle != "m3" {
				t.Fatalf("after the delete the waiter got %v", msgs)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("the delete did not serve the waiting receiver")
		}

		// m4 arrives (m2 and m3 were deleted or came back); it is taken and
		// released by its consumer while m5 waits in the buffer.
		q.Settle(time.Time{}, "m2", "m3")
		h.route([]types.Message{msg("q", "m4"), msg("q", "m5")})
		if got, _, _ := q.Receive(1, false, nil); len(got) != 1 || *got[0].ReceiptHandle != "m4" {
			t.Fatalf("receive %v, want m4", got)
		}
		changed := m.changed.Load()
		q.Settle(time.Now().Add(-time.Second), "m4") // visible again
		if got, _, _ := q.Receive(10, false, nil); len(got) != 0 {
			t.Fatalf("handed out %s ahead of m4, which SQS delivers again first", *got[0].ReceiptHandle)
		}
		testtime.Eventually(t, 5*time.Second, "m5 released", func() bool { return m.changed.Load() != changed })
		if v, _ := q.Counts(); v != 0 {
			t.Fatalf("%d messages still buffered", v)
		}
	})
}
