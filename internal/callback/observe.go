package callback

import (
	"context"
	"log/slog"

	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/observe"
)

// Observe tells o (which may be nil) about e, a panic recovered and
// logged, and returns the done func to call when the observed call ends:
// never nil, and safe in the same way.
func Observe(ctx context.Context, log *slog.Logger, o observe.Observer, e observe.Event) func(reply *types.Message, err error) {
	if o == nil {
		return noDone
	}
	var done func(*types.Message, error)
	Run(log, "observer ("+e.Kind.String()+")", func() { done = o.Observe(ctx, e) })
	if done == nil {
		return noDone
	}
	return func(reply *types.Message, err error) {
		Run(log, "observer's done ("+e.Kind.String()+")", func() { done(reply, err) })
	}
}

func noDone(*types.Message, error) {}
