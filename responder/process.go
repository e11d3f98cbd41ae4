package responder

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/internal/consume"
	"github.com/tempqueues/tempqueues/internal/wire"
	"github.com/tempqueues/tempqueues/sqsapi"
)

// errInProgress is the cause of a Process error for a request that another
// consumer holds in the idempotency Store: it is put back for
// Options.InProgressDelay rather than run twice. The RetryError says so
// (Release, Delay); the cause only explains it in logs.
var errInProgress = errors.New("responder: request in progress elsewhere")

// RetryError is the error Process returns for a request it leaves for
// redelivery. Err says why (the handler's error, a *PanicError, another
// consumer holding the request in the Store, a failed Store or reply
// send). When Release is true the caller should make the request visible
// again after Delay (ChangeMessageVisibility), as Serve does under
// Options.BackoffBase and, after Options.InProgressDelay, for requests in
// progress elsewhere; otherwise the request reappears when its visibility
// timeout ends.
type RetryError struct {
	Err     error
	Release bool
	Delay   time.Duration
}

func (e *RetryError) Error() string {
	if e.Release {
		return fmt.Sprintf("responder: request left for redelivery in %v: %v", e.Delay, e.Err)
	}
	return fmt.Sprintf("responder: request left for redelivery: %v", e.Err)
}

// Unwrap returns the reason.
func (e *RetryError) Unwrap() error { return e.Err }

// Process handles one request that reached this process by other means
// than Serve (a Lambda SQS event, a receive loop of your own) exactly as
// Serve handles one: the caller's deadline (a request whose caller gave up
// is done, nil, without running the handler), the ResponseQueueUrl check
// (a request naming a queue Options.AllowReplyTo does not allow is done,
// unanswered: nil), the idempotency Store (a request answered before is
// answered again from the stored reply without running the handler),
// Options.Middleware, the handler under Options.HandlerTimeout and the
// caller's deadline with panics recovered, the Observer's events, and the reply.
// The handler runs under ctx. queueURL is the queue m came from. Process
// opens no session: a session request (requester.OpenSession) is answered
// as a reply stream, and its handler's Recv fails with an error matching
// ErrSessionsUnsupported.
// Nothing extends the request's visibility or renews its Store lease,
// which lasts Options.VisibilityTimeout: keep that above the longest
// handler run.
//
// Process neither deletes the request nor changes its visibility, which is
// the caller's part: nil means the request is done and may be deleted; a
// *RetryError means it stays for redelivery (and says when it should be
// visible again). Process returns sqsapi.ErrClosed after Shutdown, and an
// *sqsapi.InvalidInputError for a nil handler or middleware.
func (r *Responder) Process(ctx context.Context, queueURL string, m types.Message, h Handler) error {
	h, err := r.wrap("responder.Process", h)
	if err != nil {
		return err
	}
	if !r.register() {
		return sqsapi.ErrClosed
	}
	defer r.servers.Done()
	s := &server{r: r, queueURL: queueURL, h: h, base: context.WithoutCancel(ctx), noSessions: true}
	s.steps = chain(stages, s.answer)
	r.stats.Received.Add(1)
	r.stats.InFlight.Add(1)
	defer r.stats.InFlight.Add(-1)
	hctx, cancel := context.WithCancel(ctx)
	defer cancel()
	d := consume.NewDelivery(m, r.clk.Now())
	act := s.process(hctx, d)
	if act.kind == actRelease {
		// The caller releases it: the Observer hears of the decision.
		s.released(m, act.delay, act.reason)
	}
	if act.kind == actDelete {
		d.Deleted() // its payload's object, if any: the caller deletes the message
		return nil
	}
	return &RetryError{Err: act.err, Release: act.kind == actRelease, Delay: act.delay}
}

// wrap applies Options.Middleware to h, the first one outermost.
func (r *Responder) wrap(op string, h Handler) (Handler, error) {
	if h == nil {
		return nil, wire.Invalid(op, "handler", "nil handler")
	}
	if r.opts.Observer != nil || r.opts.Propagator != nil {
		// The Propagator and the Observer's Reply event get the context
		// the handler ran under, with what the middleware put in it (a
		// span).
		inner := h
		h = HandlerFunc(func(ctx context.Context, req *Request) (*Reply, error) {
			if req.inner != nil {
				req.inner.set(ctx)
			}
			return inner.HandleRequest(ctx, req)
		})
	}
	mw := r.opts.Middleware
	for i := len(mw) - 1; i >= 0; i-- {
		if mw[i] == nil {
			return nil, wire.Invalid(op, "Middleware", "middleware %d is nil", i)
		}
		if h = mw[i](h); h == nil {
			return nil, wire.Invalid(op, "Middleware", "middleware %d returned a nil handler", i)
		}
	}
	return h, nil
}
