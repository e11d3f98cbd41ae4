package responder

import (
	"context"
	"log/slog"

	"github.com/tempqueues/tempqueues/internal/wire"
)

// expired reports whether req's caller gave up before the request reached
// the handler: its sqsapi.DeadlineAttribute, plus the clock skew allowed,
// has passed. Such a request is deleted unhandled, dropped as "expired"
// and logged. Otherwise it notes the deadline in req, for
// the handler's context. A request without the attribute (a Java
// requester's) or with a malformed one runs with no deadline of its own.
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
	d = d.Add(wire.DeadlineClockSkew)
	if now := r.clk.Now(); !now.Before(d) {
		r.dropped(ctx, x, reasonExpired)
		log.Warn("responder: request deleted unhandled: its caller's deadline had passed", slog.Duration("late_by", now.Sub(d)))
		return true
	}
	req.deadline = d
	return false
}

// expire is the stage that deletes, without running the handler, a
// request whose caller gave up before it arrived (expired).
func expire(ctx context.Context, x *exchange, next step) action {
	if x.s.r.expired(ctx, x) {
		return action{kind: actDelete}
	}
	return next(ctx, x)
}
