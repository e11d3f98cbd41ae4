package redrive

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/internal/wire"
)

// Process takes one step of Run for messages received from the dead-letter
// queue by other means (a Lambda function with the dead-letter queue as its
// event source): for each message, the same decision Run makes (replay
// with a full-jitter delay and the attempt count raised, schedule beyond
// 900 s, hide a scheduled copy until due, or park) and the same calls
// (sends grouped per queue, then the deletes of what was sent, then the
// visibility hops). The messages need their message attributes, their
// receipt handles and, to keep a trace, their AWSTraceHeader. The
// Observer is told of each, as by Run.
//
// It reports for each message, in order, whether it is done with on the
// dead-letter queue, so that a caller that deletes what it was given (a
// Lambda event source mapping) may delete it: its action happened (a
// replay whose own delete failed included), and it is not a scheduled
// copy hidden until due ("wait"). A message not done must stay: its
// action failed, or it waits. The error is non-nil when the target cannot
// be found or every later message would fail the same way (a missing
// queue, denied access). DryRun is refused (an *sqsapi.InvalidInputError):
// only Drain accepts it.
func (r *Redriver) Process(ctx context.Context, msgs []types.Message) (done []bool, err error) {
	if r.opts.DryRun {
		return nil, wire.Invalid("redrive.Process", "DryRun", "only Drain accepts a dry run")
	}
	target, err := r.Target(ctx)
	if err != nil {
		return nil, err
	}
	p := r.newPass(target)
	defer p.close(ctx)
	return p.act(ctx, msgs)
}
