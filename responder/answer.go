package responder

import (
	"context"
	"errors"
	"log/slog"
	"runtime/debug"
	"time"

	"github.com/tempqueues/tempqueues/internal/payload"
	"github.com/tempqueues/tempqueues/observe"
	"github.com/tempqueues/tempqueues/sqsapi"
)

// answer is the last step, inside every stage: it runs the handler and
// makes its result the request's answer, checked against SQS's limits
// before any call. A handler's error, a panic or an invalid reply fails
// the request; a request abandoned at a stop deadline is left alone (it was
// released already and may be running elsewhere).
func (s *server) answer(ctx context.Context, x *exchange) action {
	r, req := s.r, x.req
	if r.opts.Observer != nil || r.opts.Propagator != nil {
		req.inner = &innerCtx{}
	}
	if x.d.Abandoned() {
		// Stopped while the store was consulted: do not start the handler.
		return action{kind: actNone}
	}
	if req.stream != nil && req.stream.asked > 0 {
		if running := r.sessions.runningAs(req.Message); running != nil {
			return s.awaitRunning(ctx, x, running)
		}
		if err := s.newSession(x); err != nil {
			s.r.stats.failed.Add(1)
			x.log.Warn("responder: preparing a session failed; request left for redelivery", slog.Any("error", err))
			return fail(err)
		}
		defer req.session.close()
	}
	reply, d, err := s.run(ctx, req)
	// The calls that follow (the Store's, the reply's, an abort) get a
	// bound of their own: the first may have run out while the handler
	// ran, and the reply of a handler that ran 30 s would not go.
	x.endCalls()
	x.cctx, x.endCalls = s.callCtx()
	// A session that never opened is a reply stream: its request fails
	// and is retried as any other. One bound to its request is not.
	bound := req.session != nil && req.session.settle()
	final := reply             // what ends the exchange: reply, or a stream's end mark
	var more map[string]string // the responder's attributes of final
	if req.stream != nil {
		final, more = req.stream.end(reply)
	} else if o := originOf(req); o != "" {
		more = map[string]string{sqsapi.OriginAttribute: o}
	}
	if bound && err != nil && errors.Is(context.Cause(ctx), sqsapi.ErrClosed) && req.session.callerGone() == nil {
		// Stopped by Shutdown: the caller's messages cannot be handed to
		// another responder, so the caller is told now, and the request
		// is deleted.
		if aerr := req.session.abort(x.cctx, "the responder is shutting down"); aerr != nil {
			x.log.Warn("responder: telling the caller of a session cut by Shutdown failed", slog.Any("error", aerr))
		}
		x.d.Finish()
		r.stats.observe(d)
		r.dropped(ctx, x, reasonAborted)
		return action{kind: actDelete}
	}
	if !x.d.Finish() && !bound {
		// Abandoned at a stop deadline and released: perhaps running
		// elsewhere already. An open session's request is kept (its
		// handler settles it, as here).
		return action{kind: actNone}
	}
	r.stats.observe(d)
	if r.opts.Observer != nil {
		m := req.Message
		r.tell(ctx, observe.Event{Kind: observe.Handled, Queue: s.queueURL, Message: &m, RequestID: req.ID, Duration: d, Err: err})
	}
	if gone := s.callerGone(req, err); gone != "" {
		// Nobody waits for the answer: the request is finished, not
		// failed, and its reply (if any) is not sent.
		r.dropped(ctx, x, gone)
		x.log.Debug("responder: the caller went away before the handler returned", slog.String("reason", gone), slog.Any("error", err))
		return action{kind: actDelete}
	}
	if bound && err != nil {
		// A session is not handled twice: what the caller streamed is
		// read. The caller hears why and may call again.
		r.stats.failed.Add(1)
		x.log.Warn("responder: session handler failed; the session is aborted", slog.Any("error", err), slog.Duration("duration", d))
		if aerr := req.session.abort(x.cctx, err.Error()); aerr != nil {
			x.log.Warn("responder: telling the caller of an aborted session failed", slog.Any("error", aerr))
		}
		r.dropped(ctx, x, reasonAborted)
		return action{kind: actDelete}
	}
	if err != nil {
		r.stats.failed.Add(1)
		var pe *PanicError
		if errors.As(err, &pe) {
			x.log.Error("responder: handler panicked", slog.Any("panic", pe.Value), slog.String("stack", string(pe.Stack)))
		} else {
			x.log.Warn("responder: handler failed", slog.Any("error", err), slog.Duration("duration", d))
		}
		return fail(err)
	}
	if x.requested && final != nil {
		sent := noDone      // reports the reply's send to Options.Observer
		if final == reply { // not a stream's end mark
			final, sent = r.onReply(req.inner.get(ctx), req, final)
		}
		if x.target, x.entry, x.parts, err = r.buildReply(x.cctx, req.Message, final, more, r.compresses(req), req.parts); err != nil {
			sent(err)
			if req.parts && errors.Is(err, errOverJoin) {
				// The caller would wait until its deadline: it is told
				// why, and the request fails as any invalid reply's.
				if terr := r.tellTooLarge(x.cctx, req.Message, err); terr != nil {
					x.log.Warn("responder: telling the requester that its reply is too large failed", slog.Any("error", terr))
				}
			}
			// The handler's reply breaks SQS limits: a handler bug, which a
			// retry repeats; or Options.PayloadStore failed to take it. The
			// request goes the failure way, to the DLQ if it keeps failing.
			r.stats.failed.Add(1)
			if errors.Is(err, sqsapi.ErrInvalidInput) {
				x.log.Error("responder: handler returned an invalid reply", slog.Any("error", err))
			} else {
				x.log.Error("responder: the reply could not be put in Options.PayloadStore", slog.Any("error", err))
			}
			return fail(err)
		}
		x.sent = sent
	} else if x.requested {
		x.log.Debug("responder: handler returned no reply")
	}
	r.stats.handled.Add(1)
	x.stored = reply
	if x.requested && reply == nil && final != nil {
		x.stored = storedEnd(final, more) // a stream's end mark
	}
	return action{kind: actDelete}
}

// awaitRunning settles a second delivery of a session request this
// responder is still running (the request's visibility lapsed while its
// handler ran, and SQS handed it out again, to us): a second session
// would abort the first. It is held, its visibility extended, until the
// first run ends, then deleted with this delivery's receipt handle, the
// one SQS now honours; the first run's own delete may go unheeded.
func (s *server) awaitRunning(ctx context.Context, x *exchange, running *session) action {
	select {
	case <-running.done:
	case <-ctx.Done():
		return action{kind: actNone}
	}
	x.d.Finish()
	s.r.dropped(ctx, x, reasonDuplicate)
	x.log.Debug("responder: a session request delivered again while it ran here; deleted after its run")
	return action{kind: actDelete}
}

// callerGone returns the drop reason of a request whose caller went away
// while its handler ran (the handler's error is err), or "": a session's
// caller cancelled or stopped its stream, a failed run lasted until the
// deadline its caller's gave it (no retry could answer in time), or its
// reply queue is gone.
func (s *server) callerGone(req *Request, err error) string {
	switch {
	case req.session != nil && req.session.callerGone() != nil:
		return reasonCancelled
	case err == nil:
		return ""
	case errors.Is(err, ErrResponseQueueGone):
		return reasonQueueGone
	case !req.runUntil.IsZero() && !s.r.clk.Now().Before(req.runUntil):
		return reasonCancelled
	}
	return ""
}

// run calls the handler under Options.HandlerTimeout and the caller's
// deadline, turning a panic into a *PanicError.
func (s *server) run(ctx context.Context, req *Request) (reply *Reply, d time.Duration, err error) {
	if t := s.r.opts.HandlerTimeout; t > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, t)
		defer cancel()
	}
	if !req.deadline.IsZero() {
		var cancel context.CancelFunc
		req.runUntil = handlerDeadline(req.deadline, s.r.clk.Now(), s.r.callLatency())
		ctx, cancel = context.WithDeadline(ctx, req.runUntil)
		defer cancel()
	}
	if req.session != nil {
		var cancel context.CancelFunc
		ctx, cancel = req.session.run(ctx)
		defer cancel()
	}
	if s.r.compresses(req) {
		// For the adapters, whose replies that would not fit as they are
		// may fit compressed (sqshttp).
		ctx = payload.WithCompressedReplies(ctx)
	}
	start := s.r.clk.Now()
	defer func() {
		d = s.r.clk.Since(start)
		if p := recover(); p != nil {
			reply, err = nil, &PanicError{Value: p, Stack: debug.Stack()}
		}
	}()
	reply, err = s.h.HandleRequest(ctx, req)
	return reply, 0, err
}
