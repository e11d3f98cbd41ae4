package hostq

import (
	"container/heap"
	"time"
)

// expiryHeap orders virtual queues with a retention period by the time the
// host's maintenance goroutine next looks at them. Activity only updates
// lastActive; a queue found still active when its turn comes is pushed back
// with its new deadline. So activity costs no heap work, and no timer exists
// per queue.
type expiryHeap []*Queue

func (e expiryHeap) Len() int           { return len(e) }
func (e expiryHeap) Less(i, j int) bool { return e[i].expireAt < e[j].expireAt }
func (e expiryHeap) Swap(i, j int) {
	e[i], e[j] = e[j], e[i]
	e[i].heapIdx = int32(i)
	e[j].heapIdx = int32(j)
}
func (e *expiryHeap) Push(x any) {
	q := x.(*Queue)
	q.heapIdx = int32(len(*e))
	*e = append(*e, q)
}
func (e *expiryHeap) Pop() any {
	old := *e
	q := old[len(old)-1]
	old[len(old)-1] = nil
	*e = old[:len(old)-1]
	q.heapIdx = -1
	return q
}

// push adds q and reports whether it is now the earliest entry.
func (e *expiryHeap) push(q *Queue) bool {
	heap.Push(e, q)
	return q.heapIdx == 0
}

func (e *expiryHeap) remove(q *Queue) {
	heap.Remove(e, int(q.heapIdx))
}

// dueExpiriesLocked returns the virtual queues idle past their retention and
// the next time the heap needs a look (zero when empty). Queues with a receive
// in progress or buffered messages do not expire.
func (h *Host) dueExpiriesLocked(now time.Time) (expired []*Queue, next time.Time) {
	nowNano := now.UnixNano()
	for len(h.expiry) > 0 {
		q := h.expiry[0]
		if q.expireAt > nowNano {
			return expired, time.Unix(0, q.expireAt)
		}
		heap.Pop(&h.expiry)
		deadline := q.lastActive + int64(q.retention)*int64(time.Second)
		// A receive in progress, or messages nobody has taken yet, keep the
		// queue alive: it holds something we would lose. (Unreceived
		// buffered messages are released before their visibility ends, so
		// this does not last.)
		if q.receivers > 0 || (q.st != nil && q.st.buf.n > 0) {
			deadline = max(deadline, nowNano+int64(q.retention)*int64(time.Second))
		}
		if deadline > nowNano {
			q.expireAt = deadline
			heap.Push(&h.expiry, q)
			continue
		}
		expired = append(expired, q)
	}
	return expired, time.Time{}
}
