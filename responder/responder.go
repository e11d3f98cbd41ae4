package responder

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/tempqueues/tempqueues/internal/backoff"
	"github.com/tempqueues/tempqueues/internal/batch"
	"github.com/tempqueues/tempqueues/internal/clock"
	"github.com/tempqueues/tempqueues/internal/deflog"
	"github.com/tempqueues/tempqueues/internal/hostq"
	"github.com/tempqueues/tempqueues/internal/httpbody"
	"github.com/tempqueues/tempqueues/internal/lifecycle"
	"github.com/tempqueues/tempqueues/internal/wire"
	"github.com/tempqueues/tempqueues/observe"
	"github.com/tempqueues/tempqueues/sqsapi"
)

// Options configure a Responder. Zero values mean the documented defaults.
type Options struct {
	// Logger receives operational warnings (dropped replies, failures) and
	// per-request debug records; nil means slog.Default(), as
	// docs/architecture.md#conventions says.
	Logger *slog.Logger

	// MaxConcurrency is the number of handlers Serve runs at once (handler
	// slots). Each receive asks for min(10, free slots). Default 10.
	MaxConcurrency int
	// MaxPollers bounds the concurrent ReceiveMessage calls of one Serve.
	// Serve starts with one poller and adds one while receives come back
	// full and slots are free, or while the pace of the requests at the
	// measured call latency asks for more (enough pollers to keep up, plus
	// one parked while requests come sparsely, so that a burst of them
	// waits for no round trip); an extra poller stops on an empty receive
	// or when the pace asks for fewer. Default ceil(MaxConcurrency/10), at
	// most 16.
	MaxPollers int
	// PreferFewerCalls trades latency for calls at moderate loads: a
	// reply waits for the send in flight to its queue instead of going in
	// a call of its own, and Serve keeps no spare poller parked for the
	// next burst of requests. By default the responder measures the call
	// latency and the pace of the requests and takes whichever is faster;
	// docs/cost.md says what this changes.
	PreferFewerCalls bool
	// PayloadStore, if set, carries the bodies over 448 KiB even
	// compressed (where S3 costs less than SQS, docs/cost.md), up to
	// 64 MiB, in the format of AWS's SQS extended
	// clients (docs/wire.md, "Payloads in S3"): a reply's body goes to the
	// store and the reply carries a pointer, which the requester reads and
	// deletes; a request that points to the store, from a requester or an
	// extended-client sender, is read from it, and its object deleted once
	// the request is answered and deleted. Without it, such a request
	// fails (and its queue's redrive policy dead-letters it), as does a
	// request whose object is missing; a reply that does not fit travels
	// in parts to a requester that joins them, and fails as an invalid
	// reply to any other (the package doc's "Large replies"). A stream's
	// and a session's messages go through it too, both ways: Request.Recv
	// reads a caller's from it and deletes the object. The nested module
	// s3payload provides one on Amazon S3.
	PayloadStore sqsapi.PayloadStore
	// DisableCompression sends every reply as it is, even to a requester
	// that offers to read compressed ones. Compressed requests are read
	// whatever it says (the package doc's "Compression").
	DisableCompression bool
	// PollWaitTime is the long-poll wait of each receive, 1 s to 20 s. It
	// does not delay a stop (see Shutdown); an idle Serve makes one call per
	// PollWaitTime. Default 20 s.
	PollWaitTime time.Duration
	// VisibilityTimeout is requested on every receive (whole seconds, 1 s to
	// 12 h) and the step of the visibility extensions: while a handler
	// runs its request is extended when less than half of it remains. A
	// crashed responder's request reappears at most this long after the
	// last extension. Default 30 s.
	VisibilityTimeout time.Duration
	// HandlerTimeout, if positive, bounds each handler run.
	HandlerTimeout time.Duration
	// DrainTimeout is the grace period of a Serve whose context is
	// cancelled: that Serve stops as Shutdown stops the responder, with a
	// context whose deadline is DrainTimeout away. Default 30 s.
	DrainTimeout time.Duration
	// ReplyTimeout bounds each reply send (a handler's reply, a stored one
	// replayed, SendResponseMessage), whatever context it is given, so a
	// stuck send cannot hold a worker slot: past it the send fails with
	// context.DeadlineExceeded and the request is left for redelivery.
	// Default 30 s.
	ReplyTimeout time.Duration

	// BackoffBase says when a request whose handler failed becomes
	// visible again (each redelivery raises its receive count, so with a
	// RedrivePolicy it moves to the dead-letter queue after
	// maxReceiveCount): 0 (default) when its visibility ends, at most
	// VisibilityTimeout later, with no API call; above 0 after a backoff
	// with full jitter, a random delay up to min(BackoffCap, BackoffBase x
	// 2^(receives-1)); below 0 at once.
	BackoffBase time.Duration
	// BackoffCap bounds the backoff. Default 15 min; at most
	// VisibilityTimeout's 12-hour limit.
	BackoffCap time.Duration

	// Store, if set, deduplicates deliveries by request id: a request
	// answered before is answered again from the stored reply without
	// running the handler, and one held by another consumer is put back for
	// InProgressDelay instead of running twice.
	Store Store
	// StoreTTL is how long answers are kept in the Store. Default 1 h.
	StoreTTL time.Duration
	// InProgressDelay is how long a request held by another consumer stays
	// invisible before it is looked at again. Default VisibilityTimeout.
	// Each look counts as a receive towards the queue's maxReceiveCount, so
	// keep maxReceiveCount x InProgressDelay above your longest handler.
	InProgressDelay time.Duration

	// Middleware wraps every handler Serve and Process run, the way
	// logging, metrics, authorization or tracing are added without forking
	// Serve. The first function is the outermost: with [a, b] a request goes
	// through a, then b, then the handler, and the reply back through b,
	// then a. Each runs under the handler's context and panic recovery, so
	// a middleware that panics fails only its request.
	Middleware []func(Handler) Handler

	// Observer, if set, is told what Serve and Process do: Reply before
	// each reply is checked and sent (its done func gets the send's
	// result), Handled after each handler run, Dropped and Released with
	// their reasons. Events and reasons: the package doc's "Observing".
	// nil: no events.
	Observer observe.Observer

	// Propagator, if set, writes into each reply before it is checked and
	// sent, and before the Observer's Reply event (a trace context:
	// message attributes within the room left, an AWSTraceHeader system
	// attribute). nil: replies go as the handler made them.
	Propagator observe.Propagator

	// SessionQueuePrefix starts the name of the host queue a responder
	// creates on the first session it opens, for the messages its callers
	// stream; default sqsapi.DefaultQueuePrefix, so that requesters'
	// sweeps reap it if the process dies. It needs the queue operations
	// and IAM actions of the package doc's "Sessions".
	SessionQueuePrefix string

	// AllowReplyTo widens the queues replies may go to, which by default
	// are requesters' host queues with the default prefix next to the
	// request queue. Each entry is a queue-name prefix (a requester's
	// custom Prefix: queues in the request queue's account and region) or
	// a queue-URL prefix with a scheme ("https://sqs.eu-west-1.amazonaws.com/111122223333/":
	// any account or region). The rule, and what happens to a request that
	// breaks it: the package doc's "Where replies may go".
	AllowReplyTo []string
}

const (
	defaultMaxConcurrency = 10
	defaultVisibility     = 30 * time.Second
	defaultDrainTimeout   = 30 * time.Second
	defaultReplyTimeout   = 30 * time.Second
	defaultStoreTTL       = time.Hour
	maxPollersCap         = 16
	// finalTimeout bounds the calls made after a stop's grace period has
	// ended (releasing the abandoned requests, flushing deletes), and the
	// wait for handlers that ignore their cancelled context.
	finalTimeout = time.Second
)

// Responder answers requests sent by a requester (Go or Java). It is safe
// for concurrent use: several Serve loops, on one or more request queues,
// may share it, and SendResponseMessage may be called from any goroutine.
type Responder struct {
	client sqsapi.MessageClient
	opts   Options
	log    *slog.Logger

	sends    *batch.Sends
	turns    streamTurns // the streams' messages, to sends in turn
	sessions sessions    // the host queue of the sessions it serves
	dels     *batch.Deletes
	vis      *batch.Visibilities
	stats    counters
	recvBO   backoff.Policy
	clk      clock.Clock

	// replyTo says where replies may go; refused rate-limits their log.
	replyTo replyPolicy
	refused refusals

	// maxVisibility is SQS's cap on a message's total visibility since
	// receipt; a field so tests can shrink it.
	maxVisibility time.Duration
	// callBound is callBound, a field so tests can shrink it.
	callBound time.Duration

	mu      sync.Mutex
	closed  bool
	servers sync.WaitGroup // running Serve calls
	// payloadDeletes counts the deletions of answered requests' objects
	// from Options.PayloadStore, which Shutdown waits for.
	payloadDeletes sync.WaitGroup
	stopping       chan struct{} // closed by Shutdown: stop receiving
	hardStop       chan struct{} // closed when Shutdown's context ends: stop handlers

	stopper lifecycle.Once
}

// New returns a Responder that calls SQS through client (an *sqs.Client
// without sqsclient.BufferRequestBodies through a copy with it installed). It
// validates the options and returns an *sqsapi.InvalidInputError for bad
// ones.
func New(client sqsapi.MessageClient, optFns ...func(*Options)) (*Responder, error) {
	if err := wire.CheckClient("responder.New", "client", client); err != nil {
		return nil, err
	}
	var o Options
	for _, fn := range optFns {
		fn(&o)
	}
	if err := resolveOptions(&o); err != nil {
		return nil, err
	}
	replyTo, err := newReplyPolicy("responder.New", o.AllowReplyTo)
	if err != nil {
		return nil, err
	}
	policy := batch.SendPolicy(client, o.PreferFewerCalls)
	client = httpbody.Ensure(client)
	inFlight := max(2, o.MaxConcurrency/10)
	// Reply sends in flight: full batches, and replies that internal/batch's
	// policy lets overtake a call in flight (sparse traffic, where each
	// would otherwise wait a call's latency), start calls while others
	// run; so the streams of many handlers go out at once, and at least 4
	// lone replies do.
	sendsInFlight := max(inFlight, o.MaxConcurrency/4, 4)
	r := &Responder{
		client:        client,
		opts:          o,
		log:           o.Logger,
		replyTo:       replyTo,
		sends:         batch.NewSends(client, sendsInFlight, policy),
		dels:          batch.NewDeletes(client, inFlight, batch.DeleteLinger),
		vis:           batch.NewVisibilities(client, inFlight),
		recvBO:        backoff.Policy{Base: 100 * time.Millisecond, Cap: 10 * time.Second},
		maxVisibility: wire.MaxVisibilityTimeout * time.Second,
		callBound:     callBound,
		stopping:      make(chan struct{}),
		hardStop:      make(chan struct{}),
	}
	r.turns.r = r
	r.turns.limit = (sendsInFlight + 1) * wire.MaxBatchEntries
	return r, nil
}

func resolveOptions(o *Options) error {
	const op = "responder.New"
	o.Logger = deflog.Or(o.Logger)
	switch {
	case o.MaxConcurrency < 0:
		return wire.Invalid(op, "MaxConcurrency", "negative")
	case o.MaxConcurrency == 0:
		o.MaxConcurrency = defaultMaxConcurrency
	}
	switch {
	case o.MaxPollers < 0:
		return wire.Invalid(op, "MaxPollers", "negative")
	case o.MaxPollers == 0:
		o.MaxPollers = min(maxPollersCap, (o.MaxConcurrency+wire.MaxReceiveMessages-1)/wire.MaxReceiveMessages)
	}
	switch {
	case o.PollWaitTime == 0:
		o.PollWaitTime = wire.MaxWaitTimeSeconds * time.Second
	case o.PollWaitTime < time.Second || o.PollWaitTime > wire.MaxWaitTimeSeconds*time.Second:
		return wire.Invalid(op, "PollWaitTime", "%v is outside 1s to %ds", o.PollWaitTime, wire.MaxWaitTimeSeconds)
	}
	switch {
	case o.VisibilityTimeout == 0:
		o.VisibilityTimeout = defaultVisibility
	case o.VisibilityTimeout < time.Second || o.VisibilityTimeout > wire.MaxVisibilityTimeout*time.Second:
		return wire.Invalid(op, "VisibilityTimeout", "%v is outside 1s to 12h", o.VisibilityTimeout)
	case o.VisibilityTimeout%time.Second != 0:
		return wire.Invalid(op, "VisibilityTimeout", "%v is not a whole number of seconds", o.VisibilityTimeout)
	}
	if o.HandlerTimeout < 0 {
		return wire.Invalid(op, "HandlerTimeout", "negative")
	}
	switch {
	case o.DrainTimeout < 0:
		return wire.Invalid(op, "DrainTimeout", "negative")
	case o.DrainTimeout == 0:
		o.DrainTimeout = defaultDrainTimeout
	}
	switch {
	case o.ReplyTimeout < 0:
		return wire.Invalid(op, "ReplyTimeout", "negative")
	case o.ReplyTimeout == 0:
		o.ReplyTimeout = defaultReplyTimeout
	}
	if o.BackoffCap < 0 {
		return wire.Invalid(op, "BackoffCap", "negative")
	}
	if o.BackoffCap == 0 {
		o.BackoffCap = 15 * time.Minute
	}
	switch {
	case o.StoreTTL < 0:
		return wire.Invalid(op, "StoreTTL", "negative")
	case o.StoreTTL == 0:
		o.StoreTTL = defaultStoreTTL
	}
	switch {
	case o.InProgressDelay < 0 || o.InProgressDelay > wire.MaxVisibilityTimeout*time.Second:
		return wire.Invalid(op, "InProgressDelay", "%v is outside 0 to 12h", o.InProgressDelay)
	case o.InProgressDelay == 0:
		o.InProgressDelay = o.VisibilityTimeout
	}
	if o.SessionQueuePrefix == "" {
		o.SessionQueuePrefix = sqsapi.DefaultQueuePrefix
	}
	if err := hostq.CheckOwner(op, o.SessionQueuePrefix, wire.DefaultIdleQueueRetention); err != nil {
		return err
	}
	return nil
}

// register adds a Serve call, unless the responder is shut down.
func (r *Responder) register() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return false
	}
	r.servers.Add(1)
	return true
}

// Shutdown stops the responder gracefully, as http.Server.Shutdown does:
// every Serve stops receiving, running handlers may finish until ctx ends,
// then the rest are cancelled (cause sqsapi.ErrClosed) and their requests released
// (visible again at once, or as soon as no cancelled long poll can take
// them); replies, deletes and visibility changes are flushed, and each
// Serve returns nil. A long poll in flight gets half a second to return
// (what it returns is released) before it is cancelled, so an idle
// responder stops within about half a second. Later Serve and
// SendResponseMessage calls fail with sqsapi.ErrClosed.
//
// Shutdown returns nil when no handler had to be abandoned, and ctx.Err()
// when some were. It returns as soon as everything is done, or when ctx
// ends plus the time to release and flush (normally milliseconds, at most
// a second per step when SQS does not answer). A handler that ignores its
// cancelled context keeps its Serve (not Shutdown) from returning. A
// termination grace period can be passed on as it is. Shutdown is
// idempotent: later calls wait for the first and return its result.
func (r *Responder) Shutdown(ctx context.Context) error {
	return r.stopper.Do(ctx, func() error {
		r.mu.Lock()
		r.closed = true
		close(r.stopping)
		r.mu.Unlock()
		return r.shutdown(ctx)
	})
}

func (r *Responder) shutdown(ctx context.Context) error {
	abandoned := r.stats.Abandoned.Load()
	served := make(chan struct{})
	go func() {
		r.servers.Wait()
		close(served)
	}()
	var err error
	select {
	case <-served:
	case <-ctx.Done():
		close(r.hardStop)
		t := time.NewTimer(finalTimeout)
		select {
		case <-served:
		case <-t.C:
			r.log.Warn("responder: Shutdown: handlers ignore their cancelled context; returning without them")
		}
		t.Stop()
		if r.stats.Abandoned.Load() > abandoned {
			err = ctx.Err()
		}
	}
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finalTimeout)
	defer cancel()
	if cerr := r.closeSessions(fctx); cerr != nil {
		err = cerr
	}
	for _, c := range []interface{ Close(context.Context) error }{r.sends, r.dels, r.vis} {
		if cerr := c.Close(fctx); cerr != nil && err == nil {
			err = cerr
		}
	}
	// The deletes' callbacks have all run: every object deletion due has
	// started.
	if werr := lifecycle.Wait(fctx, &r.payloadDeletes); werr != nil && err == nil {
		err = fmt.Errorf("responder: Shutdown: deleting answered requests' payloads: %w", werr)
	}
	return err
}

// callLatency is how long a call to SQS takes, as the reply sends (or,
// before the first, the deletes) measure it: pollers size themselves by it.
func (r *Responder) callLatency() time.Duration {
	if l := r.sends.Latency(); l > 0 {
		return l
	}
	return r.dels.Latency()
}
