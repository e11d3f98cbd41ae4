package responder

import (
	"context"
	"log/slog"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/internal/consume"
)

// stages are the steps a received request goes through, outermost first.
// Each is a function in a file of its own; it may settle the request
// itself or pass it on, and sees what the stages inside it decided:
//
//	retry    (retry.go)     a failure becomes Options.BackoffBase's release or wait
//	decode   (decode.go)    a compressed body is inflated; one that cannot be is deleted
//	expire   (deadline.go)  a request whose caller gave up is deleted unhandled
//	route    (route.go)     a reply to a queue not allowed is refused; one that can never be sent fails
//	deliver  (deliver.go)   the answer is sent, and the stream's messages waited for
//	dedupe   (dedupe.go)    the Store answers a request seen before, or records the answer
//	answer   (answer.go)    the handler runs, with its deadlines and panics
//	                        recovered, and its result becomes the answer
//
// answer is the last step, which every other stage wraps. A new policy is
// a new stage in this list and a file of its own.
var stages = []stage{retry, decode, expire, route, deliver, dedupe}

// stage is one step of a request's way: it settles x, or calls next for
// the stages inside it.
type stage func(ctx context.Context, x *exchange, next step) action

// step is the rest of the way from a stage on.
type step func(ctx context.Context, x *exchange) action

// chain joins stages around last into one step.
func chain(stages []stage, last step) step {
	next := last
	for i := len(stages) - 1; i >= 0; i-- {
		st, inner := stages[i], next
		next = func(ctx context.Context, x *exchange) action { return st(ctx, x, inner) }
	}
	return next
}

// exchange is one request on its way through the stages, with what they
// learn about it.
type exchange struct {
	s    *server
	d    *consume.Delivery
	req  *Request
	log  *slog.Logger
	cctx context.Context // for the Store's and the reply's calls
	// endCalls releases cctx, which answer renews once the handler
	// returned: the handler may have run longer than callBound.
	endCalls context.CancelFunc

	requested bool // the request asks for a reply (ResponseQueueUrl)

	// Set by answer, or by dedupe from the Store.
	target string                               // where the answer goes; "" when nothing is sent
	entry  types.SendMessageBatchRequestEntry   // the answer, checked: a reply in parts' last
	parts  []types.SendMessageBatchRequestEntry // a reply in parts' parts before entry, or nil
	sent   func(error)                          // reports the answer's send to Options.Observer
	stored *Reply                               // what the Store keeps as the answer
}

// action is what happens to a request after the stages.
type action struct {
	kind   int
	delay  time.Duration // for actRelease
	reason string        // for actRelease: why, for the Observer
	err    error         // why a request is not done (for Process)
}

const (
	actNone    = int(consume.Leave)   // nothing: abandoned, or left to its visibility timeout
	actDelete  = int(consume.Delete)  // done: delete it
	actRelease = int(consume.Release) // make it visible after delay
	actFail    = actRelease + 1       // failed: the retry stage applies Options.BackoffBase
)

// fail is the action of a request that failed for err.
func fail(err error) action { return action{kind: actFail, err: err} }

// process takes d's request through the stages.
func (s *server) process(ctx context.Context, d *consume.Delivery) action {
	r, req := s.r, newRequest(s.queueURL, d.Message)
	log := r.log
	if log.Enabled(context.Background(), slog.LevelError) {
		// Only a logger that logs something needs the request's attributes:
		// a silent one would build them for nothing on every request.
		log = log.With(slog.String("queue_url", s.queueURL), slog.String("message_id", aws.ToString(req.Message.MessageId)),
			slog.String("request_id", req.ID), slog.Int("receive_count", req.ReceiveCount))
	}
	x := &exchange{s: s, d: d, req: req, log: log, requested: responseRequested(req.Message), sent: noDone}
	x.cctx, x.endCalls = s.callCtx()
	defer func() { x.endCalls() }() // the one answer made, if it did
	return s.steps(ctx, x)
}
