package sqstest

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/tempqueues/tempqueues/sqstest/internal/api"
	"github.com/tempqueues/tempqueues/sqstest/internal/journal"
)

// waiter is a parked long poll. A send signals waiters one per new visible
// message (oldest first, removing them from the queue's list) rather than
// broadcasting, so 50 parked polls and one send cost one wake-up.
type waiter struct {
	ch chan struct{} // capacity 1: a signal never blocks the signaller
}

func (w *waiter) signal() {
	select {
	case w.ch <- struct{}{}:
	default:
	}
}

// wake signals up to n waiters and removes them from the list. Callers hold
// s.mu.
func (q *queue) wake(n int) {
	if n > len(q.waiters) {
		n = len(q.waiters)
	}
	if n <= 0 {
		return
	}
	for _, w := range q.waiters[:n] {
		w.signal()
	}
	q.waiters = append(q.waiters[:0], q.waiters[n:]...)
	if len(q.waiters) == 0 {
		q.stopTimer()
	}
}

// unpark removes w from the list; it reports false if a sender had already
// removed it, i.e. w was handed a message it must use or pass on.
func (q *queue) unpark(w *waiter) bool {
	for i, x := range q.waiters {
		if x == w {
			q.waiters = append(q.waiters[:i], q.waiters[i+1:]...)
			if len(q.waiters) == 0 {
				q.stopTimer()
			}
			return true
		}
	}
	return false
}

func (q *queue) stopTimer() {
	if q.timer != nil {
		q.timer.Stop()
		q.timer = nil
	}
}

// noteFuture tells q that a message becomes visible at t. While polls are
// parked the queue's timer must fire no later than the earliest such
// instant, so that they wake when a delay or a visibility timeout ends.
// Callers hold s.mu.
func (s *Server) noteFuture(q *queue, t, now time.Time) {
	if len(q.waiters) == 0 || (q.timer != nil && !t.Before(q.timerAt)) {
		return
	}
	q.stopTimer()
	q.timerAt = t
	var timer alarm
	timer = s.clock.afterFunc(t.Sub(now), func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if q.timer != timer {
			return // re-armed or stopped meanwhile
		}
		q.timer = nil
		now := s.clock.now()
		q.promote(now) // so that armTimer below looks past them
		c := s.count(q, now)
		q.wake(max(c.visible, 1))
		s.armTimer(q, now)
	})
	q.timer = timer
}

// armTimer arms q's timer for its earliest future visibility, if polls are
// parked and none is armed. Callers hold s.mu.
func (s *Server) armTimer(q *queue, now time.Time) {
	if len(q.waiters) == 0 || q.timer != nil {
		return
	}
	if next := q.nextVisible(now); !next.IsZero() {
		s.noteFuture(q, next, now)
	}
}

var errClosed = api.NewError(http.StatusServiceUnavailable, codeUnavailable, "sqstest server closed")

func (s *Server) receiveMessage(ctx context.Context, in *api.ReceiveMessageInput) (*api.ReceiveMessageOutput, error) {
	maxN := 1
	if in.MaxNumberOfMessages != nil {
		maxN = *in.MaxNumberOfMessages
		if maxN < 1 || maxN > 10 {
			return nil, api.InvalidParameter("Value %d for parameter MaxNumberOfMessages is invalid. Reason: Must be between 1 and 10, if provided.", maxN)
		}
	}
	if in.WaitTimeSeconds != nil && (*in.WaitTimeSeconds < 0 || *in.WaitTimeSeconds > 20) {
		return nil, api.InvalidParameter("Value %d for parameter WaitTimeSeconds is invalid. Reason: Must be >= 0 and <= 20, if provided.", *in.WaitTimeSeconds)
	}
	if in.VisibilityTimeout != nil && (*in.VisibilityTimeout < 0 || *in.VisibilityTimeout > maxVisibilitySeconds) {
		return nil, api.InvalidParameter("Value %d for parameter VisibilityTimeout is invalid. Reason: Must be >= 0 and <= 43200, if provided.", *in.VisibilityTimeout)
	}
	sel := newSelection(in)

	s.mu.Lock()
	defer s.mu.Unlock()
	q, aerr := s.lookup(in.QueueURL)
	if aerr != nil {
		return nil, aerr
	}
	// Absent (the SDK omits zero) means the queue's settings.
	wait := q.intAttr(attrWait)
	if in.WaitTimeSeconds != nil {
		wait = *in.WaitTimeSeconds
	}
	now := s.clock.now()
	deadline := now.Add(time.Duration(wait) * time.Second)
	for {
		if q.deleted {
			return nil, api.QueueDoesNotExist()
		}
		vt := q.intAttr(attrVisibility)
		if in.VisibilityTimeout != nil {
			vt = *in.VisibilityTimeout
		}
		msgs := s.take(q, now, maxN, time.Duration(vt)*time.Second, sel)
		if len(msgs) > 0 || !now.Before(deadline) {
			return &api.ReceiveMessageOutput{Messages: msgs}, nil
		}
		if err := s.park(ctx, q, deadline.Sub(now)); err != nil {
			return nil, err
		}
		now = s.clock.now()
	}
}

// park waits, with s.mu released, until a send or the queue's timer signals
// this poll, d passes on the server's clock, the client goes away or the
// server closes. It costs no CPU while it waits. Callers hold s.mu.
func (s *Server) park(ctx context.Context, q *queue, d time.Duration) error {
	w := &waiter{ch: make(chan struct{}, 1)}
	q.waiters = append(q.waiters, w)
	s.parked++
	s.armTimer(q, s.clock.now())
	t := s.clock.afterFunc(d, w.signal)
	s.mu.Unlock()

	var err error
	select {
	case <-w.ch:
	case <-ctx.Done():
		err = ctx.Err()
	case <-s.done:
		err = errClosed
	}
	t.Stop()

	s.mu.Lock()
	s.parked--
	if !q.unpark(w) && err != nil {
		// A sender chose this poll for a message it will not take: hand
		// the wake-up to the next one so the message is not left waiting.
		q.wake(1)
	}
	return err
}

// selection is what a receive asks to see of each message.
type selection struct {
	allSystem bool
	system    map[string]bool
	allAttrs  bool
	attrs     map[string]bool
	prefixes  []string
}

func newSelection(in *api.ReceiveMessageInput) *selection {
	sel := &selection{system: make(map[string]bool), attrs: make(map[string]bool)}
	for _, n := range append(append([]string(nil), in.AttributeNames...), in.MessageSystemAttributeNames...) {
		if n == "All" {
			sel.allSystem = true
		}
		sel.system[n] = true
	}
	for _, n := range in.MessageAttributeNames {
		switch {
		case n == "All" || n == ".*":
			sel.allAttrs = true
		case strings.HasSuffix(n, ".*"):
			sel.prefixes = append(sel.prefixes, strings.TrimSuffix(n, "*"))
		default:
			sel.attrs[n] = true
		}
	}
	return sel
}

func (sel *selection) wantSystem(n string) bool { return sel.allSystem || sel.system[n] }

func (sel *selection) wantAttr(n string) bool {
	if sel.allAttrs || sel.attrs[n] {
		return true
	}
	for _, p := range sel.prefixes {
		if strings.HasPrefix(n, p) {
			return true
		}
	}
	return false
}

// take receives up to n visible messages from q, moving those past the
// redrive policy's maxReceiveCount to the dead-letter queue instead.
// Callers hold s.mu.
func (s *Server) take(q *queue, now time.Time, n int, vt time.Duration, sel *selection) []api.MessageOutput {
	var got []*message
	if q.fifo {
		got = s.takeFIFO(q, now, n)
	} else {
		q.promote(now)
	}
	for m := q.head; !q.fifo && m != nil && len(got) < n; {
		next := m.next
		switch {
		case q.expired(m, now):
			q.remove(m)
		case !m.visible(now):
		case s.redriven(q, m, now):
		default:
			got = append(got, m)
		}
		m = next
	}
	if len(got) == 0 {
		return nil
	}
	out := make([]api.MessageOutput, len(got))
	for i, m := range got {
		m.receives++
		if m.receives == 1 {
			m.firstReceive = now
		}
		m.receivedAt = now
		m.visibleAt = now.Add(vt)
		m.handle = newReceiptHandle(q, m)
		// Received messages leave a standard queue's list for its heap
		// (or its tail, with no visibility timeout).
		q.reposition(m, now)
		s.journalAdd(&journal.Record{T: "r", Q: q.name, ID: m.id, RC: m.receives, Vis: nanos(m.visibleAt),
			First: nanos(m.firstReceive), Recv: nanos(m.receivedAt), H: m.handle})
		out[i] = s.render(q, m, sel)
	}
	if vt > 0 {
		s.noteFuture(q, now.Add(vt), now)
	}
	return out
}

func millis(t time.Time) string { return strconv.FormatInt(t.UnixMilli(), 10) }

// render builds the wire form of a received message with the system and
// message attributes the receive asked for.
func (s *Server) render(q *queue, m *message, sel *selection) api.MessageOutput {
	out := api.MessageOutput{MessageID: m.id, ReceiptHandle: m.handle, Body: m.body, MD5OfBody: m.md5Body}
	sys := map[string]string{}
	add := func(name, v string) {
		if v != "" && sel.wantSystem(name) {
			sys[name] = v
		}
	}
	add("SenderId", s.opts.AccountID)
	add("SentTimestamp", millis(m.sentAt))
	add("ApproximateReceiveCount", strconv.Itoa(m.receives))
	add("ApproximateFirstReceiveTimestamp", millis(m.firstReceive))
	add("AWSTraceHeader", m.traceHdr)
	add("DeadLetterQueueSourceArn", m.dlqSourceARN)
	add("MessageGroupId", m.group)
	if q.fifo {
		add("MessageDeduplicationId", m.dedupID)
		add("SequenceNumber", m.seqNum)
	}
	if len(sys) > 0 {
		out.Attributes = sys
	}
	if len(m.attrs) > 0 {
		attrs := make(map[string]api.AttrValue)
		for n, v := range m.attrs {
			if sel.wantAttr(n) {
				attrs[n] = v
			}
		}
		if len(attrs) > 0 {
			out.MessageAttributes = attrs
			out.MD5OfMessageAttributes = md5OfAttributes(attrs)
		}
	}
	return out
}
