package responder

import (
	"context"

	"github.com/tempqueues/tempqueues/internal/backoff"
)

// retry is the stage that applies Options.BackoffBase to a request that
// failed anywhere inside it: it is left to its visibility timeout, or
// released at once or after a backoff with full jitter. Releases decided
// inside (a request in progress elsewhere) pass as they are.
func retry(ctx context.Context, x *exchange, next step) action {
	act := next(ctx, x)
	if act.kind != actFail {
		return act
	}
	o := &x.s.r.opts
	switch {
	case o.BackoffBase < 0:
		return action{kind: actRelease, reason: reasonFailed, err: act.err}
	case o.BackoffBase > 0:
		p := backoff.Policy{Base: o.BackoffBase, Cap: o.BackoffCap}
		return action{kind: actRelease, delay: p.Delay(x.req.ReceiveCount - 1), reason: reasonFailed, err: act.err}
	}
	return action{kind: actNone, err: act.err}
}
