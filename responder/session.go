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
	"github.com/tempqueues/tempqueues/internal/wire"
	"github.com/tempqueues/tempqueues/sqsapi"
)

// sessionWindow is the credit a responder grants a session's caller: at
// most this many of the caller's messages are sent and not yet read by
// the handler (requester.SessionWindow, which the caller grants back).
const sessionWindow = 32

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

// errSessionsUnsupported is the reason a session request is aborted by a
// responder that cannot open sessions: its client lacks the queue
// operations (an *sqs.Client has them), or it runs through Process.
var errSessionsUnsupported = errors.New("responder: this responder serves no sessions")

// Recv returns the next message the caller streamed after the request, in
// order, each once, waiting for it; io.EOF once the caller half-closed
// (requester.Session.CloseSend) and every message was read. A request that
// opened no session has no more messages: Recv returns io.EOF at once.
// When the caller goes away first, Recv returns an error matching
// context.Canceled (the handler's context is cancelled too, with cause
// ErrCallerGone); when ctx ends, ctx's error. Recv is for one goroutine at
// a time; reading frees room for the caller's next messages.
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
	running map[string]*session // by the request's MessageId, while its handler runs
}

// runningAs returns the session this responder runs for a request with
// m's MessageId: SQS handed the request out again (its visibility lapsed
// while the handler ran) and this responder received it a second time.
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
			ss.err = fmt.Errorf("%w: its client has no queue operations (CreateQueue, TagQueue, ...)", errSessionsUnsupported)
			return nil, ss.err
		}
		c, err := core.New("responder.Serve", full, core.Options{
			Logger:          r.log,
			Prefix:          r.opts.SessionQueuePrefix,
			Retention:       sqsapi.DefaultIdleQueueRetention,
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
	ss.err = ErrClosed
	ss.mu.Unlock()
	if c == nil {
		return nil
	}
	return c.Close(ctx)
}

// session is the responder's side of one session: the caller's messages
// after the request, held in order for Recv, and the credit both ways.
type session struct {
	r     *Responder
	req   *Request
	host  *hostq.Host
	name  string // the session's virtual queue on host
	reply string // where control messages go: the request's reply queue
	route string // its virtual queue name, "" for a real queue

	mu        sync.Mutex
	changed   chan struct{} // closed and replaced on every change below
	buf       map[int]types.Message
	next      int                     // the sequence number Recv returns next
	end       int                     // the end mark's sequence number, -1 until it came
	granted   int                     // the caller may send below this
	grantSent int                     // the grant the caller last heard of
	gone      error                   // why the session ended early
	goneC     chan struct{}           // closed when gone is set
	cancel    context.CancelCauseFunc // the handler's context
	closed    bool                    // the handler returned
	done      chan struct{}           // closed when the handler returned

	idle     time.Duration // the caller's idle timeout, 0 for none
	heardAt  time.Time     // when a message from the caller last came
	sentAt   time.Time     // when a message to the caller last went
	idleTick *time.Timer
}

// openSession opens the session req asks for: a virtual queue on the
// responder's session host, named to the caller in an open message sent
// before the handler runs. An error means the request cannot be served
// as a session.
func (s *server) openSession(ctx context.Context, x *exchange) error {
	r, req := s.r, x.req
	if s.noSessions {
		return fmt.Errorf("%w through Process", errSessionsUnsupported)
	}
	u, _ := stringAttribute(req.Message, sqsapi.ResponseQueueURLAttribute)
	target, route, err := responseTarget(u)
	if err != nil {
		return err
	}
	host, err := r.sessionHost(x.cctx)
	if err != nil {
		return err
	}
	sess := &session{r: r, req: req, host: host, name: uuid.NewString(), reply: target, route: route,
		changed: make(chan struct{}), goneC: make(chan struct{}), done: make(chan struct{}), buf: make(map[int]types.Message), end: -1, granted: sessionWindow, grantSent: sessionWindow}
	if req.stream.askedEnd {
		sess.end = 0 // nothing follows the request
	}
	sess.idle = req.stream.askedIdle
	if err := host.ExpectMany(sess.name, sess.onMessage); err != nil {
		return err
	}
	req.session = sess
	req.stream.opened(sess)
	r.sessions.track(sess)
	open := wire.Control{Verb: wire.ControlOpen, Credit: sessionWindow, URL: wire.VirtualQueueURL(host.URL(), sess.name)}
	if err := r.send(x.cctx, req.Message, target, sess.control(open)); err != nil {
		sess.close()
		return err
	}
	if sess.idle > 0 {
		sess.mu.Lock()
		sess.heardAt, sess.sentAt = r.clk.Now(), r.clk.Now()
		sess.idleTick = time.AfterFunc(sess.idle/3, sess.checkIdle)
		sess.mu.Unlock()
	}
	return nil
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
	now := sess.r.clk.Now()
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
	sess.sentAt = sess.r.clk.Now()
	sess.mu.Unlock()
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
	sess.r.sends.Submit(sess.reply, sess.control(c), func(_ types.SendMessageBatchResultEntry, err error) {
		if err != nil {
			sess.r.log.Debug("responder: sending a session control message failed",
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
	sess.heardAt = sess.r.clk.Now()
	sess.mu.Unlock()
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
	sess.mu.Lock()
	for {
		if m, ok := sess.buf[sess.next]; ok {
			delete(sess.buf, sess.next)
			sess.next++
			sess.granted = sess.next + sessionWindow
			if sess.granted-sess.grantSent >= sessionWindow/2 && sess.gone == nil {
				// Half the window is read and no reply carried the grant:
				// a credit message does.
				sess.grantSent = sess.granted
				sess.sentAt = sess.r.clk.Now()
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
		case sess.closed:
			sess.mu.Unlock()
			return nil, fmt.Errorf("responder: Recv after the handler returned: %w", ErrClosed)
		}
		changed := sess.changed
		sess.mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		sess.mu.Lock()
	}
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

// close ends the session once its handler returned: the caller's
// messages still coming are drained for a while, then the name is
// withdrawn.
func (sess *session) close() {
	sess.mu.Lock()
	if sess.closed {
		sess.mu.Unlock()
		return
	}
	sess.closed = true
	sess.buf = nil
	if sess.idleTick != nil {
		sess.idleTick.Stop()
	}
	sess.signalLocked()
	close(sess.done)
	sess.mu.Unlock()
	sess.r.sessions.untrack(sess)
	time.AfterFunc(sessionDrain, func() { sess.host.Unexpect(sess.name) })
}

// maxAbortReason bounds the reason an abort carries: an error's message,
// enough to say why, small beside SQS's message size.
const maxAbortReason = 1024

// abort tells the caller that the session ended without an answer.
func (sess *session) abort(ctx context.Context, reason string) error {
	c := wire.Control{Verb: wire.ControlAbort, Reason: wire.SafeText(reason, maxAbortReason)}
	return sess.r.send(ctx, sess.req.Message, sess.reply, sess.control(c))
}
