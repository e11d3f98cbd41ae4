package responder

import (
	"context"
	"errors"
	"log/slog"
)

// route is the stage that checks, before its handler runs, where a
// request's reply would go. One that names a queue replies may not go to
// (Options.AllowReplyTo) is deleted unanswered, dropped as "refused" and
// logged by replyTarget. One whose reply could never be sent (a malformed
// ResponseQueueUrl) fails: a poison request, which then ends in the
// dead-letter queue. A request that asks for a reply gets its reply
// stream here.
func route(ctx context.Context, x *exchange, next step) action {
	if !x.requested {
		return next(ctx, x)
	}
	if _, _, err := x.s.r.replyTarget(ctx, x.s.queueURL, x.req.Message); errors.Is(err, ErrReplyRefused) {
		x.s.r.dropped(ctx, x, reasonRefused)
		return action{kind: actDelete}
	} else if err != nil {
		x.s.r.stats.failed.Add(1)
		x.log.Error("responder: request has a malformed ResponseQueueUrl; not handled", slog.Any("error", err))
		return fail(err)
	}
	x.req.stream = x.s.r.newReplyStream(x.req)
	return next(ctx, x)
}
