package requester

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/internal/payload"
	"github.com/tempqueues/tempqueues/internal/wire"
	"github.com/tempqueues/tempqueues/sqsapi"
)

// sessionWindow is the credit each side of a session grants the other: at
// most this many messages sent and not yet read by the other side's
// handler or caller. A sender past it waits, so neither side buffers more
// than this many messages of a session.
const sessionWindow = 32

// ErrSendClosed is returned by Session.Send after CloseSend.
var ErrSendClosed = errors.New("requester: send after CloseSend")

// ErrSessionAborted matches the error of a session that the responder
// ended without an answer: its handler failed or panicked, or the
// responder shut down, once the session was open (a request whose session
// had not opened is retried as any other), or the responder cannot serve
// sessions and the handler read, or the responder that held the session
// died and another took the request. Nothing the caller sent after the
// request is handled again: the call may be made again from the start.
var ErrSessionAborted = errors.New("requester: the responder aborted the session")

// Message is a message a caller streams to the handler of a session after
// its request: a body (SQS takes no empty one) and message attributes, at
// most 8 of them (the routing and stream attributes take the other two).
type Message struct {
	Body       string
	Attributes map[string]types.MessageAttributeValue
}

// Session is a call whose request is a stream too: the request opens it,
// Send streams more messages to the handler (which reads them with the
// responder's Request.Recv, in order, each once), CloseSend says that no
// more follow, and Next or All read the handler's replies, concurrently
// with sending, as a reply Stream does. The session ends when the handler
// returns (its final reply, then io.EOF from Next; Send then returns
// io.EOF), at the context's deadline, on Close, or when the responder
// aborts it (ErrSessionAborted).
//
// The responder opens the session when its handler first reads or sends,
// or once it has run for a fifth of a second: a handler that answers
// sooner costs what a reply stream costs. Ending the session early
// (Close, the context, a range loop over All left early) tells the
// handler: its context is cancelled within about one SQS round trip once
// the session is open (an end that comes sooner waits for the opening),
// and its request is finished, not retried.
//
// Both directions are flow-controlled: Send waits while 32 of
// its messages are unread by the handler, and the handler's sends wait
// while 32 replies are unread by Next. Send and CloseSend are
// for one goroutine at a time, Next for one (perhaps another); Close may
// be called from any goroutine.
type Session struct {
	*Stream

	mu        sync.Mutex
	changed   chan struct{} // closed and replaced when the state below changes
	url       string        // the session queue, once the responder named it
	hostURL   string        // url's host queue
	name      string        // url's virtual queue name
	credit    int           // Send may send sequence numbers below this
	seq       int           // the next message's sequence number
	inflight  int           // submitted, not yet answered
	granted   int           // the replies the responder may send: below this
	grantSent int           // the grant the responder last heard of
	closeSend bool          // CloseSend was called
	endSent   bool          // the end mark went out
	peerDone  bool          // the final reply arrived: the handler returned
	abandoned bool          // the stream stopped early: the handler must stop
	cancelled bool          // the cancel went out
	err       error         // a failed send, an abort: the session is over

	idle     time.Duration // SessionOptions.IdleTimeout; 0 for none
	heardAt  time.Time     // when a message from the responder last came
	sentAt   time.Time     // when a message to the session last went
	idleTick *time.Timer   // checks the silence both ways, once the session is open
}

// SessionOptions configure a session.
type SessionOptions struct {
	// HalfClosed says that the request is the caller's only message, as
	// if CloseSend were called at once, with no end mark to send: Send
	// then returns ErrSendClosed. The session still carries what the
	// replies need: the caller's credit, and its cancel, which reaches
	// the handler when the session ends early (a reply stream's Close
	// does not). A responder that cannot open sessions serves it as a
	// reply stream.
	HalfClosed bool
	// IdleTimeout ends a session in which one side hears nothing from the
	// other for this long, so that a side that died (SIGKILL, a lost
	// host) leaves nothing waiting when the session has no deadline, or a
	// long one: once the responder has named the session's queue, each
	// side sends a ping after a third of it without sending anything, and
	// gives up after all of it without hearing anything (the caller with
	// ErrSessionAborted, the handler with its context cancelled, cause
	// responder.ErrCallerGone). Default (0) 60 s; at least 100 ms;
	// negative for none. A responder older than it ignores it.
	IdleTimeout time.Duration
}

// defaultSessionIdle is SessionOptions.IdleTimeout's default: a ping
// every 20 s of silence, one message a side, and a dead peer found
// within a minute.
const defaultSessionIdle = 60 * time.Second

// OpenSession sends a request that opens a session: the responder's
// handler may read more messages from the caller (Session.Send) after
// this one, and answers with a stream of replies. It returns once the
// request is sent; when the session opens, a message from the responder
// names the virtual queue the caller's later messages go to, and Send
// waits for it. The context
// bounds the whole session (Options.Timeout applies when it has none).
// The request carries TempQueues.Stream, so it has room for 7 attributes
// of the caller's. A responder older than sessions answers as it answers
// a reply stream, having read the request alone: Send waits until its
// final reply arrives, then returns io.EOF.
func (r *Requester) OpenSession(ctx context.Context, in *sqs.SendMessageInput, optFns ...func(*SessionOptions)) (*Session, error) {
	const op = "requester.OpenSession"
	var so SessionOptions
	for i, fn := range optFns {
		if fn == nil {
			return nil, wire.Invalid(op, "optFns", "option function %d is nil", i)
		}
		fn(&so)
	}
	switch {
	case so.IdleTimeout == 0:
		so.IdleTimeout = defaultSessionIdle
	case so.IdleTimeout < 0:
		so.IdleTimeout = 0
	case so.IdleTimeout < 100*time.Millisecond:
		return nil, wire.Invalid(op, "IdleTimeout", "%v is below 100ms", so.IdleTimeout)
	}
	in, replyName, after := r.onSend(ctx, in, 1)
	requestID, attrs, body, offload, err := r.checkRequest(op, in, compressOrOffload, sqsapi.StreamAttribute)
	if err != nil {
		r.after(after, nil, err)
		return nil, err
	}
	in = withBody(in, body)
	attrs[sqsapi.StreamAttribute] = wire.StringAttribute(wire.SessionRequest(wire.SessionAsk{Credit: sessionWindow, End: so.HalfClosed, Idle: so.IdleTimeout}))
	s := &Stream{r: r, replyName: replyName, requestID: requestID, queueURL: aws.ToString(in.QueueUrl), final: -1,
		buf: make(map[int]types.Message), wake: make(chan struct{}, 1), after: after}
	if s.requestID == "" {
		s.requestID = s.replyName
	}
	sess := &Session{Stream: s, changed: make(chan struct{}), granted: sessionWindow, grantSent: sessionWindow,
		closeSend: so.HalfClosed, endSent: so.HalfClosed, idle: so.IdleTimeout}
	s.sess = sess
	if !r.track(sess) {
		r.after(after, nil, sqsapi.ErrClosed)
		return nil, sqsapi.ErrClosed
	}
	if err := s.open(ctx, in, attrs, nil, offload); err != nil {
		r.untrack(sess)
		r.after(after, nil, err)
		return nil, err
	}
	return sess, nil
}

// track registers an open session, so that Close can end it; false once
// the requester is closed.
func (r *Requester) track(s *Session) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return false
	}
	if r.sessions == nil {
		r.sessions = make(map[*Session]struct{})
	}
	r.sessions[s] = struct{}{}
	return true
}

func (r *Requester) untrack(s *Session) {
	r.mu.Lock()
	delete(r.sessions, s)
	r.mu.Unlock()
}

// Send streams msg to the handler as the request's next message. It
// returns once msg is queued for a batch call shared with other messages;
// it waits first until the responder has named the session's queue and
// while 32 of the caller's messages are unread. A send that
// fails ends the session with its error, returned by this or a later Send
// and by Next.
//
// Errors: an *sqsapi.InvalidInputError for a message SQS would refuse,
// before any call; ErrSendClosed after CloseSend; io.EOF once the handler
// returned (Next returns its final reply, as with grpc); the session's
// error once it ended early (ErrTimeout, sqsapi.ErrClosed, ErrSessionAborted);
// ctx's error when ctx ends first.
func (s *Session) Send(ctx context.Context, msg *Message) error {
	const op = "requester.Session.Send"
	if msg == nil {
		return wire.Invalid(op, "msg", "nil")
	}
	if msg.Body == "" {
		return wire.Invalid(op, "Body", "empty (SQS requires a body)")
	}
	for _, name := range []string{sqsapi.StreamAttribute, sqsapi.SessionAttribute, sqsapi.VirtualQueueNameAttribute, payload.AcceptAttribute, payload.BodyAttribute} {
		if _, ok := msg.Attributes[name]; ok {
			return wire.Invalid(op, "Attributes", "%s is set by the requester", name)
		}
	}
	if err := wire.CheckMessageAttributes(op, msg.Attributes, 2); err != nil {
		return err
	}
	if err := wire.CheckMessageText(op, &msg.Body, msg.Attributes); err != nil {
		return err
	}
	attrs := make(map[string]types.MessageAttributeValue, len(msg.Attributes)+3)
	maps.Copy(attrs, msg.Attributes)
	body, how := msg.Body, ""
	if s.Stream.r.opts.CompressRequests {
		// Room for the carrier beside the stream and routing attributes.
		var ok bool
		if body, ok = payload.EncodeWithin(body, attrs, sqsapi.MaxMessageAttributes-len(attrs)-2, payload.Limit(s.Stream.r.opts.PayloadStore)); ok {
			how = " compressed"
		}
	}
	// The stream and routing attributes, at their longest.
	const added = len(sqsapi.StreamAttribute) + len("String") + 40 +
		len(sqsapi.VirtualQueueNameAttribute) + len("String") + wire.MaxQueueNameLength
	var object *payload.Pointer // the body in Options.PayloadStore, if it went there
	if n := wire.MessageSize(&body, attrs) + added; n > payload.Limit(s.Stream.r.opts.PayloadStore) {
		store := s.Stream.r.opts.PayloadStore
		if store == nil {
			return wire.Invalid(op, "Body", "message of %d bytes%s with the attributes the requester adds exceeds the SQS maximum of %d (set Options.PayloadStore to send it through S3)", n, how, sqsapi.MaxMessageSize)
		}
		if len(msg.Body) > payload.MaxPayload {
			return wire.Invalid(op, "Body", "body of %d bytes exceeds the maximum payload of %d MiB", len(msg.Body), payload.MaxPayload>>20)
		}
		delete(attrs, payload.BodyAttribute)
		if len(attrs)+3 > sqsapi.MaxMessageAttributes {
			return wire.Invalid(op, "Attributes", "no place left among SQS's %d attributes for %s, which a message sent through Options.PayloadStore needs", sqsapi.MaxMessageAttributes, payload.SizeAttribute)
		}
		// Outside the lock: the store's call may take long.
		deadline, _ := s.Stream.ctx.Deadline()
		p, err := payload.Offload(ctx, store, msg.Body, attrs, deadline)
		if err != nil {
			return fmt.Errorf("%s: %w", op, err)
		}
		object, body = &p, p.String()
	}
	streamDone := s.Stream.ctx.Done()
	s.mu.Lock()
	for {
		if err := s.sendErrLocked(); err != nil {
			s.mu.Unlock()
			s.Stream.r.dropObject(object)
			return err
		}
		if s.url != "" && s.seq < s.credit {
			break
		}
		changed := s.changed
		s.mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
			s.Stream.r.dropObject(object)
			return ctx.Err()
		case <-streamDone:
			// The stream's watch stops it and signals; its error is the
			// session's.
			streamDone = nil
		}
		s.mu.Lock()
	}
	pos := wire.StreamPos{Seq: s.seq, Credit: s.piggybackLocked()}
	s.seq++
	s.submitLocked(op, pos, body, attrs)
	s.mu.Unlock()
	return nil
}

// sendErrLocked is why Send may not send now, or nil.
func (s *Session) sendErrLocked() error {
	switch {
	case s.err != nil:
		return s.err
	case s.closeSend:
		return ErrSendClosed
	case s.peerDone:
		return io.EOF
	}
	s.Stream.mu.Lock()
	stopped, err := s.Stream.stopped, s.Stream.err
	s.Stream.mu.Unlock()
	if stopped {
		if err == nil || errors.Is(err, io.EOF) {
			return io.EOF
		}
		return err
	}
	return nil
}

// CloseSend tells the handler that no more messages follow: its
// Request.Recv returns io.EOF after the last. It does not wait: before
// the responder named the session's queue, the end goes out when it does.
// Next still returns the replies. It returns ErrSendClosed when called
// twice.
func (s *Session) CloseSend() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closeSend {
		return ErrSendClosed
	}
	s.closeSend = true
	s.signalLocked()
	s.sendEndLocked()
	return nil
}

// sendEndLocked sends the end mark once it is due and the queue is known.
func (s *Session) sendEndLocked() {
	if !s.closeSend || s.endSent || s.url == "" || s.err != nil || s.peerDone || s.abandoned {
		return
	}
	s.endSent = true
	s.submitLocked("requester.Session.CloseSend", wire.StreamPos{Seq: s.seq, Mark: wire.MarkEnd, Credit: s.piggybackLocked()}, wire.EndBody, map[string]types.MessageAttributeValue{})
}

// piggybackLocked returns the credit to grant on a message going out now,
// 0 when the responder knows it already.
func (s *Session) piggybackLocked() int {
	if s.granted <= s.grantSent {
		return 0
	}
	s.grantSent = s.granted
	return s.granted
}

// submitLocked queues a message of the stream for a batch call. The
// handler waits for it, as a unary responder waits for a request: it goes
// as a waited-for send would (SubmitUrgent), not waiting for a call in
// flight when messages come sparse; a plain Submit there cost every
// exchange of a ping-pong at 8 sessions about half a call each way.
func (s *Session) submitLocked(op string, pos wire.StreamPos, body string, attrs map[string]types.MessageAttributeValue) {
	attrs[sqsapi.StreamAttribute] = wire.StringAttribute(wire.FormatStream(pos))
	attrs[sqsapi.VirtualQueueNameAttribute] = wire.StringAttribute(s.name)
	s.inflight++
	s.sentAt = time.Now()
	s.Stream.r.core.SubmitUrgent(op, s.hostURL, types.SendMessageBatchRequestEntry{MessageBody: aws.String(body), MessageAttributes: attrs}, s.sent)
}

// controlLocked sends a control message to the session's queue.
func (s *Session) controlLocked(c wire.Control) {
	s.sentAt = time.Now()
	s.controlToLocked(s.hostURL, s.name, c)
}

// controlToLocked sends a control message to the virtual queue name on
// hostURL.
func (s *Session) controlToLocked(hostURL, name string, c wire.Control) {
	s.inflight++
	attrs := map[string]types.MessageAttributeValue{
		sqsapi.SessionAttribute:          wire.StringAttribute(c.Format()),
		sqsapi.VirtualQueueNameAttribute: wire.StringAttribute(name),
	}
	s.Stream.r.core.Submit("requester.Session", hostURL, types.SendMessageBatchRequestEntry{MessageBody: aws.String(c.Verb), MessageAttributes: attrs}, s.sent)
}

// sent takes the outcome of one of the session's sends.
func (s *Session) sent(err error) {
	s.mu.Lock()
	s.inflight--
	fail := err != nil && s.err == nil && !s.abandoned && !s.peerDone
	if fail {
		s.err = fmt.Errorf("requester: streaming to the session of request %s: %w", s.requestID, err)
		s.Stream.r.failed.Add(1)
	}
	err = s.err
	s.signalLocked()
	s.mu.Unlock()
	if fail {
		// The handler waits for a message that will not come: stop it.
		s.Stream.stop(err)
	}
}

func (s *Session) signalLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// onControl takes a control message from the responder (on a poller
// goroutine).
func (s *Session) onControl(c wire.Control) {
	s.mu.Lock()
	var stop error
	switch c.Verb {
	case wire.ControlOpen:
		switch {
		case s.url == "":
			hostURL, name, _ := wire.ParseVirtualQueueURL(c.URL) // checked by ParseControl
			s.url, s.hostURL, s.name = c.URL, hostURL, name
			s.credit = max(s.credit, c.Credit)
			if s.idle > 0 && !s.abandoned {
				s.sentAt = time.Now()
				s.idleTick = time.AfterFunc(s.idle/3, s.checkIdle)
			}
			if s.abandoned {
				s.cancelLocked()
			} else {
				// Replies read before the open came granted more credit:
				// by the rule of onRead, a message of its own carries it
				// only once half the window is used up, and never to a
				// handler that returned (its final reply may come first).
				if s.granted-s.grantSent >= sessionWindow/2 && !s.peerDone {
					s.controlLocked(wire.Control{Verb: wire.ControlCredit, Credit: s.granted})
					s.grantSent = s.granted
				}
				s.sendEndLocked()
			}
		case c.URL != s.url:
			// The responder that held the session died, and another one
			// took the request again: what went to the first is lost.
			// Tell the second one to stop, and the first too: SQS may
			// have handed the request to both while the first lives, and
			// its handler would wait for the caller's deadline.
			s.openedTwiceLocked(c.URL)
			if !s.peerDone {
				s.cancelLocked()
			}
			stop = fmt.Errorf("%w: request %s was taken again by another responder (the first one stopped)", ErrSessionAborted, s.requestID)
		}
	case wire.ControlCredit:
		s.credit = max(s.credit, c.Credit)
	case wire.ControlAbort:
		stop = fmt.Errorf("%w: %s", ErrSessionAborted, c.Reason)
	}
	if stop != nil && s.err == nil && !s.peerDone {
		s.err = stop
		s.abandoned = true // the handler is gone: no cancel to send
	} else {
		stop = nil
	}
	s.signalLocked()
	s.mu.Unlock()
	if stop != nil {
		s.Stream.stop(stop)
	}
}

// openedTwiceLocked sends a cancel to the session a second responder
// opened at u.
func (s *Session) openedTwiceLocked(u string) {
	hostURL, name, _ := wire.ParseVirtualQueueURL(u)
	s.controlToLocked(hostURL, name, wire.Control{Verb: wire.ControlCancel})
}

// heard notes that a message of the session came from the responder.
func (s *Session) heard() {
	s.mu.Lock()
	s.heardAt = time.Now()
	s.mu.Unlock()
}

// checkIdle runs every third of the idle timeout once the session is
// open: it pings the responder after that long without sending, and gives
// up on it after the whole timeout without hearing from it.
func (s *Session) checkIdle() {
	s.mu.Lock()
	if s.err != nil || s.peerDone || s.abandoned {
		s.mu.Unlock()
		return
	}
	now := time.Now()
	if silent := now.Sub(s.heardAt); silent >= s.idle {
		err := fmt.Errorf("%w: nothing heard from the responder for %v (the session's idle timeout)", ErrSessionAborted, silent.Round(time.Millisecond))
		s.err = err
		s.signalLocked()
		s.mu.Unlock()
		s.Stream.stop(err) // and cancel, in case only its messages were lost
		return
	}
	if now.Sub(s.sentAt) >= s.idle/3 {
		s.controlLocked(wire.Control{Verb: wire.ControlPing})
	}
	s.idleTick.Reset(s.idle / 3)
	s.mu.Unlock()
}

// onCredit takes the credit a reply carried.
func (s *Session) onCredit(n int) {
	s.mu.Lock()
	if n > s.credit {
		s.credit = n
		s.signalLocked()
	}
	s.mu.Unlock()
}

// onFinal notes that the handler returned: its final reply arrived.
func (s *Session) onFinal() {
	s.mu.Lock()
	s.peerDone = true
	s.signalLocked()
	s.mu.Unlock()
}

// onRead notes that Next returned the replies below next: the responder
// may send more. The grant rides on the caller's next message; when half
// the window is used up with none going out, a credit message carries it.
func (s *Session) onRead(next int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.granted = next + sessionWindow
	if s.url != "" && s.granted-s.grantSent >= sessionWindow/2 && !s.peerDone && s.err == nil && !s.abandoned {
		s.controlLocked(wire.Control{Verb: wire.ControlCredit, Credit: s.granted})
		s.grantSent = s.granted
	}
}

// onStop is told that the reply stream stopped: complete (the handler
// returned and every reply was read) or early, when the handler must be
// told to stop.
func (s *Session) onStop(complete bool) {
	s.mu.Lock()
	if s.idleTick != nil {
		s.idleTick.Stop()
	}
	if !complete && !s.peerDone && !s.abandoned {
		s.abandoned = true
		s.cancelLocked()
	}
	s.signalLocked()
	s.mu.Unlock()
	s.Stream.r.untrack(s)
}

// cancelLocked sends the cancel once the queue is known.
func (s *Session) cancelLocked() {
	if s.url == "" || s.cancelled {
		return
	}
	s.cancelled = true
	s.controlLocked(wire.Control{Verb: wire.ControlCancel})
}
