package hostq

import "github.com/aws/aws-sdk-go-v2/service/sqs/types"

// entry is a received message the host holds for a queue. It is linked
// into two lists under the host's lock: the host's ledger, in receipt
// order, which the release scheduler reads from the front, and its queue's
// buffer, in the same order. Because both lists keep receipt order and
// every message of a host gets the same receive visibility, the ledger's
// oldest entry is always the oldest of its queue's buffer: releasing it
// pops its queue's front, and taking a queue's front unlinks it from the
// ledger in O(1). No entry is ever in one list and not the other.
type entry struct {
	m          types.Message
	q          *Queue
	deadline   int64  // unix nanos: when its receive visibility ends
	prev, next *entry // ledger
	qnext      *entry // queue buffer
}

// ledger is the host's list of held messages, oldest first.
type ledger struct {
	head, tail *entry
	n          int
}

func (l *ledger) push(e *entry) {
	e.prev, e.next = l.tail, nil
	if l.tail != nil {
		l.tail.next = e
	} else {
		l.head = e
	}
	l.tail = e
	l.n++
}

func (l *ledger) unlink(e *entry) {
	if e.prev != nil {
		e.prev.next = e.next
	} else {
		l.head = e.next
	}
	if e.next != nil {
		e.next.prev = e.prev
	} else {
		l.tail = e.prev
	}
	e.prev, e.next = nil, nil
	l.n--
}

// buffer is one queue's held messages, oldest first, linked through the
// same entries as the ledger.
type buffer struct {
	head, tail *entry
	n          int
}

func (b *buffer) push(e *entry) {
	e.qnext = nil
	if b.tail != nil {
		b.tail.qnext = e
	} else {
		b.head = e
	}
	b.tail = e
	b.n++
}

func (b *buffer) pop() *entry {
	e := b.head
	if e == nil {
		return nil
	}
	b.head = e.qnext
	if b.head == nil {
		b.tail = nil
	}
	e.qnext = nil
	b.n--
	return e
}
