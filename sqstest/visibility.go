package sqstest

import (
	"context"
	"time"
)

// deleteOne deletes the message behind handle. As on SQS, a well-formed
// handle of a message already deleted succeeds, and so does a handle from
// an earlier receive of a message received again since, without deleting
// it ("you must provide the most recently received receipt handle").
// Callers hold s.mu.
func (s *Server) deleteOne(q *queue, handle string) *apiError {
	if handle == "" {
		return errMissingParameter("ReceiptHandle")
	}
	id, ok := parseReceiptHandle(q, handle)
	if !ok {
		return errReceiptHandleInvalid(handle)
	}
	if m := q.byID[id]; m != nil && m.handle == handle {
		q.remove(m)
		s.journalAdd(&journalRecord{T: "d", Q: q.name, ID: m.id})
		if q.fifo {
			// The group's next message may now be deliverable.
			q.wake(1)
		}
	}
	return nil
}

// changeOne sets the visibility timeout of an in-flight message. Callers
// hold s.mu.
func (s *Server) changeOne(q *queue, handle string, vtp *int, now time.Time) *apiError {
	if handle == "" {
		return errMissingParameter("ReceiptHandle")
	}
	if vtp == nil {
		return errMissingParameter("VisibilityTimeout")
	}
	vt := *vtp
	if vt < 0 || vt > maxVisibilitySeconds {
		return errInvalidParameter("Value %d for parameter VisibilityTimeout is invalid. Reason: Must be >= 0 and <= 43200.", vt)
	}
	id, ok := parseReceiptHandle(q, handle)
	if !ok {
		return errReceiptHandleInvalid(handle)
	}
	m := q.byID[id]
	if m == nil || m.handle != handle {
		// Deleted, or received again since: SQS's answer to both.
		return errInvalidParameter("Value %s for parameter ReceiptHandle is invalid. Reason: Message does not exist or is not available for visibility timeout change.", handle)
	}
	if !m.inFlight(now) {
		return senderError("MessageNotInflight", "The message referred to is not in flight.")
	}
	at := now.Add(time.Duration(vt) * time.Second)
	if at.Sub(m.receivedAt) > maxVisibilitySeconds*time.Second {
		return errInvalidParameter("Value %d for parameter VisibilityTimeout is invalid. Reason: Total VisibilityTimeout for the message is beyond the limit [43200 seconds]", vt)
	}
	m.visibleAt = at
	q.reposition(m, now)
	s.journalAdd(&journalRecord{T: "v", Q: q.name, ID: m.id, Vis: nanos(at)})
	if vt == 0 {
		q.wake(1)
	} else {
		s.noteFuture(q, at, now)
	}
	return nil
}

func (s *Server) deleteMessage(_ context.Context, in *deleteMessageInput) (*empty, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q, err := s.lookup(in.QueueURL)
	if err != nil {
		return nil, err
	}
	if err := s.deleteOne(q, in.ReceiptHandle); err != nil {
		return nil, err
	}
	return &empty{}, nil
}

func (s *Server) changeMessageVisibility(_ context.Context, in *changeVisibilityInput) (*empty, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q, err := s.lookup(in.QueueURL)
	if err != nil {
		return nil, err
	}
	if err := s.changeOne(q, in.ReceiptHandle, in.VisibilityTimeout, s.clock.Now()); err != nil {
		return nil, err
	}
	return &empty{}, nil
}

// handleBatch runs one per-entry operation over a batch, collecting entry
// failures as SQS does.
func (s *Server) handleBatch(in *handleBatchInput, fn func(q *queue, e *batchEntry, now time.Time) *apiError) (*handleBatchOutput, error) {
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
	now := s.clock.Now()
	out := &handleBatchOutput{Successful: []batchID{}, Failed: []batchError{}}
	for i := range in.Entries {
		e := &in.Entries[i]
		if err := fn(q, e, now); err != nil {
			out.Failed = append(out.Failed, failed(e.ID, err))
			continue
		}
		out.Successful = append(out.Successful, batchID{ID: e.ID})
	}
	return out, nil
}

func (s *Server) deleteMessageBatch(_ context.Context, in *handleBatchInput) (*handleBatchOutput, error) {
	return s.handleBatch(in, func(q *queue, e *batchEntry, _ time.Time) *apiError {
		return s.deleteOne(q, e.ReceiptHandle)
	})
}

func (s *Server) changeMessageVisibilityBatch(_ context.Context, in *handleBatchInput) (*handleBatchOutput, error) {
	return s.handleBatch(in, func(q *queue, e *batchEntry, now time.Time) *apiError {
		return s.changeOne(q, e.ReceiptHandle, e.VisibilityTimeout, now)
	})
}
