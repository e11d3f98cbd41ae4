package responder

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/internal/batch"
	"github.com/tempqueues/tempqueues/internal/consume"
	"github.com/tempqueues/tempqueues/internal/wire"
	"github.com/tempqueues/tempqueues/sqsapi"
)

// Serve receives requests from queueURL and answers them with h until ctx
// is cancelled or Shutdown is called; it blocks until then.
//
// Serve long-polls with up to Options.MaxConcurrency handlers running, each
// in its own goroutine under a context that carries ctx's values but is
// cancelled only by the responder (HandlerTimeout, shutdown, the 12-hour
// visibility limit). A new receive starts as soon as a handler slot frees
// up. While a handler runs, its request's visibility is extended in
// batched calls. After a successful handler Serve sends the reply, if the
// request asked for one, and deletes the request; after a failure it
// leaves the request for redelivery (Options.BackoffBase).
//
// Cancelling ctx stops this Serve gracefully, by Shutdown's rules, with
// Options.DrainTimeout as the grace period: no new receive, running
// handlers may finish, and at the end of the grace period the rest are
// cancelled and their requests released. A long poll in flight is
// cancelled after half a second, so an idle Serve stops within about half a
// second. Pending deletes and visibility changes are flushed before Serve
// returns.
//
// Serve returns nil after a stop, sqsapi.ErrClosed if the responder was already
// shut down, and a wrapped *types.QueueDoesNotExist if the request queue
// does not exist. Other receive errors (throttling, 5xx, network, denied
// access) are logged and retried with exponential backoff and full jitter.
func (r *Responder) Serve(ctx context.Context, queueURL string, h Handler) error {
	if queueURL == "" || wire.IsVirtualQueueURL(queueURL) {
		return wire.Invalid("responder.Serve", "queueURL", "%q is not a queue URL", queueURL)
	}
	h, err := r.wrap("responder.Serve", h)
	if err != nil {
		return err
	}
	if !r.register() {
		return sqsapi.ErrClosed
	}
	defer r.servers.Done()

	s := &server{r: r, queueURL: queueURL, h: h, base: context.WithoutCancel(ctx)}
	s.steps = chain(stages, s.answer)
	return consume.Run(ctx, consume.Config{
		Name:              "responder",
		Client:            r.client,
		QueueURL:          queueURL,
		MaxConcurrency:    r.opts.MaxConcurrency,
		MaxPollers:        r.opts.MaxPollers,
		PollWaitTime:      r.opts.PollWaitTime,
		VisibilityTimeout: r.opts.VisibilityTimeout,
		DrainTimeout:      r.opts.DrainTimeout,
		MaxVisibility:     r.maxVisibility,
		NoSpare:           r.opts.PreferFewerCalls,
		Deletes:           r.dels,
		AfterDeletes:      &r.payloadDeletes,
		Visibility:        r.vis,
		Counters:          &r.stats.Counters,
		Backoff:           r.recvBO,
		Clock:             r.clk,
		Log:               r.log,
		Stopping:          r.stopping,
		HardStop:          r.hardStop,
		Latency:           r.callLatency,
		Key:               requestID,
		OnReceive:         s.announceReplies,
		Renew:             s.renew,
		OnRelease:         s.released,
	}, s.handle)
}

// server is one running Serve call, or one Process call.
type server struct {
	r        *Responder
	queueURL string
	h        Handler
	base     context.Context // Serve's context without its cancellation
	steps    step            // the stages, around the handler (stages.go)
	// noSessions: Process, which may run in a short-lived process, opens
	// no sessions.
	noSessions bool
}

// handle is the engine's handler: the request takes its way through the
// stages.
func (s *server) handle(ctx context.Context, d *consume.Delivery) consume.Outcome {
	act := s.process(ctx, d)
	return consume.Outcome{Action: consume.Action(act.kind), Delay: act.delay, Reason: act.reason}
}

// renew renews a request's Store lease after its visibility was extended.
func (s *server) renew(ctx context.Context, d *consume.Delivery, lease string) {
	r := s.r
	id := requestID(d.Message)
	err := r.opts.Store.Renew(ctx, id, lease, r.opts.VisibilityTimeout)
	if err != nil && (!errors.Is(err, ErrLeaseLost) || d.Running()) {
		r.stats.errors.Add(1)
		r.log.Warn("responder: renewing idempotency lease failed", slog.String("request_id", id), slog.Any("error", err))
	}
}

// announceReplies tells the reply sends how many of msgs, received together,
// answer to each queue: their handlers run together, and their replies
// then share one call instead of racing each other out (internal/batch's
// Announce), which the receive at the requester's end also takes in one.
func (s *server) announceReplies(msgs []types.Message) {
	var one [wire.MaxReceiveMessages]batch.Count
	targets := one[:0]
	for _, m := range msgs {
		if u, ok := stringAttribute(m, sqsapi.ResponseQueueURLAttribute); ok {
			if target, _, err := responseTarget(u); err == nil && s.r.replyTo.allows(s.queueURL, target) {
				targets = batch.AddCount(targets, target)
			}
		}
	}
	s.r.sends.AnnounceAll(targets)
}

// callBound bounds the Store and reply calls a request makes before its
// handler runs, and those it makes after.
const callBound = 30 * time.Second

// callCtx is the context of the store and reply calls a request makes:
// they complete even while Serve stops, within Responder.callBound.
func (s *server) callCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(s.base, s.r.callBound)
}
