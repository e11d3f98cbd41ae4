package responder

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/internal/awserr"
	"github.com/tempqueues/tempqueues/internal/batch"
	"github.com/tempqueues/tempqueues/internal/poll"
	"github.com/tempqueues/tempqueues/internal/wire"
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
// Cancelling ctx stops this Serve gracefully, by Shutdown's rules, with
// Options.DrainTimeout as the grace period: no new receive, running
// handlers may finish, and at the end of the grace period the rest are
// cancelled and their requests released. A long poll in flight is
// cancelled after half a second, so an idle Serve stops within about half a
// second. Pending deletes and visibility changes are flushed before Serve
// returns.
//
// Serve returns nil after a stop, ErrClosed if the responder was already
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
	s.steps = chain(stages, s.answer)
	s.sizer.NoSpare = r.opts.PreferFewerCalls
	// Idle workers stop now, busy ones (a handler abandoned at the hard
	// deadline) after their task.
	defer s.pool.Close()
	s.loop = poll.New(s.base, poll.Config{
		Client: r.client,
		Input: sqs.ReceiveMessageInput{
			QueueUrl:                    aws.String(queueURL),
			WaitTimeSeconds:             int32(r.opts.PollWaitTime / time.Second),
			VisibilityTimeout:           int32(r.opts.VisibilityTimeout / time.Second),
			MessageAttributeNames:       []string{"All"},
			MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
		},
		Backoff: r.recvBO,
		Clock:   r.clk,
	})
	defer s.loop.Abort()
	s.hb.init(s)
	go s.hb.run()
	s.addPoller()
	log := r.log.With(slog.String("queue_url", queueURL))
	log.Debug("responder: serving")

	var graceEnd <-chan time.Time // nil under Shutdown: its context rules
	select {
	case <-ctx.Done():
		t := time.NewTimer(r.opts.DrainTimeout)
		defer t.Stop()
		graceEnd = t.C
	case <-s.fatal:
		t := time.NewTimer(r.opts.DrainTimeout)
		defer t.Stop()
		graceEnd = t.C
	case <-r.stopping:
	}
	hard := make(chan struct{})
	stopped := make(chan struct{})
	defer close(stopped)
	go func() {
		select {
		case <-graceEnd:
		case <-r.hardStop:
		case <-stopped:
			return
		}
		close(hard)
	}()

	// Stop intake first: no new work starts while the old drains. A long
	// poll in flight may return for a while (on a busy queue at once) and
	// what it returns is released; then it is cancelled.
	s.loop.Stop()
	polled := make(chan struct{})
	go func() {
		s.pollers.Wait()
		close(polled)
	}()
	pg := time.NewTimer(poll.StopGrace)
	select {
	case <-polled:
	case <-pg.C:
		s.loop.Abort()
		<-polled
	case <-hard:
		s.loop.Abort()
		<-polled
	}
	pg.Stop()
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

	fctx, cancel := context.WithTimeout(s.base, finalTimeout)
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
	steps    step            // the stages, around the handler (stages.go)

	pool     *workers.Pool // runs pollers and handlers on reused stacks
	slots    chan struct{} // one token per running handler
	loop     *poll.Loop
	pollers  sync.WaitGroup
	nPollers atomic.Int32
	sizer    poll.Sizer // pollers by the pace of the receives that bring requests
	handlers sync.WaitGroup
	hb       heartbeat

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
		if n >= int32(s.r.opts.MaxPollers) || s.loop.Stopped() {
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

// poll runs a poller.
func (s *server) poll() {
	defer s.pollers.Done()
	s.loop.Run(poller{s})
}

// poller is the poll.Consumer of a Serve's pollers: a receive asks for as
// many requests as there are free handler slots (at most 10).
type poller struct{ s *server }

// Want waits for a free handler slot and takes up to 10; it returns 0 when
// receiving stops.
func (p poller) Want() int {
	s := p.s
	// Checked first: select picks at random among ready cases, and a free
	// slot must not win over a stop.
	if s.loop.Stopped() {
		s.pollerExit()
		return 0
	}
	select {
	case s.slots <- struct{}{}:
	case <-s.loop.Stopping():
		s.pollerExit()
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

// Handle starts a handler per received request, hands back what a stopped
// receive returned, and decides whether the poller goes on.
func (p poller) Handle(res poll.Result) bool {
	s, r := p.s, p.s.r
	got := len(res.Messages)
	s.releaseSlots(res.Asked - got)
	if res.Stopped {
		// Stopping: hand these back untouched rather than start work.
		for _, m := range res.Messages {
			s.release(&inflight{req: newRequest(s.queueURL, m, res.At), handle: aws.ToString(m.ReceiptHandle)}, 0)
		}
		s.releaseSlots(got)
		s.pollerExit()
		return false
	}
	if res.Err != nil {
		if awserr.IsQueueDoesNotExist(res.Err) {
			r.log.Error("responder: request queue does not exist; Serve stops", slog.String("queue_url", s.queueURL), slog.Any("error", res.Err))
			s.setFatal(fmt.Errorf("responder: receiving from %s: %w", s.queueURL, res.Err))
			s.pollerExit()
			return false
		}
		r.stats.receiveErrors.Add(1)
		if s.retirePoller() {
			// Fewer pollers under errors: only the last one retries.
			return false
		}
		r.log.Warn("responder: receive failed; backing off", slog.String("queue_url", s.queueURL),
			slog.Bool("transient", res.Transient), slog.Duration("delay", res.Delay), slog.Any("error", res.Err))
		return true
	}
	r.stats.receives.Add(1)
	if got == 0 {
		r.stats.emptyReceives.Add(1)
		return !s.retirePoller()
	}
	r.stats.received.Add(int64(got))
	if got > 1 {
		s.expectReplies(res.Messages)
	}
	for _, m := range res.Messages {
		s.handlers.Add(1)
		s.pool.Go(func() { s.handle(m, res.At) })
	}
	s.sizer.Note(res.At, got)
	switch want := s.sizer.Want(res.At, r.callLatency()); {
	case got == res.Asked && len(s.slots) < cap(s.slots), int(s.nPollers.Load()) < want:
		// A full receive with slots still free: there is a backlog that
		// one poller's round trips cannot drain fast enough. Or requests
		// come faster than a round trip, and one more poller keeps one
		// parked for the next, which then waits for no round trip.
		s.addPoller()
	case int(s.nPollers.Load()) > want+1 && s.retirePoller():
		// Requests slowed down: fewer pollers keep one parked.
		return false
	}
	// The handlers just started are runnable: let them go first rather than
	// after this poller has built and signed its next receive. On an idle
	// responder this is most of a lone request's wait.
	runtime.Gosched()
	return true
}

// expectReplies tells the reply sends how many of msgs, received together,
// answer to each queue: their handlers run together, and their replies
// then share one call instead of racing each other out (internal/batch's
// Expect), which the receive at the requester's end also takes in one.
func (s *server) expectReplies(msgs []types.Message) {
	var one [sqsapi.MaxReceiveMessages]batch.Count
	targets := one[:0]
	for _, m := range msgs {
		if u, ok := stringAttribute(m, sqsapi.ResponseQueueURLAttribute); ok {
			if target, _, err := responseTarget(u); err == nil && s.r.replyTo.allows(s.queueURL, target) {
				targets = batch.AddCount(targets, target)
			}
		}
	}
	s.r.sends.ExpectAll(targets)
}

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
		s.abandon(f)
	}
	act := s.process(ctx, f)
	s.hb.remove(f)
	cancel(nil)
	r.stats.inFlight.Add(-1)
	s.releaseSlots(1)

	switch act.kind {
	case actDelete:
		// Nobody waits for the delete: it may wait for company for a tenth
		// of the visibility the request has left (batch.DeleteWithin), so
		// that even one request at a time shares delete calls.
		s.hb.mu.Lock()
		left := r.clk.Until(f.deadline)
		s.hb.mu.Unlock()
		within := batch.DeleteWithin(left)
		if wire.IsFIFOURL(s.queueURL) {
			// A FIFO queue keeps the request's group locked until the
			// delete: the group's next request must not wait for company.
			within = batch.DeleteLinger
		}
		r.dels.SubmitWithin(s.queueURL, f.handle, within, func(_ struct{}, err error) {
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
	// A receive this Serve cancelled may still be parked on the server.
	delay = max(delay, s.loop.ReleaseDelay())
	left := r.maxVisibility - r.clk.Since(f.req.ReceivedAt)
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

// abandonAll cancels the running handlers and releases their requests for
// another consumer to pick up: as soon as no receive this process aborted
// can still take them.
func (s *server) abandonAll() {
	for _, f := range s.hb.abandonLive() {
		s.abandon(f)
	}
}

// abandon cancels f's handler and releases its request.
func (s *server) abandon(f *inflight) {
	if f.state.CompareAndSwap(stateRunning, stateAbandoned) {
		s.r.abandoned.Add(1)
		f.cancel(ErrClosed)
		s.r.log.Warn("responder: stop deadline reached; cancelling handler and releasing its request",
			slog.String("queue_url", s.queueURL), slog.String("request_id", f.req.ID))
		s.release(f, 0)
	}
}
