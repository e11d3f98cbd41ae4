package sqstest

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"
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
func (q *queue) fifoCheck(m *message) *apiError {
	if m.group == "" {
		return errMissingParameter("MessageGroupId")
	}
	if m.dedupID == "" {
		if !q.boolAttr(attrContentDedup) {
			return errInvalidParameter("The queue should either have ContentBasedDeduplication enabled or MessageDeduplicationId provided explicitly")
		}
		sum := sha256.Sum256([]byte(m.body))
		m.dedupID = hex.EncodeToString(sum[:])
	}
	return nil
}

// deduplicate reports whether m repeats a message sent within the window
// and, if not, records it.
func (q *queue) deduplicate(m *message, now time.Time) (dedupEntry, bool) {
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
	q.dedup[key] = dedupEntry{messageID: m.id, seqNum: seqString(q.seq + 1), at: now}
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

// seqString formats a SequenceNumber: 20 digits, like AWS's, which sort as
// strings in send order.
func seqString(n uint64) string { return fmt.Sprintf("%020d", n) }
