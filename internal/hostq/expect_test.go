package hostq

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/internal/batch"
	"github.com/tempqueues/tempqueues/internal/testkit/testtime"
	"github.com/tempqueues/tempqueues/internal/wire"
	"github.com/tempqueues/tempqueues/sqsapi"
)

func routed(name string, i int) types.Message {
	return types.Message{
		MessageId: aws.String(strconv.Itoa(i)), ReceiptHandle: aws.String("rh-" + strconv.Itoa(i)), Body: aws.String(strconv.Itoa(i)),
		MessageAttributes: map[string]types.MessageAttributeValue{sqsapi.VirtualQueueNameAttribute: wire.StringAttribute(name)},
	}
}

func TestExpectManyTakesMessagesUntilItSaysLast(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		o := &Options{Counters: new(Counters)}
		h, m := openTest(t, o)
		var (
			mu   sync.Mutex
			got  []string
			errs []error
		)
		err := h.ExpectMany("s", func(msg types.Message, err error) bool {
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return false
			}
			got = append(got, aws.ToString(msg.Body))
			return len(got) < 3
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := h.Expect("s", func(types.Message, error) {}); !errors.Is(err, sqsapi.ErrInvalidInput) {
			t.Errorf("Expect on a stream's name: %v", err)
		}
		if h.Expecting() != 1 {
			t.Errorf("Expecting %d", h.Expecting())
		}
		// Four messages in one receive: the stream takes three and ends; the
		// fourth is an orphan. All four are deleted.
		h.route([]types.Message{routed("s", 0), routed("s", 1), routed("s", 2), routed("s", 3)})
		if want := []string{"0", "1", "2"}; len(got) != 3 || got[0] != want[0] || got[2] != want[2] {
			t.Errorf("stream took %q, want %q", got, want)
		}
		if h.Expecting() != 0 || o.Counters.Orphaned.Load() != 1 {
			t.Errorf("after the last: %d expecting, %d orphans", h.Expecting(), o.Counters.Orphaned.Load())
		}
		// Answered messages' deletes wait for company up to a tenth of the
		// visibility timeout (30 s): all four are deleted by 3 s.
		testtime.Advance(3 * time.Second)
		if n := m.deleted.Load(); n != 4 {
			t.Errorf("%d messages deleted 3 s after they came, want 4", n)
		}

		// A pending stream is told when the host closes; Unexpect withdraws one.
		if err := h.ExpectMany("t", func(_ types.Message, err error) bool {
			mu.Lock()
			defer mu.Unlock()
			errs = append(errs, err)
			return false
		}); err != nil {
			t.Fatal(err)
		}
		if err := h.ExpectMany("u", func(types.Message, error) bool { return true }); err != nil {
			t.Fatal(err)
		}
		if !h.Unexpect("u") || h.Unexpect("u") {
			t.Error("Unexpect of a stream: want true once")
		}
		if err := h.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		if len(errs) != 1 || !errors.Is(errs[0], sqsapi.ErrClosed) {
			t.Errorf("errors told: %v, want one ErrClosed", errs)
		}
	})
}

// A host with streams pending adds a poller per full receive that waited
// on the network, up to twice MaxPollers, and drops one per partial
// receive; fast full receives (a local server) and plain calls add none.
func TestStreamPollerBoost(t *testing.T) {
	h := &Host{opts: &Options{MaxPollers: 4}, closed: true} // closed: starts no goroutine
	h.streams = map[string]*stream{"s": {}}
	h.demand = 100 * streamDemand
	slow, fast := 2*boostRoundTrip, boostRoundTrip/2
	for range 3 {
		h.noteReceiveLocked(10, 10, fast)
	}
	if got := h.wantPollersLocked(); got != 4 {
		t.Fatalf("after fast full receives: %d pollers wanted, want 4", got)
	}
	for range 10 {
		h.noteReceiveLocked(10, 10, slow)
	}
	if got := h.wantPollersLocked(); got != 8 {
		t.Fatalf("after slow full receives: %d pollers wanted, want 8", got)
	}
	h.noteReceiveLocked(10, 3, slow)
	if got := h.wantPollersLocked(); got != 7 {
		t.Fatalf("after a partial receive: %d pollers wanted, want 7", got)
	}
	h.streams = nil
	h.noteReceiveLocked(10, 10, slow)
	if got := h.wantPollersLocked(); got != 4 {
		t.Fatalf("without streams: %d pollers wanted, want 4", got)
	}
}

// TestExpectJoinTakesPartsAfterItsFirst: a call registered with
// ExpectJoin costs a call's demand, takes the messages of its name in
// one receive and later ones while fn says it wants more, then stops;
// one whose fn wants no more after its first message is a plain call.
func TestExpectJoinTakesPartsAfterItsFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var answered []batch.Count
		o := &Options{Counters: new(Counters), Answering: func(c []batch.Count) { answered = append(answered, c...) }}
		h, _ := openTest(t, o)
		var got []string
		if err := h.ExpectJoin("j", "q", func(msg types.Message, err error) bool {
			if err != nil {
				t.Errorf("fn told %v", err)
				return false
			}
			got = append(got, aws.ToString(msg.Body))
			return len(got) < 3
		}); err != nil {
			t.Fatal(err)
		}
		if err := h.ExpectJoin("one", "", func(types.Message, error) bool { return false }); err != nil {
			t.Fatal(err)
		}
		h.mu.Lock()
		demand := h.demand
		h.mu.Unlock()
		if demand != 2 {
			t.Errorf("demand %d for two calls, want 2", demand)
		}
		h.route([]types.Message{routed("j", 0), routed("j", 1), routed("one", 9), routed("one", 10)})
		if h.Expecting() != 1 || len(got) != 2 {
			t.Fatalf("after one receive: %d expecting, %d taken", h.Expecting(), len(got))
		}
		if o.Counters.Orphaned.Load() != 1 {
			t.Errorf("%d orphans, want the second message to the plain call", o.Counters.Orphaned.Load())
		}
		if len(answered) != 1 || answered[0].Key != "q" || answered[0].N != 1 {
			t.Errorf("Answering told %+v, want the joining call's tag once", answered)
		}
		h.route([]types.Message{routed("j", 2), routed("j", 3)})
		if h.Expecting() != 0 || len(got) != 3 || o.Counters.Orphaned.Load() != 2 {
			t.Errorf("after the last part: %d expecting, %d taken, %d orphans", h.Expecting(), len(got), o.Counters.Orphaned.Load())
		}
		h.mu.Lock()
		demand = h.demand
		h.mu.Unlock()
		if demand != 0 {
			t.Errorf("demand %d once both ended", demand)
		}
	})
}
