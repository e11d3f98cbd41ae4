package responder

import (
	"context"
	"log/slog"
	"time"

	"github.com/tempqueues/tempqueues/internal/wire"
)

// expired reports whether req's caller gave up before the request reached
// the handler: its sqsapi.DeadlineAttribute, plus the clock skew allowed,
// has passed. Such a request is deleted unhandled, dropped as "expired"
// and logged. Otherwise it notes the caller's deadline in req, for the
// handler's context (handlerDeadline). A request without the attribute (a
// Java requester's) or with a malformed one runs with no deadline of its
// own.
func (r *Responder) expired(ctx context.Context, x *exchange) bool {
	req, log := x.req, x.log
	d, ok, err := wire.Deadline(req.Message)
	if err != nil {
		log.Warn("responder: ignoring a malformed request deadline", slog.Any("error", err))
		return false
	}
	if !ok {
		return false
	}
	if now := r.clk.Now(); !now.Before(d.Add(wire.DeadlineClockSkew)) {
		r.dropped(ctx, x, reasonExpired)
		log.Warn("responder: request deleted unhandled: its caller's deadline had passed", slog.Duration("late_by", now.Sub(d)))
		return true
	}
	req.deadline = d
	return false
}

// handlerDeadline is the deadline of a handler whose caller's deadline is
// caller, at now: early enough for its reply to reach the caller in time.
// The reply's travel is about two SQS calls (the reply's send, and the
// caller's waiting receive returning it), each lasting lat as the
// responder measures its calls; the handler gives up at most half the time
// it has left for it, and none before the first call is measured. The
// clock skew that keeps a late request from being deleted does not
// lengthen a handler's run: its caller, by its own clock, waits no longer.
func handlerDeadline(caller, now time.Time, lat time.Duration) time.Time {
	reserve := min(2*lat, caller.Sub(now)/2)
	return caller.Add(-max(reserve, 0))
}

// expire is the stage that deletes, without running the handler, a
// request whose caller gave up before it arrived (expired).
func expire(ctx context.Context, x *exchange, next step) action {
	if x.s.r.expired(ctx, x) {
		return action{kind: actDelete}
	}
	return next(ctx, x)
}
