package responder

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/google/uuid"

	"github.com/tempqueues/tempqueues/internal/core"
	"github.com/tempqueues/tempqueues/internal/hostq"
	"github.com/tempqueues/tempqueues/internal/payload"
	"github.com/tempqueues/tempqueues/internal/wire"
	"github.com/tempqueues/tempqueues/sqsapi"
)

// sessionWindow is the credit a responder grants a session's caller: at
// most this many of the caller's messages are sent and not yet read by
// the handler (requester.SessionWindow, which the caller grants back).
const sessionWindow = 32

// sessionOpenAfter is how long a session's handler runs before the
// responder opens the session although the handler has neither sent nor
// read: a handler that answers sooner costs what a reply stream costs (no
// open message, no session queue), and one that runs longer can still be
// stopped by its caller, from then on within about one round trip.
const sessionOpenAfter = 200 * time.Millisecond

// sessionDrain is how long a session's queue keeps taking the caller's
// messages after its handler returned (its last sends and its end mark or
// cancel may still be on their way): they are deleted quietly. Later ones
// are orphans of the session host, deleted too.
const sessionDrain = 5 * time.Second

// ErrCallerGone is the cause (context.Cause) of a handler context
// cancelled because the caller of a session went away: it cancelled, its
// deadline passed, or its stream ended early. The request is finished, not
// retried: deleted, and told to Options.Observer as Dropped, "cancelled".
var ErrCallerGone = errors.New("responder: the caller went away")

// ErrSessionsUnsupported is matched by the error of Request.Recv on a
// responder that cannot open sessions: its client lacks the queue
// operations (an *sqs.Client has them), or it runs through Process. Such
// a responder answers a session request as a reply stream; a handler that
// fails after such a Recv aborts the session, with the reason for its
// caller.
var ErrSessionsUnsupported = errors.New("responder: this responder serves no sessions")

// Recv returns the next message the caller streamed after the request, in
// order, each once, waiting for it; io.EOF once the caller half-closed
// (requester.Session.CloseSend) and every message was read. A request that
// asked for no session has no more messages: Recv returns io.EOF at once.
// The first Recv opens the session if it is not open yet; when this
// responder cannot serve sessions, it returns an error matching
// ErrSessionsUnsupported. When the caller goes away first, Recv returns an
// error matching context.Canceled (the handler's context is cancelled too,
// with cause ErrCallerGone); when ctx ends, ctx's error. A message whose
// compressed body cannot be read (docs/wire.md, "Compression") is an
// error in its place, returned by every later Recv. Recv is for one
// goroutine at a time; reading frees room for the caller's next messages.
func (r *Request) Recv(ctx context.Context) (*types.Message, error) {
	if r.session == nil {
		return nil, io.EOF
	}
	return r.session.recv(ctx)
}

// sessions is a responder's side of the sessions it serves: the host
// queue their callers' messages arrive on, owned (created with the
// reaper's tags, heartbeated, deleted at Shutdown) by a core made on the
// first session.
type sessions struct {
	mu      sync.Mutex
	core    *core.Core
	err     error               // the client cannot own queues, or Shutdown closed them
	running map[string]*session // open sessions by their request's MessageId, while their handlers run
}

// runningAs returns the open session this responder runs for a request
// with m's MessageId: SQS handed the request out again (its visibility
// lapsed while the handler ran) and this responder received it a second
// time.
func (ss *sessions) runningAs(m types.Message) *session {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return ss.running[aws.ToString(m.MessageId)]
}

// track registers sess as running until its handler returns.
func (ss *sessions) track(sess *session) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.running == nil {
		ss.running = make(map[string]*session)
	}
	ss.running[aws.ToString(sess.req.Message.MessageId)] = sess
}

func (ss *sessions) untrack(sess *session) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if id := aws.ToString(sess.req.Message.MessageId); ss.running[id] == sess {
		delete(ss.running, id)
	}
}

// sessionHost returns the host queue of the responder's sessions,
// creating it on first use. The lock covers making the core, no call:
// the core's owner lets concurrent first uses share one CreateQueue, each
// under its own ctx, and forgets a queue found deleted.
func (r *Responder) sessionHost(ctx context.Context) (*hostq.Host, error) {
	c, err := r.sessionCore()
	if err != nil {
		return nil, err
	}
	return c.Open(ctx, nil)
}

// sessionCore returns the core that owns the sessions' host queue, made
// on first use.
func (r *Responder) sessionCore() (*core.Core, error) {
	ss := &r.sessions
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.err != nil {
		return nil, ss.err
	}
	if ss.core == nil {
		full, ok := r.client.(sqsapi.Client)
		if !ok {
			ss.err = fmt.Errorf("%w: its client has no queue operations (CreateQueue, TagQueue, ...)", ErrSessionsUnsupported)
			return nil, ss.err
		}
		c, err := core.New("responder.Serve", full, core.Options{
			Logger:          r.log,
			Prefix:          r.opts.SessionQueuePrefix,
			Retention:       wire.DefaultIdleQueueRetention,
			DisableSweeping: true, // requesters sweep; a responder only heartbeats its own
			Host: &hostq.Options{
				Logger:                   r.log,
				Linger:                   true, // the queue is this process's alone
				ReceiveVisibilityTimeout: 5 * time.Second,
				NoSystemAttributes:       true,
			},
		})
		if err != nil {
			ss.err = err
			return nil, err
		}
		ss.core = c
	}
	return ss.core, nil
}

// closeSessions deletes the sessions' host queue; at Shutdown, after the
// handlers.
func (r *Responder) closeSessions(ctx context.Context) error {
	ss := &r.sessions
	ss.mu.Lock()
	c := ss.core
	ss.err = sqsapi.ErrClosed
	ss.mu.Unlock()
	if c == nil {
		return nil
	}
	return c.Close(ctx)
}

// session is the responder's side of one session: the caller's messages
// after the request, held in order for Recv, and the credit both ways.
//
// A session opens lazily: when its handler first sends a reply or reads,
// or once it has run for sessionOpenAfter. Until then it is a reply
// stream, and a handler that answers before costs no more than one; the
// caller, which cannot send before it knows the session's queue, waits.
type session struct {
	s     *server
	req   *Request
	name  string // the session's virtual queue on its host, once it opens
	reply string // where control messages go: the request's reply queue
	route string // its virtual queue name, "" for a real queue

	mu        sync.Mutex
	changed   chan struct{} // closed and replaced on every change below
	buf       map[int]types.Message
	bad       map[int]error           // messages of buf whose compressed body cannot be read
	next      int                     // the sequence number Recv returns next
	end       int                     // the end mark's sequence number, -1 until it came
	granted   int                     // the caller may send below this
	grantSent int                     // the grant the caller last heard of
	gone      error                   // why the session ended early
	goneC     chan struct{}           // closed when gone is set
	cancel    context.CancelCauseFunc // the handler's context
	closed    bool                    // the handler returned

	refused error         // this responder serves no sessions: why
	timer   *time.Timer   // opens the session after sessionOpenAfter
	opening chan struct{} // nil until the open starts; closed when it ended
	openErr error         // why the open failed
	host    *hostq.Host   // the session's host queue, once open
	settled bool          // the handler returned: no open may start
	unread  bool          // Recv failed: this responder serves no sessions
	keep    func()        // marks the request's delivery as one no other responder can take up
	done    chan struct{} // closed when the handler returned

	idle     time.Duration // the caller's idle timeout, 0 for none
	heardAt  time.Time     // when a message from the caller last came
	sentAt   time.Time     // when a message to the caller last went
	idleTick *time.Timer
}

// newSession prepares the session req asks for, without a call: it opens
// when the handler needs it (session.open). An error means the request
// names no queue its session's control messages can go to.
func (s *server) newSession(x *exchange) error {
	req := x.req
	u, _ := stringAttribute(req.Message, sqsapi.ResponseQueueURLAttribute)
	target, route, err := responseTarget(u)
	if err != nil {
		return err
	}
	// The session's name and buffer wait for its open: most never open.
	sess := &session{s: s, req: req, reply: target, route: route, keep: x.d.KeepWhenAbandoned,
		changed: make(chan struct{}), goneC: make(chan struct{}), done: make(chan struct{}), end: -1, granted: sessionWindow, grantSent: sessionWindow,
		idle: req.stream.askedIdle}
	if req.stream.askedEnd {
		sess.end = 0 // nothing follows the request
	}
	req.session = sess
	if s.noSessions {
		sess.refused = fmt.Errorf("%w through Process", ErrSessionsUnsupported)
		return nil
	}
	sess.mu.Lock()
	sess.timer = time.AfterFunc(sessionOpenAfter, func() { _ = sess.open(context.Background()) })
	sess.mu.Unlock()
	return nil
}

// open opens the session, once: a virtual queue on the responder's
// session host, named to the caller in an open message. Callers that come
// while it is under way wait for it (or for ctx); all get its outcome. It
// fails with sqsapi.ErrClosed once the handler returned.
func (sess *session) open(ctx context.Context) error {
	sess.mu.Lock()
	if sess.opening != nil {
		opening := sess.opening
		sess.mu.Unlock()
		select {
		case <-opening:
		case <-ctx.Done():
			return ctx.Err()
		}
		sess.mu.Lock()
		defer sess.mu.Unlock()
		return sess.openErr
	}
	if sess.settled {
		sess.mu.Unlock()
		return sqsapi.ErrClosed
	}
	sess.opening = make(chan struct{})
	if sess.timer != nil {
		sess.timer.Stop()
	}
	sess.mu.Unlock()
	host, err := sess.dial()
	if err != nil && !errors.Is(err, ErrSessionsUnsupported) {
		sess.s.r.log.Warn("responder: opening a session failed; its replies go as a plain stream",
			slog.String("request_id", sess.req.ID), slog.Any("error", err))
	}
	sess.mu.Lock()
	sess.host = host
	if err != nil {
		sess.openErr = err
	}
	close(sess.opening)
	sess.mu.Unlock()
	return err
}

// dial registers the session on the responder's session host and sends
// the open message, under a call context of its own: the open serves the
// handler's every later Send and Recv, not only the one that started it.
//
// The open message is queued, not waited for: when the handler's first
// reply follows at once, the two share a call, and the caller's receive
// takes them together. Should it fail to go, the session is lost (lost).
func (sess *session) dial() (*hostq.Host, error) {
	if sess.refused != nil {
		return nil, sess.refused
	}
	s, req := sess.s, sess.req
	ctx, cancel := s.callCtx()
	defer cancel()
	host, err := s.r.sessionHost(ctx)
	if err != nil {
		return nil, err
	}
	sess.mu.Lock()
	sess.name, sess.buf = uuid.NewString(), make(map[int]types.Message)
	sess.mu.Unlock()
	if err := host.ExpectMany(sess.name, sess.onMessage); err != nil {
		return nil, err
	}
	// The replies are counted against the caller's credit from the first
	// one on: Send waits for the open before it sends. From the open on,
	// the handler may read what the caller streams, which no other
	// responder could read again: at a stop deadline the caller is told,
	// and the request deleted, not released.
	req.stream.opened(sess)
	sess.keep()
	s.r.sessions.track(sess)
	if sess.idle > 0 {
		sess.mu.Lock()
		sess.heardAt, sess.sentAt = s.r.clk.Now(), s.r.clk.Now()
		sess.idleTick = time.AfterFunc(sess.idle/3, sess.checkIdle)
		sess.mu.Unlock()
	}
	open := wire.Control{Verb: wire.ControlOpen, Credit: sessionWindow, URL: wire.VirtualQueueURL(host.URL(), sess.name)}
	s.r.sends.Submit(sess.reply, sess.control(open), func(_ types.SendMessageBatchResultEntry, err error) {
		if err = s.r.replyResult(context.Background(), req.Message, sess.reply, err); err != nil {
			sess.lost(err)
		}
	})
	return host, nil
}

// lost is told that the open message failed to go: the caller can neither
// send to the session nor stop the handler. Recv fails with err, the
// replies go without credit (none will be granted), and a handler that
// fails is retried, as when the session never opened.
func (sess *session) lost(err error) {
	sess.s.r.log.Warn("responder: sending a session's open message failed; its replies go as a plain stream",
		slog.String("request_id", sess.req.ID), slog.Any("error", err))
	sess.mu.Lock()
	sess.openErr = err
	sess.signalLocked()
	sess.mu.Unlock()
	sess.req.stream.unopened()
}

// checkIdle runs every third of the caller's idle timeout: it pings the
// caller after that long without sending, and gives up on it after the
// whole timeout without hearing from it.
func (sess *session) checkIdle() {
	sess.mu.Lock()
	if sess.closed || sess.gone != nil {
		sess.mu.Unlock()
		return
	}
	now := sess.s.r.clk.Now()
	if silent := now.Sub(sess.heardAt); silent >= sess.idle {
		sess.mu.Unlock()
		sess.goneWith(fmt.Errorf("%w: nothing heard from it for %v (the session's idle timeout)", ErrCallerGone, silent.Round(time.Millisecond)))
		return
	}
	ping := now.Sub(sess.sentAt) >= sess.idle/3
	if ping {
		sess.sentAt = now
	}
	sess.idleTick.Reset(sess.idle / 3)
	sess.mu.Unlock()
	if ping {
		sess.sendControl(wire.Control{Verb: wire.ControlPing})
	}
}

// noteSent notes that a message went to the caller.
func (sess *session) noteSent() {
	sess.mu.Lock()
	sess.sentAt = sess.s.r.clk.Now()
	sess.mu.Unlock()
}

// settle is told that the handler returned: no open starts any more, one
// under way is waited for. It reports whether the session is bound to the
// request: it opened (the handler may have read what the caller streamed,
// which cannot be read again), or the handler tried to read and this
// responder serves no sessions (a retry would fail the same way). Either
// way a failed handler aborts it, where an unopened session's request is
// retried as any other.
func (sess *session) settle() (bound bool) {
	sess.mu.Lock()
	sess.settled = true
	if sess.timer != nil {
		sess.timer.Stop()
	}
	opening := sess.opening
	sess.mu.Unlock()
	if opening != nil {
		<-opening
	}
	sess.mu.Lock()
	defer sess.mu.Unlock()
	return sess.host != nil && sess.openErr == nil || sess.unread
}

// control builds a control message to the caller.
func (sess *session) control(c wire.Control) types.SendMessageBatchRequestEntry {
	attrs := map[string]types.MessageAttributeValue{sqsapi.SessionAttribute: wire.StringAttribute(c.Format())}
	if sess.route != "" {
		attrs[sqsapi.VirtualQueueNameAttribute] = wire.StringAttribute(sess.route)
	} else {
		attrs[sqsapi.CorrelationIDAttribute] = wire.StringAttribute(sess.req.ID)
	}
	e := types.SendMessageBatchRequestEntry{MessageBody: aws.String(c.Verb), MessageAttributes: attrs}
	if wire.IsFIFOURL(sess.reply) {
		e.MessageGroupId, e.MessageDeduplicationId = fifoReplyIDs(sess.route, sess.req.ID+"."+uuid.NewString())
	}
	return e
}

// sendControl sends a control message to the caller without waiting.
func (sess *session) sendControl(c wire.Control) {
	sess.s.r.sends.Submit(sess.reply, sess.control(c), func(_ types.SendMessageBatchResultEntry, err error) {
		if err != nil {
			sess.s.r.log.Debug("responder: sending a session control message failed",
				slog.String("request_id", sess.req.ID), slog.String("control", c.Verb), slog.Any("error", err))
		}
	})
}

// onMessage takes a message the caller sent to the session (on a poller
// goroutine; the host deletes it afterwards).
func (sess *session) onMessage(m types.Message, err error) bool {
	if err != nil {
		sess.goneWith(fmt.Errorf("responder: the session's queue failed: %w", err))
		return false
	}
	sess.mu.Lock()
	sess.heardAt = sess.s.r.clk.Now()
	sess.mu.Unlock()
	dm, _, badErr := payload.Decode(m)
	if badErr == nil {
		m = dm
	}
	if c, isControl, ok := wire.ControlOf(m); isControl {
		switch {
		case !ok:
		case c.Verb == wire.ControlCancel:
			sess.goneWith(ErrCallerGone)
		case c.Verb == wire.ControlCredit:
			sess.req.stream.grant(c.Credit)
		}
		return true
	}
	pos, ok := wire.StreamOf(m)
	if !ok {
		return true // not a message of a session: deleted
	}
	if pos.Credit > 0 {
		sess.req.stream.grant(pos.Credit)
	}
	sess.mu.Lock()
	defer sess.mu.Unlock()
	switch {
	case sess.closed:
	case pos.Mark == wire.MarkEnd:
		if sess.end < 0 {
			sess.end = pos.Seq
		}
	case pos.Seq < sess.next, pos.Seq >= sess.granted, sess.end >= 0 && pos.Seq >= sess.end:
		// Delivered twice, or beyond the credit or the end: no message
		// of the stream.
	default:
		sess.buf[pos.Seq] = m
		if badErr != nil {
			// Recv returns the error in the message's place: the stream
			// cannot go on past it.
			if sess.bad == nil {
				sess.bad = make(map[int]error)
			}
			sess.bad[pos.Seq] = fmt.Errorf("responder: message %d of the session cannot be read: %w", pos.Seq, badErr)
		}
	}
	sess.signalLocked()
	return true
}

func (sess *session) signalLocked() {
	close(sess.changed)
	sess.changed = make(chan struct{})
}

// goneWith ends the session for err: the caller went away, or its queue
// failed. The handler's context is cancelled with err as its cause.
func (sess *session) goneWith(err error) {
	sess.mu.Lock()
	defer sess.mu.Unlock()
	if sess.gone != nil || sess.closed {
		return
	}
	// Cancelled before gone is visible to Recv, so that a handler whose
	// Recv failed finds its context cancelled with the cause. Cancelling
	// under the lock is safe: a context's cancellation runs no code that
	// could take it (AfterFuncs run on goroutines of their own).
	if sess.cancel != nil {
		sess.cancel(err)
	}
	sess.gone = err
	close(sess.goneC)
	sess.signalLocked()
}

// run returns the handler's context, cancelled when the caller goes away.
func (sess *session) run(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(ctx)
	sess.mu.Lock()
	sess.cancel = cancel
	gone := sess.gone
	sess.mu.Unlock()
	if gone != nil {
		cancel(gone)
	}
	return ctx, func() { cancel(context.Canceled) }
}

// goneCh is closed when the caller goes away.
func (sess *session) goneCh() <-chan struct{} { return sess.goneC }

// callerGone reports whether the caller went away (and why).
func (sess *session) callerGone() error {
	sess.mu.Lock()
	defer sess.mu.Unlock()
	return sess.gone
}

func (sess *session) recv(ctx context.Context) (*types.Message, error) {
	if err := sess.open(ctx); err != nil {
		switch {
		case errors.Is(err, sqsapi.ErrClosed):
			return nil, fmt.Errorf("responder: Recv after the handler returned: %w", err)
		case errors.Is(err, ErrSessionsUnsupported):
			sess.mu.Lock()
			sess.unread = true
			sess.mu.Unlock()
		}
		return nil, fmt.Errorf("responder: opening the session: %w", err)
	}
	sess.mu.Lock()
	for {
		if err := sess.bad[sess.next]; err != nil {
			sess.mu.Unlock()
			return nil, err
		}
		if m, ok := sess.buf[sess.next]; ok {
			if _, pointed := payload.ParsePointer(m); pointed {
				// Its body is in Options.PayloadStore: read on the
				// handler's goroutine, outside the lock.
				sess.mu.Unlock()
				if err := sess.fetch(ctx, m); err != nil {
					return nil, err
				}
				sess.mu.Lock()
				continue
			}
			delete(sess.buf, sess.next)
			sess.next++
			sess.granted = sess.next + sessionWindow
			if sess.granted-sess.grantSent >= sessionWindow/2 && sess.gone == nil {
				// Half the window is read and no reply carried the grant:
				// a credit message does.
				sess.grantSent = sess.granted
				sess.sentAt = sess.s.r.clk.Now()
				c := wire.Control{Verb: wire.ControlCredit, Credit: sess.granted}
				sess.mu.Unlock()
				sess.sendControl(c)
				return &m, nil
			}
			sess.mu.Unlock()
			return &m, nil
		}
		switch {
		case sess.end >= 0 && sess.next >= sess.end:
			sess.mu.Unlock()
			return nil, io.EOF
		case sess.gone != nil:
			err := sess.gone
			sess.mu.Unlock()
			return nil, fmt.Errorf("%w: %w", err, context.Canceled)
		case sess.openErr != nil:
			err := sess.openErr
			sess.mu.Unlock()
			return nil, fmt.Errorf("responder: opening the session: %w", err)
		case sess.closed:
			sess.mu.Unlock()
			return nil, fmt.Errorf("responder: Recv after the handler returned: %w", sqsapi.ErrClosed)
		}
		changed := sess.changed
		sess.mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, ctxErr(ctx)
		}
		sess.mu.Lock()
	}
}

// fetch reads the body of m, the session's next message, from
// Options.PayloadStore, where it points (docs/wire.md, "Payloads in S3"),
// puts it in m's place and deletes the object. When ctx ends first, m
// stays for the next Recv; a pointer that cannot be read is an error in
// m's place.
func (sess *session) fetch(ctx context.Context, m types.Message) error {
	r := sess.s.r
	out, _, _, err := payload.Fetch(ctx, r.opts.PayloadStore, m)
	if err != nil && ctx.Err() != nil {
		return ctxErr(ctx)
	}
	if err == nil {
		r.dropUnread([]types.Message{m}) // read now: off the handler's way
	}
	sess.mu.Lock()
	defer sess.mu.Unlock()
	if _, ok := sess.buf[sess.next]; !ok {
		return nil // closed meanwhile
	}
	if err != nil {
		if sess.bad == nil {
			sess.bad = make(map[int]error)
		}
		sess.bad[sess.next] = fmt.Errorf("responder: message %d of the session cannot be read: %w", sess.next, err)
		return nil
	}
	sess.buf[sess.next] = out
	return nil
}

// ctxErr is ctx's error with its cause, when it has one of its own
// (ErrCallerGone for a handler's context, or one derived from it), so
// that both match.
func ctxErr(ctx context.Context) error {
	err := ctx.Err()
	if cause := context.Cause(ctx); cause != nil && cause != err {
		return fmt.Errorf("%w: %w", cause, err)
	}
	return err
}

// piggyback returns the credit to grant on a reply going out now, 0 when
// the caller knows it already.
func (sess *session) piggyback() int {
	sess.mu.Lock()
	defer sess.mu.Unlock()
	if sess.granted <= sess.grantSent {
		return 0
	}
	sess.grantSent = sess.granted
	return sess.granted
}

// close ends the session once its handler returned (after settle): the
// caller's messages still coming to an open session are drained for a
// while, then the name is withdrawn.
func (sess *session) close() {
	sess.mu.Lock()
	if sess.closed {
		sess.mu.Unlock()
		return
	}
	sess.closed = true
	unread := make([]types.Message, 0, len(sess.buf))
	for _, m := range sess.buf {
		unread = append(unread, m)
	}
	sess.buf = nil
	host := sess.host
	if sess.idleTick != nil {
		sess.idleTick.Stop()
	}
	sess.signalLocked()
	close(sess.done)
	sess.mu.Unlock()
	sess.s.r.sessions.untrack(sess)
	sess.s.r.dropUnread(unread)
	if host != nil {
		time.AfterFunc(sessionDrain, func() { host.Unexpect(sess.name) })
	}
}

// maxAbortReason bounds the reason an abort carries: an error's message,
// enough to say why, small beside SQS's message size.
const maxAbortReason = 1024

// abort tells the caller that the session ended without an answer.
func (sess *session) abort(ctx context.Context, reason string) error {
	c := wire.Control{Verb: wire.ControlAbort, Reason: wire.SafeText(reason, maxAbortReason)}
	return sess.s.r.send(ctx, sess.req.Message, sess.reply, sess.control(c))
}
