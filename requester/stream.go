package requester

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/internal/callbound"
	"github.com/tempqueues/tempqueues/internal/hostq"
	"github.com/tempqueues/tempqueues/internal/payload"
	"github.com/tempqueues/tempqueues/internal/wire"
	"github.com/tempqueues/tempqueues/sqsapi"
)

// drainFor is how long a stream stopped before its final reply keeps
// taking (deleting and counting) the replies still coming, unless the
// final one comes first: the responder does not know that its requester
// stopped reading.
const drainFor = 30 * time.Second

// Stream is the reply stream of one request: the messages a responder's
// handler sends with Request.Send, then its final reply. Next returns them
// in order (the sequence numbers in their TempQueues.Stream attribute
// restore the order a standard queue does not keep), each once, and io.EOF
// after the final one. Next is for one reader at a time; Close may be
// called from any goroutine.
//
// A stream costs what a call costs: one entry in the host's map, no queue
// and no goroutine. Its replies are deleted in batches as they arrive;
// those arriving after the stream stopped early (Close, its deadline, an
// error) are deleted and counted in Stats.LateReplies for up to 30 s, or
// until the final one, and otherwise count as orphans when the host queue
// is next polled.
type Stream struct {
	r         *Requester
	host      *hostq.Host
	replyName string
	requestID string
	queueURL  string
	sentAt    time.Time
	ctx       context.Context // bounds the stream
	cancelCtx context.CancelFunc

	wake chan struct{} // a message or the end arrived

	mu        sync.Mutex
	next      int                   // sequence number Next returns next
	buf       map[int]types.Message // arrived, not yet returned
	final     int                   // the final reply's number, or -1
	endMark   bool                  // the message at final is an end mark: none to return
	got       int                   // distinct messages arrived
	err       error                 // why the stream stopped early
	stopped   bool                  // Close, deadline, error: drain what comes
	drained   bool                  // the final arrived or arrives: nothing more to take
	stopWatch func() bool
	drain     *time.Timer
	last      *types.Message              // the final reply, once it arrived
	after     func(*types.Message, error) // Options.Observer's done, or nil
	sess      *Session                    // the session whose replies these are, or nil
}

// SendMessageAndStream sends a request whose responder answers with a
// stream of replies (responder.Request.Send, then its final Reply) and
// returns once it is sent. The request carries TempQueues.Stream, so it
// has room for 7 attributes of the caller's. The context bounds the whole
// stream (Options.Timeout applies when it has no deadline): when it ends
// before the final reply, Next returns an error matching ErrTimeout (or ctx's error).
// A responder that does not stream (a Java one) sends one reply, which the
// stream returns and ends with.
func (r *Requester) SendMessageAndStream(ctx context.Context, in *sqs.SendMessageInput, optFns ...func(*sqs.Options)) (*Stream, error) {
	const op = "requester.SendMessageAndStream"
	in, replyName, after := r.onSend(ctx, in, 1)
	requestID, attrs, body, offload, err := r.checkRequest(op, in, compressOrOffload, sqsapi.StreamAttribute)
	if err != nil {
		r.after(after, nil, err)
		return nil, err
	}
	in = withBody(in, body)
	attrs[sqsapi.StreamAttribute] = wire.StringAttribute("1")
	s := &Stream{r: r, replyName: replyName, requestID: requestID, queueURL: aws.ToString(in.QueueUrl), final: -1,
		buf: make(map[int]types.Message), wake: make(chan struct{}, 1), after: after}
	if s.requestID == "" {
		s.requestID = s.replyName
	}
	if err := s.open(ctx, in, attrs, optFns, offload); err != nil {
		r.after(after, nil, err)
		return nil, err
	}
	return s, nil
}

// open registers the stream on the host, sends its request and starts
// watching its context. With offload, the request's body goes to
// Options.PayloadStore first, and the request carries its pointer.
func (s *Stream) open(ctx context.Context, in *sqs.SendMessageInput, attrs map[string]types.MessageAttributeValue, optFns []func(*sqs.Options), offload bool) error {
	r := s.r
	for i, fn := range optFns {
		if fn == nil {
			return wire.Invalid("requester.SendMessageAndStream", "optFns", "option function %d is nil", i)
		}
	}
	if r.isClosed() {
		return sqsapi.ErrClosed
	}
	var err error
	if s.host, err = r.expectWith(ctx, func(h *hostq.Host) error { return h.ExpectMany(s.replyName, s.onReply) }); err != nil {
		return r.closedErr(err)
	}
	s.ctx = ctx
	if _, ok := ctx.Deadline(); !ok && r.opts.Timeout > 0 {
		s.ctx, s.cancelCtx = context.WithTimeout(ctx, r.opts.Timeout)
	}
	attrs[sqsapi.ResponseQueueURLAttribute] = wire.StringAttribute(wire.VirtualQueueURL(s.host.URL(), s.replyName))
	attrs[sqsapi.RequestIDAttribute] = wire.StringAttribute(s.requestID)
	var object *payload.Pointer
	if offload {
		deadline, _ := s.ctx.Deadline()
		p, err := payload.Offload(s.ctx, r.opts.PayloadStore, *in.MessageBody, attrs, deadline)
		if err != nil {
			s.host.Unexpect(s.replyName)
			if s.cancelCtx != nil {
				s.cancelCtx()
			}
			r.failed.Add(1)
			return fmt.Errorf("%s: %w", s.op(), err)
		}
		object = &p
		in = withBody(in, aws.String(p.String()))
	}
	r.stamp(s.ctx, in.MessageBody, s.queueURL, attrs, false)
	req := *in
	req.MessageAttributes = attrs
	req.MessageGroupId, req.MessageDeduplicationId = fifoRequestIDs(&req, s.requestID)
	s.sentAt = time.Now()
	if err := r.send(s.ctx, "requester.SendMessageAndStream", &req, optFns); err != nil {
		if s.sess != nil && s.ctx.Err() != nil {
			s.abandonUnsent(err)
		} else {
			s.host.Unexpect(s.replyName)
			r.dropObject(object) // nobody will read it
		}
		if s.cancelCtx != nil {
			s.cancelCtx()
		}
		if errors.Is(err, context.DeadlineExceeded) && callbound.Ended(s.ctx) {
			r.timedOut.Add(1)
			return &timeoutError{requestID: s.requestID, queueURL: s.queueURL, waited: time.Since(s.sentAt), sendErr: err}
		}
		r.failed.Add(1)
		return r.closedErr(err)
	}
	s.mu.Lock()
	if !s.stopped {
		s.stopWatch = context.AfterFunc(s.ctx, s.onContextDone)
	}
	s.mu.Unlock()
	return nil
}

// op names the call that opened s.
func (s *Stream) op() string {
	if s.sess != nil {
		return "requester.OpenSession"
	}
	return "requester.SendMessageAndStream"
}

// withBody returns in with body as its body: in itself when that is its
// body already, else a copy.
func withBody(in *sqs.SendMessageInput, body *string) *sqs.SendMessageInput {
	if in.MessageBody == body {
		return in
	}
	cp := *in
	cp.MessageBody = body
	return &cp
}

// abandonUnsent is for a session whose context ended while its request
// was being sent: SQS may have taken the request all the same, and its
// handler would then run for nobody until its deadline. The stream stays
// registered for drainFor, stopped, as one closed early does (what comes
// is deleted), so that the session's open, if it comes, gets a cancel.
func (s *Stream) abandonUnsent(err error) {
	s.mu.Lock()
	s.stopped, s.err = true, err
	s.drain = time.AfterFunc(drainFor, func() { s.host.Unexpect(s.replyName) })
	s.mu.Unlock()
	s.sess.mu.Lock()
	s.sess.abandoned = true
	s.sess.mu.Unlock()
}

// RequestID returns the id carried in the request's TempQueues.RequestId
// attribute and echoed in every reply's TempQueues.CorrelationId.
func (s *Stream) RequestID() string { return s.requestID }

// Next returns the stream's next message in order, waiting for it; io.EOF
// after the final reply; the stream's error once it stopped early
// (ErrTimeout at its deadline, sqsapi.ErrClosed after Close or the requester's
// Close). When ctx ends first, Next returns ctx's error and the stream goes
// on.
func (s *Stream) Next(ctx context.Context) (*types.Message, error) {
	for {
		s.mu.Lock()
		if m, ok := s.buf[s.next]; ok && !s.stopped && !s.completeLocked() {
			if _, pointed := payload.ParsePointer(m); pointed {
				s.mu.Unlock()
				if err := s.fetch(ctx, m); err != nil {
					return nil, err
				}
				continue
			}
			delete(s.buf, s.next)
			s.next++
			next, last := s.next, s.completeLocked()
			s.mu.Unlock()
			if s.sess != nil {
				s.sess.onRead(next)
				if last {
					// The final reply is the caller's before its receiver
					// has told the session: a Send after it must see it.
					s.sess.onFinal()
				}
			}
			return &m, nil
		}
		switch {
		case s.completeLocked():
			s.mu.Unlock()
			s.stop(io.EOF) // releases the context watch
			return nil, io.EOF
		case s.stopped:
			err := s.err
			s.mu.Unlock()
			return nil, err
		}
		s.mu.Unlock()
		select {
		case <-s.wake:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// fetch reads the body of m, the stream's next message, from
// Options.PayloadStore, where m points (docs/wire.md, "Payloads in S3"),
// on the reader's goroutine and under its ctx, puts it in m's place and
// deletes the object. When ctx ends first, m stays for the next Next. A
// pointer that cannot be read stops the stream with an error matching
// ErrBadResponse.
func (s *Stream) fetch(ctx context.Context, m types.Message) error {
	out, p, _, err := payload.Fetch(ctx, s.r.opts.PayloadStore, m)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		s.r.failed.Add(1)
		err = badResponse(s.requestID, err)
		s.stop(err)
		return err
	}
	s.r.background(func() { s.r.dropObject(&p) })
	s.mu.Lock()
	defer s.mu.Unlock()
	// Next is for one reader at a time: m is still at s.next, unless the
	// stream stopped meanwhile.
	if _, ok := s.buf[s.next]; ok {
		s.buf[s.next] = out
		if s.next == s.final && !s.endMark {
			s.last = &out
		}
	}
	return nil
}

// dropObjects deletes the objects that msgs, messages nobody will read,
// point to in Options.PayloadStore.
func (r *Requester) dropObjects(msgs ...types.Message) {
	if r.opts.PayloadStore == nil {
		return
	}
	for _, m := range msgs {
		if p, ok := payload.ParsePointer(m); ok {
			r.background(func() { r.dropObject(&p) })
		}
	}
}

// All returns an iterator over the stream's messages in order, for a
// range loop; it ends after the final reply, or with one (nil, error) pair
// when the stream stops early. Ending the loop early closes the stream.
func (s *Stream) All(ctx context.Context) iter.Seq2[*types.Message, error] {
	return func(yield func(*types.Message, error) bool) {
		for {
			m, err := s.Next(ctx)
			if errors.Is(err, io.EOF) {
				return
			}
			if !yield(m, err) || err != nil {
				s.Close()
				return
			}
		}
	}
}

// Close stops the stream: Next returns sqsapi.ErrClosed from now on, unless the
// stream had ended, and replies still on their way are deleted and counted
// as late replies. It is idempotent.
func (s *Stream) Close() { s.stop(sqsapi.ErrClosed) }

// onContextDone stops the stream when its context ends first.
func (s *Stream) onContextDone() {
	err := s.ctx.Err()
	if errors.Is(err, context.DeadlineExceeded) {
		err = &timeoutError{requestID: s.requestID, queueURL: s.queueURL, waited: time.Since(s.sentAt)}
	}
	s.stop(err)
}

// stop ends the stream early with err, unless it ended already. What the
// host still routes to it is drained until the final reply or drainFor.
func (s *Stream) stop(err error) {
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		return
	}
	complete := s.completeLocked()
	s.stopped = true
	s.err = err
	if complete {
		s.err = io.EOF
	} else if errors.Is(err, context.DeadlineExceeded) {
		s.r.timedOut.Add(1)
	}
	stopWatch := s.stopWatch
	drainNow := s.drained
	last, stopErr := s.last, s.err
	if complete {
		stopErr = nil
	}
	if !drainNow {
		s.drain = time.AfterFunc(drainFor, func() { s.host.Unexpect(s.replyName) })
	}
	unread := make([]types.Message, 0, len(s.buf))
	for _, m := range s.buf {
		unread = append(unread, m)
	}
	s.buf = nil
	s.mu.Unlock()
	s.r.dropObjects(unread...)
	if stopWatch != nil {
		stopWatch()
	}
	if s.cancelCtx != nil {
		s.cancelCtx()
	}
	if drainNow {
		s.host.Unexpect(s.replyName)
	}
	if stopErr != nil {
		last = nil
	}
	if s.sess != nil {
		s.sess.onStop(complete)
	}
	s.r.after(s.after, last, stopErr)
	s.signal()
}

func (s *Stream) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// onReply takes a reply the host routed to the stream (on a poller
// goroutine; the host deletes it afterwards) and reports whether more are
// expected.
func (s *Stream) onReply(m types.Message, err error) bool {
	if err != nil {
		if !errors.Is(err, sqsapi.ErrClosed) {
			s.r.failed.Add(1)
			err = fmt.Errorf("requester: waiting for the replies to %s: %w", s.requestID, err)
		}
		s.mu.Lock()
		if s.drain != nil {
			s.drain.Stop()
		}
		s.drained = true
		s.mu.Unlock()
		s.stop(err)
		return false
	}
	m, _, err = payload.Decode(m)
	if err != nil {
		// The stream cannot go on without the message: it stops, and
		// what comes later is drained as after any early stop.
		s.r.failed.Add(1)
		s.stop(badResponse(s.requestID, err))
		s.mu.Lock()
		defer s.mu.Unlock()
		return !s.drained
	}
	if s.sess != nil {
		s.sess.heard()
		if c, isControl, ok := wire.ControlOf(m); isControl {
			if ok {
				s.sess.onControl(c)
			}
			s.mu.Lock()
			defer s.mu.Unlock()
			return !s.drained
		}
	}
	pos, ok := wire.StreamOf(m)
	seq, mark := pos.Seq, pos.Mark
	final := mark != ""
	late := false
	tellFinal := false
	defer func() { // after the unlock below
		if late {
			s.r.tellLate(s.host.URL(), m, s.requestID)
			s.r.dropObjects(m)
		}
		if s.sess != nil {
			if pos.Credit > 0 {
				s.sess.onCredit(pos.Credit)
			}
			if tellFinal {
				s.sess.onFinal()
			}
		}
	}()
	s.mu.Lock()
	defer s.mu.Unlock()
	if !ok {
		// A reply without the attribute (a responder that does not
		// stream, a reply replayed from a Store) ends the stream after
		// what has arrived.
		seq, final = s.next, true
		for n := range s.buf {
			seq = max(seq, n+1)
		}
	}
	if s.stopped {
		s.r.late.Add(1)
		late = true
		if final {
			s.drained = true
			if s.drain != nil {
				s.drain.Stop()
			}
			return false
		}
		return true
	}
	if final {
		for n := range s.buf {
			if n > seq {
				return s.more() // a final number below one that arrived: ignore it
			}
		}
	}
	if _, dup := s.buf[seq]; dup || seq < s.next || s.final >= 0 && seq > s.final {
		return s.more() // SQS delivered it twice, or a redelivered request sent it again
	}
	if final {
		s.final = seq
		s.endMark = mark == wire.MarkEnd
		if !s.endMark {
			s.last = &m
		}
		tellFinal = true
	}
	s.buf[seq] = m
	s.got++
	s.r.replied.Add(1)
	s.signal()
	return s.more()
}

// completeLocked reports whether Next returned every message of the
// stream.
func (s *Stream) completeLocked() bool {
	return s.final >= 0 && (s.next > s.final || s.endMark && s.next == s.final)
}

// more reports whether messages are still missing.
func (s *Stream) more() bool {
	if s.final >= 0 && s.got == s.final+1 {
		s.drained = true
		return false
	}
	return true
}
