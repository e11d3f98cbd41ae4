package sqstest

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/tempqueues/tempqueues/sqstest/internal/api"
)

// dedupWindow is SQS's FIFO deduplication interval.
const dedupWindow = 5 * time.Minute

// dedupEntry remembers a message accepted by a FIFO queue, so that a
// duplicate within the window returns the original ids.
type dedupEntry struct {
	messageID string
	seqNum    string
	at        time.Time
}

// fifoCheck applies the FIFO send rules: a group id is required, and a
// deduplication id unless content-based deduplication is on, in which case
// it defaults to the SHA-256 of the body.
func (q *queue) fifoCheck(m *message) *api.Error {
	if m.group == "" {
		return api.MissingParameter("MessageGroupId")
	}
	if m.dedupID == "" {
		if !q.boolAttr(attrContentDedup) {
			return api.InvalidParameter("The queue should either have ContentBasedDeduplication enabled or MessageDeduplicationId provided explicitly")
		}
		sum := sha256.Sum256([]byte(m.body))
		m.dedupID = hex.EncodeToString(sum[:])
	}
	return nil
}

// deduplicate reports whether m repeats a message sent within the window
// and, if not, records it (in the journal too, so that the window holds
// across a restart). Callers hold s.mu.
func (s *Server) deduplicate(q *queue, m *message, now time.Time) (dedupEntry, bool) {
	if now.Sub(q.lastPrune) > time.Minute {
		for k, e := range q.dedup {
			if now.Sub(e.at) >= dedupWindow {
				delete(q.dedup, k)
			}
		}
		q.lastPrune = now
	}
	key := m.dedupID
	if q.attrs[attrDedupScope] == "messageGroup" {
		key = m.group + "\x00" + key
	}
	if e, ok := q.dedup[key]; ok && now.Sub(e.at) < dedupWindow {
		return e, true
	}
	// The sequence number is assigned by enqueue right after; predict it
	// so the entry can answer duplicates with the original.
	e := dedupEntry{messageID: m.id, seqNum: seqString(q.seq + 1), at: now}
	q.dedup[key] = e
	if s.journal != nil {
		s.journalAdd(dedupRecord(q, key, e))
	}
	return dedupEntry{}, false
}

// lockedGroups returns the FIFO groups that have a message in flight: no
// other message of such a group may be delivered until it is deleted or
// becomes visible again.
func (q *queue) lockedGroups(now time.Time) map[string]bool {
	locked := make(map[string]bool)
	for m := q.head; m != nil; m = m.next {
		if m.inFlight(now) {
			locked[m.group] = true
		}
	}
	return locked
}

// takeFIFO picks up to n messages for a receive from the FIFO queue q:
// only from groups with no message in flight, each group's in order and
// none behind one of its messages that is not visible. As SQS does, it
// returns as many messages of one group as it can before another's: the
// groups in the order of their first deliverable message. Callers hold
// s.mu.
func (s *Server) takeFIFO(q *queue, now time.Time, n int) []*message {
	locked := q.lockedGroups(now)
	blocked := make(map[string]bool)
	var order []string
	byGroup := make(map[string][]*message)
	for m := q.head; m != nil; {
		next := m.next
		switch {
		case q.expired(m, now):
			q.remove(m)
		case !m.visible(now):
			blocked[m.group] = true // order within a group
		case locked[m.group] || blocked[m.group]:
		default:
			if _, ok := byGroup[m.group]; !ok {
				order = append(order, m.group)
			}
			byGroup[m.group] = append(byGroup[m.group], m)
		}
		m = next
	}
	var got []*message
	for _, g := range order {
		for _, m := range byGroup[g] {
			if len(got) == n {
				return got
			}
			if !s.redriven(q, m, now) {
				got = append(got, m)
			}
		}
	}
	return got
}

// redriven moves m to q's dead-letter queue when a receive would exceed
// its maxReceiveCount, and reports whether it did. Callers hold s.mu.
func (s *Server) redriven(q *queue, m *message, now time.Time) bool {
	return q.redrive != nil && m.receives >= q.redrive.maxReceiveCount && s.moveToDLQ(q, m, now)
}

// seqString formats a SequenceNumber: 20 digits, like AWS's, which sort as
// strings in send order.
func seqString(n uint64) string { return fmt.Sprintf("%020d", n) }
