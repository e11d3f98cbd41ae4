package responder

import (
	"context"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/internal/callback"
	"github.com/tempqueues/tempqueues/observe"
)

// Reasons the responder gives its Observer (Options.Observer documents
// them).
const (
	reasonExpired   = "expired"
	reasonRefused   = "refused"
	reasonQueueGone = "reply-queue-gone"
	reasonDuplicate = "duplicate"
	reasonFailed    = "failed"
	reasonBusy      = "in-progress"
	reasonCancelled = "cancelled" // the caller went away while the handler ran
	reasonAborted   = "aborted"   // a session ended without an answer; its caller was told
	reasonMalformed = "malformed" // its compressed body does not decompress
)

// tell gives e to Options.Observer and returns the func to call when the
// call it describes ends (a no-op without an observer).
func (r *Responder) tell(ctx context.Context, e observe.Event) func(*types.Message, error) {
	return callback.Observe(ctx, r.log, r.opts.Observer, e)
}

// dropped counts a request deleted without its handler run or its reply
// sent, and tells the Observer why.
func (r *Responder) dropped(ctx context.Context, x *exchange, reason string) {
	r.stats.dropped.Add(1)
	if r.opts.Observer != nil {
		m := x.req.Message
		r.tell(ctx, observe.Event{Kind: observe.Dropped, Queue: x.s.queueURL, Message: &m, RequestID: x.req.ID, Reason: reason})
	}
}

// released tells the Observer of a request made visible again: by the
// engine once done (Serve), or as decided (Process, whose caller
// releases). Releases at a stop have reason consume.ReasonStopping.
func (s *server) released(m types.Message, delay time.Duration, reason string) {
	r := s.r
	if r.opts.Observer == nil {
		return
	}
	r.tell(s.base, observe.Event{Kind: observe.Released, Queue: s.queueURL, Message: &m, RequestID: requestID(m),
		Reason: reason, Duration: delay})
}
