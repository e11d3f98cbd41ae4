package sqstest

import (
	"context"
	"time"

	"github.com/tempqueues/tempqueues/sqstest/internal/api"
	"github.com/tempqueues/tempqueues/sqstest/internal/journal"
)

// deleteOne deletes the message behind handle. As on SQS, a well-formed
// handle of a message already deleted succeeds, and so does a handle from
// an earlier receive of a message received again since, without deleting
// it ("you must provide the most recently received receipt handle").
// Callers hold s.mu.
func (s *Server) deleteOne(q *queue, handle string) *api.Error {
	if handle == "" {
		return api.MissingParameter("ReceiptHandle")
	}
	id, ok := parseReceiptHandle(q, handle)
	if !ok {
		return api.ReceiptHandleInvalid(handle)
	}
	if m := q.byID[id]; m != nil && m.handle == handle {
		q.remove(m)
		s.journalAdd(&journal.Record{T: "d", Q: q.name, ID: m.id})
		if q.fifo {
			// The group's next message may now be deliverable.
			q.wake(1)
		}
	}
	return nil
}

// changeOne sets the visibility timeout of an in-flight message. Callers
// hold s.mu.
func (s *Server) changeOne(q *queue, handle string, vtp *int, now time.Time) *api.Error {
	if handle == "" {
		return api.MissingParameter("ReceiptHandle")
	}
	if vtp == nil {
		return api.MissingParameter("VisibilityTimeout")
	}
	vt := *vtp
	if vt < 0 || vt > maxVisibilitySeconds {
		return api.InvalidParameter("Value %d for parameter VisibilityTimeout is invalid. Reason: Must be >= 0 and <= 43200.", vt)
	}
	id, ok := parseReceiptHandle(q, handle)
	if !ok {
		return api.ReceiptHandleInvalid(handle)
	}
	m := q.byID[id]
	if m == nil || m.handle != handle {
		// Deleted, or received again since: SQS's answer to both.
		return api.InvalidParameter("Value %s for parameter ReceiptHandle is invalid. Reason: Message does not exist or is not available for visibility timeout change.", handle)
	}
	if !m.inFlight(now) {
		return api.SenderError("MessageNotInflight", "The message referred to is not in flight.")
	}
	at := now.Add(time.Duration(vt) * time.Second)
	if at.Sub(m.receivedAt) > maxVisibilitySeconds*time.Second {
		return api.InvalidParameter("Value %d for parameter VisibilityTimeout is invalid. Reason: Total VisibilityTimeout for the message is beyond the limit [43200 seconds]", vt)
	}
	m.visibleAt = at
	q.reposition(m, now)
	s.journalAdd(&journal.Record{T: "v", Q: q.name, ID: m.id, Vis: nanos(at)})
	if vt == 0 {
		q.wake(1)
	} else {
		s.noteFuture(q, at, now)
	}
	return nil
}

func (s *Server) deleteMessage(_ context.Context, in *api.DeleteMessageInput) (*api.Empty, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q, err := s.lookup(in.QueueURL)
	if err != nil {
		return nil, err
	}
	if err := s.deleteOne(q, in.ReceiptHandle); err != nil {
		return nil, err
	}
	return &api.Empty{}, nil
}

func (s *Server) changeMessageVisibility(_ context.Context, in *api.ChangeVisibilityInput) (*api.Empty, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q, err := s.lookup(in.QueueURL)
	if err != nil {
		return nil, err
	}
	if err := s.changeOne(q, in.ReceiptHandle, in.VisibilityTimeout, s.clock.now()); err != nil {
		return nil, err
	}
	return &api.Empty{}, nil
}

// handleBatch runs one per-entry operation over a batch, collecting entry
// failures as SQS does.
func (s *Server) handleBatch(in *api.HandleBatchInput, fn func(q *queue, e *api.BatchEntry, now time.Time) *api.Error) (*api.HandleBatchOutput, error) {
	ids := make([]string, len(in.Entries))
	for i, e := range in.Entries {
		ids[i] = e.ID
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	q, err := s.lookup(in.QueueURL)
	if err != nil {
		return nil, err
	}
	if err := checkBatch(ids); err != nil {
		return nil, err
	}
	now := s.clock.now()
	out := &api.HandleBatchOutput{Successful: []api.BatchID{}, Failed: []api.BatchError{}}
	for i := range in.Entries {
		e := &in.Entries[i]
		if err := fn(q, e, now); err != nil {
			out.Failed = append(out.Failed, failed(e.ID, err))
			continue
		}
		out.Successful = append(out.Successful, api.BatchID{ID: e.ID})
	}
	return out, nil
}

func (s *Server) deleteMessageBatch(_ context.Context, in *api.HandleBatchInput) (*api.HandleBatchOutput, error) {
	return s.handleBatch(in, func(q *queue, e *api.BatchEntry, _ time.Time) *api.Error {
		return s.deleteOne(q, e.ReceiptHandle)
	})
}

func (s *Server) changeMessageVisibilityBatch(_ context.Context, in *api.HandleBatchInput) (*api.HandleBatchOutput, error) {
	return s.handleBatch(in, func(q *queue, e *api.BatchEntry, now time.Time) *api.Error {
		return s.changeOne(q, e.ReceiptHandle, e.VisibilityTimeout, now)
	})
}
