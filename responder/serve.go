package responder

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/google/uuid"

	"github.com/tempqueues/tempqueues/internal/backoff"
	"github.com/tempqueues/tempqueues/internal/batch"
	"github.com/tempqueues/tempqueues/internal/workers"
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
// leaves the request for redelivery (Options.Retry).
//
// When ctx is cancelled Serve stops receiving and waits up to
// Options.DrainTimeout for running handlers; after Shutdown it waits until
// Shutdown's context ends. A long poll in flight is not aborted but runs
// out its WaitTime, and the requests it returns are released at once:
// SQS can hand messages to a poll whose client hung up, and they would stay
// invisible for a visibility timeout. So an idle Serve takes up to
// WaitTime to stop; lower WaitTime for quicker stops. At the deadline,
// the poll is aborted, handlers still running are cancelled and their
// requests released for another consumer. Pending deletes are flushed
// before Serve returns.
//
// Serve returns nil after a graceful stop, ErrClosed if the responder was
// already shut down, and a wrapped *types.QueueDoesNotExist if the request
// queue does not exist. Other receive errors (throttling, 5xx, network) are
// logged and retried with exponential backoff and full jitter.
func (r *Responder) Serve(ctx context.Context, queueURL string, h Handler) error {
	if queueURL == "" || sqsapi.IsVirtualQueueURL(queueURL) {
		return sqsapi.Invalid("Serve", "queueURL", "%q is not a queue URL", queueURL)
	}
	if h == nil {
		return sqsapi.Invalid("Serve", "handler", "nil handler")
	}
	if !r.register() {
		return ErrClosed
	}
	defer r.servers.Done()

	s := &server{
		r:        r,
		queueURL: queueURL,
		h:        h,
		base:     context.WithoutCancel(ctx),
		slots:    make(chan struct{}, r.opts.MaxConcurrency),
		fatal:    make(chan struct{}),
		pool:     workers.New(0),
	}
	// Idle workers stop now, busy ones (a handler abandoned at the hard
	// deadline) after their task.
	defer s.pool.Close()
	// Two stops: stopCtx ends intake (no new receive, backoff sleeps end);
	// recvCtx aborts a receive in flight, which happens only at the hard
	// deadline, because SQS may still hand messages to a long poll whose
	// client went away, and they would stay invisible for a whole
	// visibility timeout.
	s.stopCtx, s.stopIntake = context.WithCancel(s.base)
	s.recvCtx, s.abortRecv = context.WithCancel(s.base)
	defer s.stopIntake()
	defer s.abortRecv()
	s.hb.init(s)
	go s.hb.run()
	s.addPoller()
	log := r.log.With(slog.String("queue_url", queueURL))
	log.Debug("responder: serving")

	var drainLimit <-chan time.Time // nil for Shutdown: its context rules
	select {
	case <-ctx.Done():
		t := time.NewTimer(r.opts.DrainTimeout)
		defer t.Stop()
		drainLimit = t.C
	case <-s.fatal:
		t := time.NewTimer(r.opts.DrainTimeout)
		defer t.Stop()
		drainLimit = t.C
	case <-r.stopping:
	}
	hard := make(chan struct{})
	stopped := make(chan struct{})
	defer close(stopped)
	go func() {
		select {
		case <-drainLimit:
		case <-r.hardStop:
		case <-stopped:
			return
		}
		close(hard)
	}()

	// Stop intake first: no new work starts while the old drains. A receive
	// in flight runs out its wait; what it returns is released at once.
	s.stopIntake()
	polled := make(chan struct{})
	go func() {
		s.pollers.Wait()
		close(polled)
	}()
	select {
	case <-polled:
	case <-hard:
		s.aborted.Store(true)
		s.abortRecv()
		<-polled
	}
	// The pollers are gone, so no handler starts any more.
	handled := make(chan struct{})
	go func() {
		s.handlers.Wait()
		close(handled)
	}()
	select {
	case <-handled:
	case <-hard:
		s.abandonAll()
		<-handled
	}
	s.hb.close()

	fctx, cancel := context.WithTimeout(s.base, r.finalWait())
	defer cancel()
	if err := errors.Join(r.dels.Flush(fctx), r.vis.Flush(fctx)); err != nil {
		log.Warn("responder: flushing deletes and visibility changes at stop", slog.Any("error", err))
	}
	log.Debug("responder: stopped serving")
	return s.fatalErr
}

// server is one running Serve call.
type server struct {
	r        *Responder
	queueURL string
	h        Handler
	base     context.Context // Serve's context without its cancellation

	pool       *workers.Pool // runs pollers and handlers on reused stacks
	slots      chan struct{} // one token per running handler
	stopCtx    context.Context
	stopIntake context.CancelFunc
	recvCtx    context.Context
	abortRecv  context.CancelFunc
	pollUntil  atomic.Int64 // unix nanos: the latest end of a receive's wait
	aborted    atomic.Bool  // receives were aborted at the stop deadline
	pollers    sync.WaitGroup
	nPollers   atomic.Int32
	handlers   sync.WaitGroup
	hb         heartbeat

	fatalOnce sync.Once
	fatal     chan struct{}
	fatalErr  error
}

// Request states: a running request either finishes (its goroutine decides
// its fate) or is abandoned at a stop deadline (it was released already).
const (
	stateRunning int32 = iota
	stateFinished
	stateAbandoned
)

// inflight is a request being processed.
type inflight struct {
	req    *Request
	handle string
	cancel context.CancelCauseFunc
	state  atomic.Int32
	token  string // Store lease owner, "" without a lease; under hb.mu

	// Owned by the heartbeat, under hb.mu.
	deadline  time.Time // when the request becomes visible again
	extending bool      // an extension call is in flight
	capped    bool      // the last extension reached the 12-hour cap
	limitHit  bool      // the handler was cancelled for the cap
	lost      bool      // SQS no longer knows the receipt handle: stop extending
	removed   bool      // processing ended
	// A release made while an extension was unanswered, sent once the
	// extension has its answer. Sent at once, it could go out in the same
	// batch call as an extension still waiting for a call, or beside it,
	// and SQS could apply it first: the extension would then hide the
	// request for a whole visibility timeout instead of releasing it.
	afterExtension func()
}

func (s *server) setFatal(err error) {
	s.fatalOnce.Do(func() {
		s.fatalErr = err
		close(s.fatal)
	})
}

func (s *server) addPoller() {
	for {
		n := s.nPollers.Load()
		if n >= int32(s.r.opts.MaxPollers) || s.stopCtx.Err() != nil {
			return
		}
		if s.nPollers.CompareAndSwap(n, n+1) {
			s.r.stats.pollers.Add(1)
			s.pollers.Add(1)
			s.pool.Go(s.poll)
			return
		}
	}
}

// retirePoller lets a poller stop unless it is the last one.
func (s *server) retirePoller() bool {
	for {
		n := s.nPollers.Load()
		if n <= 1 {
			return false
		}
		if s.nPollers.CompareAndSwap(n, n-1) {
			s.r.stats.pollers.Add(-1)
			return true
		}
	}
}

// acquire waits for a free handler slot and takes up to 10; it returns 0
// when receiving stops.
func (s *server) acquire() int {
	// Checked first: select picks at random among ready cases, and a free
	// slot must not win over a stop.
	if s.stopCtx.Err() != nil {
		return 0
	}
	select {
	case s.slots <- struct{}{}:
	case <-s.stopCtx.Done():
		return 0
	}
	n := 1
	for n < sqsapi.MaxReceiveMessages {
		select {
		case s.slots <- struct{}{}:
			n++
		default:
			return n
		}
	}
	return n
}

// pollerExit accounts for a poller that stops without retiring.
func (s *server) pollerExit() {
	s.nPollers.Add(-1)
	s.r.stats.pollers.Add(-1)
}

func (s *server) releaseSlots(n int) {
	for range n {
		<-s.slots
	}
}

// poll runs a poller. A poller that receives requests hands its loop to a
// fresh goroutine and handles the last request itself: that request starts
// at once rather than after the next receive is on its way, which on an
// idle responder is most of a lone request's wait.
func (s *server) poll() {
	m, receivedAt, handoff := s.pollLoop()
	s.pollers.Done()
	if handoff {
		s.handle(m, receivedAt)
	}
}

// pollLoop receives until the poller stops (handoff false) or hands its loop
// over, returning a request for the caller to handle (handoff true).
func (s *server) pollLoop() (types.Message, time.Time, bool) {
	r := s.r
	failures := 0
	for {
		n := s.acquire()
		if n == 0 {
			s.pollerExit()
			return types.Message{}, time.Time{}, false
		}
		s.notePoll(time.Now().Add(r.opts.WaitTime))
		out, err := r.client.ReceiveMessage(s.recvCtx, &sqs.ReceiveMessageInput{
			QueueUrl:                    aws.String(s.queueURL),
			MaxNumberOfMessages:         int32(n),
			WaitTimeSeconds:             int32(r.opts.WaitTime / time.Second),
			VisibilityTimeout:           int32(r.opts.VisibilityTimeout / time.Second),
			MessageAttributeNames:       []string{"All"},
			MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
		})
		now := time.Now()
		if err != nil {
			s.releaseSlots(n)
			if s.stopCtx.Err() != nil {
				s.pollerExit()
				return types.Message{}, time.Time{}, false
			}
			var gone *types.QueueDoesNotExist
			if errors.As(err, &gone) {
				r.log.Error("responder: request queue does not exist; Serve stops", slog.String("queue_url", s.queueURL), slog.Any("error", err))
				s.setFatal(fmt.Errorf("responder: receiving from %s: %w", s.queueURL, err))
				s.pollerExit()
				return types.Message{}, time.Time{}, false
			}
			r.stats.receiveErrors.Add(1)
			if s.retirePoller() {
				// Fewer pollers under errors: only the last one retries.
				return types.Message{}, time.Time{}, false
			}
			d := r.recvBO.Delay(failures)
			failures++
			r.log.Warn("responder: receive failed; backing off", slog.String("queue_url", s.queueURL),
				slog.Int("attempt", failures), slog.Duration("delay", d), slog.Any("error", err))
			if backoff.Sleep(s.stopCtx, d) != nil {
				s.pollerExit()
				return types.Message{}, time.Time{}, false
			}
			continue
		}
		failures = 0
		r.stats.receives.Add(1)
		got := len(out.Messages)
		s.releaseSlots(n - got)
		if got == 0 {
			r.stats.emptyReceives.Add(1)
			if s.retirePoller() {
				return types.Message{}, time.Time{}, false
			}
			continue
		}
		r.stats.received.Add(int64(got))
		if s.stopCtx.Err() != nil {
			// Stopping: hand these back untouched rather than start work.
			for _, m := range out.Messages {
				s.release(&inflight{req: newRequest(s.queueURL, m, now), handle: aws.ToString(m.ReceiptHandle)}, 0)
			}
			s.releaseSlots(got)
			s.pollerExit()
			return types.Message{}, time.Time{}, false
		}
		for _, m := range out.Messages[:got-1] {
			s.handlers.Add(1)
			s.pool.Go(func() { s.handle(m, now) })
		}
		if got == n && len(s.slots) < cap(s.slots) {
			// A full receive with slots still free: there is a backlog that
			// one poller's round trips cannot drain fast enough.
			s.addPoller()
		}
		// Counted as a handler before this goroutine stops counting as a
		// poller, so that once the pollers are gone no handler starts.
		s.handlers.Add(1)
		s.pollers.Add(1)
		s.pool.Go(s.poll)
		return out.Messages[got-1], now, true
	}
}

// action is what happens to a request after processing.
type action struct {
	kind  int
	delay time.Duration // for actRelease
}

const (
	actNone    = iota // nothing: abandoned, or left to its visibility timeout
	actDelete         // done: delete it
	actRelease        // make it visible after delay
)

func (s *server) handle(m types.Message, receivedAt time.Time) {
	defer s.handlers.Done()
	r := s.r
	r.stats.inFlight.Add(1)
	ctx, cancel := context.WithCancelCause(s.base)
	f := &inflight{
		req:      newRequest(s.queueURL, m, receivedAt),
		handle:   aws.ToString(m.ReceiptHandle),
		cancel:   cancel,
		deadline: receivedAt.Add(r.opts.VisibilityTimeout),
	}
	if !s.hb.add(f) {
		// The stop deadline passed between its receive and now.
		s.abandon(f, s.zombieWait())
	}
	act := s.process(ctx, f)
	s.hb.remove(f)
	cancel(nil)
	r.stats.inFlight.Add(-1)
	s.releaseSlots(1)

	switch act.kind {
	case actDelete:
		r.dels.Submit(s.queueURL, f.handle, func(_ struct{}, err error) {
			if err != nil {
				r.stats.deleteErrors.Add(1)
				r.log.Warn("responder: deleting request failed; it will be redelivered",
					slog.String("queue_url", s.queueURL), slog.String("request_id", f.req.ID), slog.Any("error", err))
				return
			}
			r.stats.deleted.Add(1)
		})
	case actRelease:
		s.release(f, act.delay)
	}
}

// release makes f's request visible again after delay (capped by the time
// left under the 12-hour limit).
func (s *server) release(f *inflight, delay time.Duration) {
	r := s.r
	if s.aborted.Load() {
		// A receive this process aborted may still be parked on the server.
		delay = max(delay, s.zombieWait())
	}
	left := r.maxVisibility - time.Since(f.req.ReceivedAt)
	secs := int32(min(delay, left).Round(time.Second) / time.Second)
	submit := func() {
		r.vis.Submit(s.queueURL, batch.Visibility{ReceiptHandle: f.handle, Timeout: max(secs, 0)}, func(_ struct{}, err error) {
			if err != nil {
				r.log.Warn("responder: releasing request failed; it reappears after its visibility timeout",
					slog.String("queue_url", s.queueURL), slog.String("request_id", f.req.ID), slog.Any("error", err))
				return
			}
			r.stats.released.Add(1)
		})
	}
	s.hb.mu.Lock()
	if f.extending {
		f.afterExtension = submit
		s.hb.mu.Unlock()
		return
	}
	s.hb.mu.Unlock()
	submit()
}

// callCtx is the context of the store and reply calls a request makes:
// they complete even while Serve stops, within a bound.
func (s *server) callCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(s.base, 30*time.Second)
}

func (s *server) process(ctx context.Context, f *inflight) action {
	r := s.r
	req := f.req
	log := r.log.With(slog.String("queue_url", s.queueURL), slog.String("message_id", aws.ToString(req.Message.MessageId)),
		slog.String("request_id", req.ID), slog.Int("receive_count", req.ReceiveCount))
	cctx, cancel := s.callCtx()
	defer cancel()

	requested := IsResponseMessageRequested(req.Message)
	if requested {
		// A reply that can never be delivered makes a poison request: fail
		// it before running the handler, so it ends in the DLQ.
		u, _ := stringAttribute(req.Message, sqsapi.ResponseQueueURLAttribute)
		if _, _, err := responseTarget(u); err != nil {
			r.stats.failed.Add(1)
			log.Error("responder: request has a malformed ResponseQueueUrl; not handled", slog.Any("error", err))
			return s.failureAction(req)
		}
	}

	var lease string // our Store lease token, if any
	if st := r.opts.Store; st != nil {
		token := uuid.NewString()
		e, err := st.Begin(cctx, req.ID, token, r.opts.VisibilityTimeout)
		if err != nil {
			r.stats.storeErrors.Add(1)
			log.Error("responder: idempotency store failed; request left for redelivery", slog.Any("error", err))
			return s.failureAction(req)
		}
		switch e.Status {
		case Done:
			r.stats.deduplicated.Add(1)
			log.Debug("responder: request answered before; replaying the stored reply")
			if requested && e.Reply != nil {
				if err := r.SendResponseMessage(cctx, req.Message, e.Reply); err != nil && !errors.Is(err, ErrResponseQueueGone) {
					log.Warn("responder: resending stored reply failed", slog.Any("error", err))
					return s.failureAction(req)
				}
			}
			return action{kind: actDelete}
		case InProgress:
			r.stats.deferred.Add(1)
			log.Debug("responder: request in progress elsewhere; put back", slog.Duration("delay", r.opts.InProgressDelay))
			return action{kind: actRelease, delay: r.opts.InProgressDelay}
		}
		s.hb.setToken(f, token)
		lease = token
	}
	releaseLease := func() {
		if lease != "" {
			if err := r.opts.Store.Release(cctx, req.ID, lease); err != nil {
				r.stats.storeErrors.Add(1)
				log.Warn("responder: releasing idempotency lease failed", slog.Any("error", err))
			}
		}
	}

	if f.state.Load() == stateAbandoned {
		// Stopped while the store was consulted: do not start the handler.
		releaseLease()
		return action{kind: actNone}
	}
	reply, d, err := s.run(ctx, req)
	if !f.state.CompareAndSwap(stateRunning, stateFinished) {
		// Abandoned at a stop deadline: the request was released already and
		// may be running elsewhere; this result is not used.
		releaseLease()
		return action{kind: actNone}
	}
	r.stats.observe(d)
	if r.opts.OnRequestDone != nil {
		r.opts.OnRequestDone(req, d, err)
	}
	if err != nil {
		r.stats.failed.Add(1)
		var pe *PanicError
		if errors.As(err, &pe) {
			r.stats.panics.Add(1)
			log.Error("responder: handler panicked", slog.Any("panic", pe.Value), slog.String("stack", string(pe.Stack)))
		} else {
			log.Warn("responder: handler failed", slog.Any("error", err), slog.Duration("duration", d))
		}
		releaseLease()
		return s.failureAction(req)
	}

	var (
		target string
		entry  types.SendMessageBatchRequestEntry
	)
	if requested && reply != nil {
		if target, entry, err = buildReply(req.Message, reply); err != nil {
			// The handler's reply breaks SQS limits: a handler bug, which a
			// retry repeats; the request goes the failure way, to the DLQ.
			r.stats.failed.Add(1)
			log.Error("responder: handler returned an invalid reply", slog.Any("error", err))
			releaseLease()
			return s.failureAction(req)
		}
	}
	r.stats.handled.Add(1)
	if lease != "" {
		if err := r.opts.Store.Complete(cctx, req.ID, lease, reply, r.opts.StoreTTL); err != nil {
			r.stats.storeErrors.Add(1)
			log.Warn("responder: storing the reply failed", slog.Any("error", err))
		}
	}
	if target != "" {
		if err := r.send(cctx, req.Message, target, entry); err != nil && !errors.Is(err, ErrResponseQueueGone) {
			log.Warn("responder: sending reply failed; request left for redelivery", slog.Any("error", err))
			return s.failureAction(req)
		}
	} else if requested {
		log.Debug("responder: handler returned no reply")
	}
	return action{kind: actDelete}
}

// run calls the handler, turning a panic into a *PanicError.
func (s *server) run(ctx context.Context, req *Request) (reply *Reply, d time.Duration, err error) {
	if t := s.r.opts.HandlerTimeout; t > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, t)
		defer cancel()
	}
	start := time.Now()
	defer func() {
		d = time.Since(start)
		if p := recover(); p != nil {
			reply, err = nil, &PanicError{Value: p, Stack: debug.Stack()}
		}
	}()
	reply, err = s.h.HandleRequest(ctx, req)
	return reply, 0, err
}

func (s *server) failureAction(req *Request) action {
	o := &s.r.opts
	switch o.Retry {
	case RetryImmediately:
		return action{kind: actRelease}
	case RetryWithBackoff:
		p := backoff.Policy{Base: o.RetryBackoffBase, Cap: o.RetryBackoffCap}
		return action{kind: actRelease, delay: p.Delay(req.ReceiveCount - 1)}
	}
	return action{kind: actNone}
}

// notePoll records that a receive may stay parked on the server until
// until, even if this process aborts it.
func (s *server) notePoll(until time.Time) {
	u := until.UnixNano()
	for {
		old := s.pollUntil.Load()
		if old >= u || s.pollUntil.CompareAndSwap(old, u) {
			return
		}
	}
}

// zombieWait is how long a receive this process aborted may still be parked
// on the server, rounded up to whole seconds, plus a second for the network.
// SQS (and fauxqs) can hand a message to such a poll, hiding it for a whole
// visibility timeout; a request released sooner could fall into it.
func (s *server) zombieWait() time.Duration {
	left := time.Until(time.Unix(0, s.pollUntil.Load()))
	if left <= 0 {
		return 0
	}
	return left.Truncate(time.Second) + 2*time.Second
}

// abandonAll cancels the running handlers and releases their requests for
// another consumer to pick up: as soon as no receive this process aborted
// can still take them.
func (s *server) abandonAll() {
	delay := s.zombieWait()
	for _, f := range s.hb.abandonLive() {
		s.abandon(f, delay)
	}
}

// abandon cancels f's handler and releases its request after delay.
func (s *server) abandon(f *inflight, delay time.Duration) {
	if f.state.CompareAndSwap(stateRunning, stateAbandoned) {
		f.cancel(ErrClosed)
		s.r.log.Warn("responder: stop deadline reached; cancelling handler and releasing its request",
			slog.String("queue_url", s.queueURL), slog.String("request_id", f.req.ID))
		s.release(f, delay)
	}
}
