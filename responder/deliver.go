package responder

import (
	"context"
	"errors"
	"log/slog"
)

// deliver is the stage that sends the answer the stages inside it settled
// on (the handler's, or the Store's), and waits for the messages a stream
// sent before it. A send that fails fails the request, whose redelivery
// answers again; a response queue that is gone drops the reply, which
// nobody can receive.
func deliver(ctx context.Context, x *exchange, next step) action {
	act := next(ctx, x)
	if act.kind != actDelete || x.target == "" {
		return act
	}
	var err error
	if x.parts != nil {
		err = x.s.r.sendParts(x.cctx, x.req.Message, x.target, x.parts, x.entry)
	} else {
		err = x.s.r.send(x.cctx, x.req.Message, x.target, x.entry)
	}
	x.sent(err)
	if errors.Is(err, errCallerGone) {
		// Its deadline passed while the parts went: nobody joins them,
		// and a redelivery would be dropped as expired.
		x.s.r.dropped(ctx, x, reasonCancelled)
		return act
	}
	if errors.Is(err, ErrResponseQueueGone) {
		x.s.r.dropped(ctx, x, reasonQueueGone)
		return act
	}
	if err != nil {
		x.log.Warn("responder: sending reply failed; request left for redelivery", slog.Any("error", err))
		return fail(err)
	}
	if x.req.stream != nil {
		// The stream's messages went out with the final reply or before
		// it; one that failed fails the request, whose redelivery sends the
		// stream again.
		err := x.req.stream.wait(x.cctx)
		if errors.Is(err, ErrResponseQueueGone) {
			x.s.r.dropped(ctx, x, reasonQueueGone)
			return act
		}
		if err != nil {
			x.log.Warn("responder: sending a streamed reply failed; request left for redelivery", slog.Any("error", err))
			return fail(err)
		}
	}
	return act
}
