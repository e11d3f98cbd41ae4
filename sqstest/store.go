package sqstest

import (
	"container/heap"
	"sort"
	"time"
)

// A standard queue keeps the messages a receive cannot take (in flight or
// delayed) out of its list, in a heap ordered by the time they become
// visible, so that a receive scans only messages that may be visible: a
// queue with 100,000 messages in flight answers a receive as fast as an
// empty one. Each receive first moves the messages whose time has come to
// the list's tail (promote). FIFO queues keep every message in the list, in
// send order, which their delivery rules need.

// hiddenHeap orders hidden messages by visibleAt; message.hidx is a
// message's index + 1 in it (0: not in the heap).
type hiddenHeap []*message

func (h hiddenHeap) Len() int           { return len(h) }
func (h hiddenHeap) Less(i, j int) bool { return h[i].visibleAt.Before(h[j].visibleAt) }
func (h hiddenHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].hidx, h[j].hidx = i+1, j+1
}
func (h *hiddenHeap) Push(x any) {
	m := x.(*message)
	m.hidx = len(*h) + 1
	*h = append(*h, m)
}
func (h *hiddenHeap) Pop() any {
	old := *h
	m := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	m.hidx = 0
	return m
}

// insert adds m to q: to the list's tail, or to the heap if q is a
// standard queue and m is hidden at now.
func (q *queue) insert(m *message, now time.Time) {
	q.byID[m.id] = m
	q.order++
	m.order = q.order
	if !q.fifo && m.visibleAt.After(now) {
		heap.Push(&q.hidden, m)
		return
	}
	q.push(m)
}

// detach takes m out of the list or the heap, not out of byID.
func (q *queue) detach(m *message) {
	if m.hidx > 0 {
		heap.Remove(&q.hidden, m.hidx-1)
		return
	}
	q.unlink(m)
}

// reposition puts m where its visibleAt now places it: a standard queue's
// message goes to the heap or the list's tail; a FIFO queue's stays.
func (q *queue) reposition(m *message, now time.Time) {
	if q.fifo {
		return
	}
	q.detach(m)
	q.insert(m, now)
}

// promote moves the hidden messages visible at now to the list's tail.
func (q *queue) promote(now time.Time) {
	for len(q.hidden) > 0 && !q.hidden[0].visibleAt.After(now) {
		m := heap.Pop(&q.hidden).(*message)
		q.push(m)
	}
}

// clear drops every message.
func (q *queue) clear() {
	q.head, q.tail = nil, nil
	for _, m := range q.hidden {
		m.hidx = 0
	}
	q.hidden = nil
	q.byID = make(map[string]*message)
}

// each calls fn for every message, listed ones first; fn must not change q.
func (q *queue) each(fn func(m *message)) {
	for m := q.head; m != nil; m = m.next {
		fn(m)
	}
	for _, m := range q.hidden {
		fn(m)
	}
}

// all returns every message in the order they were last placed (sent or
// received, for a standard queue; sent, for a FIFO queue).
func (q *queue) all() []*message {
	out := make([]*message, 0, len(q.byID))
	q.each(func(m *message) { out = append(out, m) })
	if len(q.hidden) > 0 {
		sort.Slice(out, func(i, j int) bool { return out[i].order < out[j].order })
	}
	return out
}

// nextVisible returns the earliest time after now at which a message
// becomes visible, or the zero time. A hidden message whose time has come
// but that no receive has promoted yet gives a time not after now: a timer
// armed for it fires at once and wakes a parked receive to take it.
func (q *queue) nextVisible(now time.Time) time.Time {
	var next time.Time
	if len(q.hidden) > 0 {
		next = q.hidden[0].visibleAt
	}
	for m := q.head; m != nil; m = m.next {
		if m.visibleAt.After(now) && (next.IsZero() || m.visibleAt.Before(next)) {
			next = m.visibleAt
		}
	}
	return next
}
