package responder

import (
	"context"
	"log/slog"

	"github.com/google/uuid"
)

// dedupe is the stage of Options.Store, the idempotency store: a request
// answered before is answered again from the stored answer without running
// its handler, and one that another consumer holds is put back for
// Options.InProgressDelay rather than run twice. Otherwise it holds the
// request's lease (renewed with each visibility extension) while the stages
// inside it run, and then records their answer, or gives the lease up when
// there is none.
func dedupe(ctx context.Context, x *exchange, next step) action {
	r := x.s.r
	st := r.opts.Store
	if st == nil {
		return next(ctx, x)
	}
	token := uuid.NewString()
	e, err := st.Begin(x.cctx, x.req.ID, token, r.opts.VisibilityTimeout)
	if err != nil {
		r.stats.errors.Add(1)
		x.log.Error("responder: idempotency store failed; request left for redelivery", slog.Any("error", err))
		return fail(err)
	}
	switch e.Status {
	case Done:
		r.dropped(ctx, x, reasonDuplicate)
		x.log.Debug("responder: request answered before; replaying the stored reply")
		if x.requested && e.Reply != nil {
			rep, done := e.Reply, noDone
			if !isStoredEnd(x.req, rep) { // a stream's end mark goes as it went
				rep, done = r.onReply(ctx, x.req, rep)
			}
			if x.target, x.entry, x.parts, err = r.buildReply(x.cctx, x.req.Message, rep, nil, r.compresses(x.req), x.req.parts); err != nil {
				done(err)
				x.log.Warn("responder: the stored reply cannot be sent", slog.Any("error", err))
				return fail(err)
			}
			x.sent = done
		}
		return action{kind: actDelete}
	case InProgress:
		x.log.Debug("responder: request in progress elsewhere; put back", slog.Duration("delay", r.opts.InProgressDelay))
		return action{kind: actRelease, delay: r.opts.InProgressDelay, reason: reasonBusy, err: errInProgress}
	}
	x.d.SetLease(token)
	act := next(ctx, x)
	if act.kind == actDelete {
		if err := st.Complete(x.cctx, x.req.ID, token, x.stored, r.opts.StoreTTL); err != nil {
			r.stats.errors.Add(1)
			x.log.Warn("responder: storing the reply failed", slog.Any("error", err))
		}
		return act
	}
	if err := st.Release(x.cctx, x.req.ID, token); err != nil {
		r.stats.errors.Add(1)
		x.log.Warn("responder: releasing idempotency lease failed", slog.Any("error", err))
	}
	return act
}
