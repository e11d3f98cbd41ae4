package sqstest

import (
	"time"

	"github.com/tempqueues/tempqueues/sqstest/internal/journal"
)

// moveToDLQ moves m, which has been received maxReceiveCount times, to the
// queue's dead-letter queue, as SQS does when such a message would be
// received again. It keeps the message id, body, attributes, send time
// (retention counts from the original send, as for standard queues on AWS)
// and receive count, and records the source ARN. It reports false, leaving
// m in place, when the dead-letter queue no longer exists. Callers hold
// s.mu.
func (s *Server) moveToDLQ(q *queue, m *message, now time.Time) bool {
	dlq := s.queueByARN(q.redrive.targetARN)
	if dlq == nil {
		return false
	}
	q.remove(m)
	m.visibleAt = now
	m.handle = ""
	m.dlqSourceARN = q.arn
	if dlq.fifo {
		dlq.seq++
		m.seqNum = seqString(dlq.seq)
	}
	dlq.insert(m, now)
	// The copy first: a crash between the two records leaves the message
	// in both queues, not in neither.
	s.journalMessage(dlq, m)
	s.journalAdd(&journal.Record{T: "d", Q: q.name, ID: m.id})
	dlq.wake(1)
	return true
}
