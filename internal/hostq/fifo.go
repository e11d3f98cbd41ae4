package hostq

import (
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/internal/batch"
	"github.com/tempqueues/tempqueues/internal/wire"
)

// On a FIFO host each virtual queue is one message group: senders set
// MessageGroupId to the queue's name, so SQS delivers a queue's messages
// in send order and none while an earlier one is in flight, and virtual
// queues never hold each other up. The host keeps that contract towards
// a queue's consumers:
//
//   - a queue hands out nothing while a message taken from it is in
//     flight (received and neither deleted nor past its visibility), as
//     SQS would not: otherwise a message released by its consumer, or
//     whose visibility ended, would come back after the ones behind it;
//   - when a taken message's visibility ended without a delete, SQS will
//     deliver it again, first; the buffered messages behind it are
//     released (they cannot be delivered before it) rather than handed
//     out;
//   - a message SQS delivers for a queue proves that every message taken
//     from it earlier was deleted or is visible again, so its in-flight
//     records are dropped.
//
// The ledger's releases cannot reorder a queue either: a held message is
// released only when nobody took it, and SQS then keeps its group locked
// until every earlier message of the group is deleted or visible again.

// fifoGateLocked reports whether the queue on a FIFO host must hand out
// nothing now. With release set, buffered messages made stale by a taken
// message whose visibility ended undeleted are unlinked and returned, for
// the caller to release outside the lock.
func (q *Queue) fifoGateLocked(now time.Time, release bool) (blocked bool, stale []types.Message) {
	st := q.st
	if !q.h.fifo || st == nil || len(st.inflight) == 0 {
		return false, nil
	}
	for _, dl := range st.inflight {
		if dl.After(now) {
			return true, nil
		}
	}
	// Every taken message is visible again (or was deleted without this
	// client hearing of it): SQS delivers them again before anything
	// buffered behind them.
	if st.buf.n == 0 {
		clear(st.inflight)
		return false, nil
	}
	if !release {
		return true, nil
	}
	clear(st.inflight)
	for e := st.buf.pop(); e != nil; e = st.buf.pop() {
		q.h.held.unlink(e)
		stale = append(stale, e.m)
	}
	return true, stale
}

// fifoArrivedLocked notes a message SQS delivered for the queue: on a
// FIFO host its group was unlocked, so no message taken earlier is still
// in flight.
func (q *Queue) fifoArrivedLocked(st *qstate) {
	if q.h.fifo && len(st.inflight) > 0 {
		clear(st.inflight)
	}
}

// releaseNow makes messages visible again at once.
func (h *Host) releaseNow(msgs []types.Message) {
	for _, m := range msgs {
		h.release(m, 0, "fifo-stale")
	}
}

// FIFO host queue attributes: FifoQueue makes one, the others need it.
const attrFifoQueue = "FifoQueue"

var fifoOnlyAttributes = map[string][]string{
	"ContentBasedDeduplication": {"true", "false"},
	"DeduplicationScope":        {"messageGroup", "queue"},
	"FifoThroughputLimit":       {"perMessageGroupId", "perQueue"},
}

// wantsFIFO reports whether host queue attributes ask for a FIFO queue.
func wantsFIFO(attrs map[string]string) bool { return strings.EqualFold(attrs[attrFifoQueue], "true") }

// checkFIFOAttributes checks the FIFO attributes of a host queue as SQS
// would: FifoQueue true or false, the others only with FifoQueue true
// and with one of their values.
func checkFIFOAttributes(op string, attrs map[string]string) error {
	if v, ok := attrs[attrFifoQueue]; ok && !strings.EqualFold(v, "true") && !strings.EqualFold(v, "false") {
		return wire.Invalid(op, attrFifoQueue, "%q must be true or false", v)
	}
	fifo := wantsFIFO(attrs)
	for _, k := range slices.Sorted(maps.Keys(fifoOnlyAttributes)) {
		v, ok := attrs[k]
		if !ok {
			continue
		}
		if !fifo {
			return wire.Invalid(op, k, "only a FIFO host queue (FifoQueue true) takes it")
		}
		if !slices.Contains(fifoOnlyAttributes[k], v) {
			return wire.Invalid(op, k, "%q must be one of %s", v, strings.Join(fifoOnlyAttributes[k], ", "))
		}
	}
	if attrs["FifoThroughputLimit"] == "perMessageGroupId" && attrs["DeduplicationScope"] != "messageGroup" {
		return wire.Invalid(op, "FifoThroughputLimit", "perMessageGroupId needs DeduplicationScope messageGroup")
	}
	return nil
}

// CheckFIFOPrefix rejects a prefix too long for FIFO host queues when
// attrs ask for one: their names end in ".fifo", which SQS counts in the
// 80 characters.
func CheckFIFOPrefix(op, prefix string, attrs map[string]string) error {
	if max := maxPrefix - len(".fifo"); wantsFIFO(attrs) && len(prefix) > max {
		return wire.Invalid(op, "Prefix", "%q is longer than %d characters, the most a FIFO host queue's name leaves (it ends in .fifo)", prefix, max)
	}
	return nil
}

// answeredLinger is how long the delete of a message an expectation took
// may wait for company: a tenth of its visibility, but not at all on a
// FIFO host, where the message's group (its reply queue) stays locked
// until the delete and the group's next message would wait for it.
func (h *Host) answeredLinger() time.Duration {
	if h.fifo {
		return batch.DeleteLinger
	}
	return batch.DeleteWithin(h.recvVisibility)
}
