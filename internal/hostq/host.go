package hostq

import (
	"context"
	"errors"
	"log/slog"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/internal/awserr"
	"github.com/tempqueues/tempqueues/internal/batch"
	"github.com/tempqueues/tempqueues/internal/callback"
	"github.com/tempqueues/tempqueues/internal/callbound"
	"github.com/tempqueues/tempqueues/internal/lifecycle"
	"github.com/tempqueues/tempqueues/internal/poll"
	"github.com/tempqueues/tempqueues/internal/wire"
	"github.com/tempqueues/tempqueues/observe"
	"github.com/tempqueues/tempqueues/sqsapi"
)

// Host is one host queue in this process. One mutex guards the host, its
// routes and its ledger: routing a received batch, taking held messages and
// registering receivers are short critical sections, and one lock keeps
// them consistent without lock ordering.
type Host struct {
	client sqsapi.Client
	url    string
	opts   *Options
	log    *slog.Logger

	visibility     time.Duration // the host queue's VisibilityTimeout
	recvVisibility time.Duration // what receives give messages
	waitTime       int32         // the host queue's ReceiveMessageWaitTimeSeconds
	// fifo: the host is a FIFO queue, each of its virtual queues one
	// message group (fifo.go); contentDedup: its ContentBasedDeduplication.
	fifo, contentDedup bool

	deletes *batch.Deletes
	vis     *batch.Visibilities

	loop   *poll.Loop      // the receives of the host's pollers
	ctx    context.Context // ends on Close or when the host is gone
	cancel context.CancelFunc
	wg     sync.WaitGroup // the pollers and the maintenance goroutine

	mu      sync.Mutex
	queues  map[string]*Queue
	calls   map[string]call    // expectations by name
	streams map[string]*stream // multi-message expectations by name (ExpectMany)
	demand  int                // waiting receivers and expectations
	kick    bool               // a short poll asked for one receive
	pollers int
	boost   int // pollers past MaxPollers for streams (noteReceiveLocked)
	// lingerAt: with Options.Linger, when a receive last brought messages
	// that no later receive has waited past (lingerCovered); zero when
	// none. The last poller then makes one more receive before it ends.
	lingerAt time.Time
	sizer    poll.Sizer
	held     ledger
	expiry   expiryHeap
	wake     chan struct{}
	// maintainAt is when the maintenance goroutine wakes by itself: only an
	// earlier deadline needs a signal.
	maintainAt time.Time
	closed     bool // by Close or gone: no new work
	gone       bool
	isClosed   atomic.Bool // closed, for lock-free checks

	closer lifecycle.Once
}

// Open returns the Host for the queue at url, reading its
// VisibilityTimeout and ReceiveMessageWaitTimeSeconds (and, for a FIFO
// queue, ContentBasedDeduplication) in one call, and starts its
// maintenance goroutine. opts must have its defaults set and outlive the
// host; hosts may share it.
func Open(ctx context.Context, client sqsapi.Client, url string, opts *Options) (*Host, error) {
	names := []types.QueueAttributeName{
		types.QueueAttributeNameVisibilityTimeout, types.QueueAttributeNameReceiveMessageWaitTimeSeconds,
	}
	fifo := wire.IsFIFOURL(url)
	if fifo {
		names = append(names, types.QueueAttributeNameContentBasedDeduplication)
	}
	ctx, cancel := callbound.Context(ctx, 0)
	defer cancel()
	out, err := client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl:       aws.String(url),
		AttributeNames: names,
	})
	if err != nil {
		return nil, err
	}
	vt, _ := strconv.Atoi(out.Attributes[string(types.QueueAttributeNameVisibilityTimeout)])
	if vt <= 0 {
		vt = 30
	}
	wt, _ := strconv.Atoi(out.Attributes[string(types.QueueAttributeNameReceiveMessageWaitTimeSeconds)])
	h := &Host{
		client:     client,
		url:        url,
		opts:       opts,
		log:        opts.Logger,
		visibility: time.Duration(vt) * time.Second,
		waitTime:   int32(wt),
		deletes:    batch.NewDeletes(client, maxDeleteCalls(opts), batch.DeleteLinger),
		vis:        batch.NewVisibilities(client, opts.MaxBatchCalls),
		queues:     make(map[string]*Queue),
		calls:      make(map[string]call),
		wake:       make(chan struct{}, 1),
	}
	h.fifo = fifo
	h.contentDedup = fifo && strings.EqualFold(out.Attributes[string(types.QueueAttributeNameContentBasedDeduplication)], "true")
	h.recvVisibility = h.visibility
	if v := opts.ReceiveVisibilityTimeout; v > 0 {
		h.recvVisibility = v
	}
	h.ctx, h.cancel = context.WithCancel(context.Background())
	in := sqs.ReceiveMessageInput{
		QueueUrl:              aws.String(url),
		WaitTimeSeconds:       int32(opts.PollWaitTime / time.Second),
		VisibilityTimeout:     int32(opts.ReceiveVisibilityTimeout / time.Second),
		MessageAttributeNames: []string{"All"},
	}
	switch {
	case !opts.NoSystemAttributes:
		in.MessageSystemAttributeNames = []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll}
	case opts.TraceHeader:
		in.MessageSystemAttributeNames = []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAWSTraceHeader}
	}
	h.loop = poll.New(h.ctx, poll.Config{Client: client, Input: in, Clock: opts.Clock})
	h.sizer.NoSpare = opts.FewerPollers
	h.wg.Add(1)
	go h.maintain()
	return h, nil
}

// URL returns the host queue's URL.
func (h *Host) URL() string { return h.url }

// FIFO reports whether the host queue is a FIFO queue.
func (h *Host) FIFO() bool { return h.fifo }

// ContentBasedDeduplication reports whether the host queue is a FIFO queue
// with content-based deduplication on.
func (h *Host) ContentBasedDeduplication() bool { return h.contentDedup }

// Visibility returns the host queue's VisibilityTimeout.
func (h *Host) Visibility() time.Duration { return h.visibility }

// WaitTime returns the host queue's ReceiveMessageWaitTimeSeconds.
func (h *Host) WaitTime() int32 { return h.waitTime }

// Closed reports whether the host was closed or found gone.
func (h *Host) Closed() bool { return h.isClosed.Load() }

// closedErrLocked is ErrClosed once the host is closed, an error matching
// *types.QueueDoesNotExist once it is gone, and nil otherwise.
func (h *Host) closedErrLocked() error {
	switch {
	case h.gone:
		return awserr.NewQueueDoesNotExist("host queue " + h.url + " was deleted")
	case h.closed:
		return sqsapi.ErrClosed
	}
	return nil
}

// releaseMargin is how long before its visibility deadline an untaken held
// message is released.
func (h *Host) releaseMargin() time.Duration {
	if m := h.opts.ReleaseMargin; m > 0 {
		return min(m, h.recvVisibility/2)
	}
	return min(h.recvVisibility/4, 5*time.Second)
}

// wantPollersLocked is the number of concurrent receives the demand
// justifies: one per 10 waiting receivers, at least one while anyone waits,
// or, when more, those the pace of the messages asks for (poll.Sizer, with
// the latency the host's delete calls measure), but no more than one past
// the receivers waiting.
func (h *Host) wantPollersLocked() int {
	if h.demand == 0 {
		if h.kick {
			return 1
		}
		return 0
	}
	limit := demandPollers(h.opts)
	if len(h.streams) > 0 {
		limit += h.boost
	}
	want := min((h.demand+wire.MaxReceiveMessages-1)/wire.MaxReceiveMessages, limit)
	var lat time.Duration
	if h.deletes != nil {
		lat = h.deletes.Latency()
	}
	// One more than the waiters: a spare parked for the next reply costs a
	// call only when it comes, or an empty long poll.
	paced := min(h.sizer.Want(h.opts.Clock.Now(), lat), h.demand+1, h.opts.MaxPollers)
	return max(want, paced)
}

// demandPollers is how many pollers the demand alone starts, at most: one
// per 10 waiting receivers, up to 4 (or MaxPollers when lower). Past it
// pollers follow the pace of the replies (wantPollersLocked), and streams
// add their boost.
func demandPollers(opts *Options) int { return min(4, opts.MaxPollers) }

// streamPollerFactor bounds the pollers of a host with streams pending:
// MaxPollers times this. Twice MaxPollers doubles what a host can take
// when each call takes an SQS-like 10 ms; more would take more still, but
// each poller is one more connection held and one more goroutine to
// schedule, which a busy process pays for in CPU and in the order its
// replies arrive in.
const streamPollerFactor = 2

// maxDeleteCalls is the number of delete calls a host runs at once. A full
// receive makes a full delete batch, which goes out at once while fewer
// calls run: one call per poller a stream may start keeps deletes from
// falling behind receives, and costs no call per message.
func maxDeleteCalls(opts *Options) int {
	return max(opts.MaxBatchCalls, streamPollerFactor*demandPollers(opts))
}

// boostRoundTrip is how long a full receive must have taken for the host
// to add a poller: a receive that waits on the network (a call to SQS
// takes 10 ms or more) leaves the host idle meanwhile, which another
// poller fills; one answered faster (a local server) leaves the host
// busy with what it received, and another poller would only contend for
// the CPU and spread a stream's replies over more receives to reorder.
const boostRoundTrip = 5 * time.Millisecond

// noteReceiveLocked adapts the stream boost to what a receive brought,
// after took: a full, slow one means replies wait in the host queue while
// the pollers wait on the network, so one more poller is worth its calls
// (each still brings 10 replies); a partial one means the pollers keep
// up, so one fewer would do. Plain calls never boost: their replies come
// one per call, and MaxPollers already serves 10 per poller.
func (h *Host) noteReceiveLocked(asked, got int, took time.Duration) {
	switch {
	case len(h.streams) == 0:
		h.boost = 0
	case got >= asked && asked == wire.MaxReceiveMessages:
		if took < boostRoundTrip {
			return
		}
		if h.boost < (streamPollerFactor-1)*demandPollers(h.opts) {
			h.boost++
			h.startPollersLocked()
		}
	case h.boost > 0:
		h.boost--
	}
}

// startPollersLocked starts pollers up to the wanted number.
func (h *Host) startPollersLocked() {
	if h.closed {
		return
	}
	for h.pollers < h.wantPollersLocked() {
		h.pollers++
		h.wg.Add(1) // under h.mu with closed false: before Close's Wait
		go func() {
			defer h.wg.Done()
			h.loop.Run(&poller{h: h})
		}()
	}
}

// poller is one of a host's pollers: it receives while there is demand and
// routes what it gets. Several may run at once under load; each ends when
// demand no longer justifies it, so an idle host costs no calls. With
// Options.Linger, after a receive that brought messages (any poller's),
// the last poller makes one more receive unless another receive has
// waited past that moment, so that a reply that follows (a duplicate, or
// one after its caller gave up) is taken and counted at once, even where
// a server answers every parked poll when one message arrives and all
// the pollers stop together.
type poller struct {
	h     *Host
	start time.Time // when Want last asked for a receive
}

// lingerCovered is how long past the latest messages an empty receive must
// return for a linger to be needless: it was parked then and took nothing.
// A receive the server ended together with the one that brought messages
// (fauxqs answers every parked poll when one message arrives) returns
// well within it.
const lingerCovered = time.Second

// Want asks for a full receive while the demand justifies this poller, or
// for the one receive a linger owes.
func (p *poller) Want() int {
	h := p.h
	h.mu.Lock()
	defer h.mu.Unlock()
	want := h.wantPollersLocked()
	if want == 0 && h.pollers == 1 && !h.lingerAt.IsZero() && !h.closed {
		h.lingerAt = time.Time{} // this receive is the linger
	} else if h.closed || h.pollers > want {
		h.pollers--
		return 0
	}
	h.kick = false
	p.start = h.opts.Clock.Now()
	return wire.MaxReceiveMessages
}

// Handle routes what a receive brought, or deals with its failure: a
// missing host queue ends the host; any other error that retrying will not
// fix is reported to every waiting receiver and expectation; transient
// errors (throttling, 5xx, network) are retried after the loop's jittered
// backoff while they keep waiting.
func (p *poller) Handle(res poll.Result) bool {
	h := p.h
	if res.Stopped {
		h.route(res.Messages) // a closed host releases them
		return false
	}
	if res.Err != nil {
		h.log.LogAttrs(context.Background(), slog.LevelWarn, "hostq: host queue receive failed",
			slog.String("queue_url", h.url), slog.Any("error", res.Err))
		if awserr.IsQueueDoesNotExist(res.Err) {
			h.Gone()
			return true // Want ends the poller
		}
		if !res.Transient {
			h.mu.Lock()
			f := h.takeAllLocked()
			h.mu.Unlock()
			f.fail(res.Err)
		}
		return true
	}
	h.log.LogAttrs(context.Background(), slog.LevelDebug, "hostq: host queue receive",
		slog.String("queue_url", h.url), slog.Int("messages", len(res.Messages)))
	if len(res.Messages) > 0 {
		h.sizer.Note(res.At, len(res.Messages))
	}
	h.mu.Lock()
	switch {
	case !h.opts.Linger:
	case len(res.Messages) > 0:
		h.lingerAt = res.At
	case !h.lingerAt.IsZero() && res.At.Sub(h.lingerAt) >= lingerCovered:
		h.lingerAt = time.Time{} // this empty receive waited past them
	}
	h.noteReceiveLocked(res.Asked, len(res.Messages), res.At.Sub(p.start))
	h.startPollersLocked()
	h.mu.Unlock()
	if h.route(res.Messages) {
		// Receivers were just handed messages and are runnable: let them
		// go first rather than after this poller has built and signed its
		// next receive.
		runtime.Gosched()
	}
	return true
}

// failed holds the receivers and expectations a host lets go, to be told
// outside its lock.
type failed struct {
	waiters []*waiter
	calls   []func(types.Message, error)
}

func (f failed) fail(err error) {
	for _, w := range f.waiters {
		w.fn(nil, err)
	}
	for _, fn := range f.calls {
		fn(types.Message{}, err)
	}
}

// takeAllLocked removes every waiting receiver and expectation.
func (h *Host) takeAllLocked() failed {
	var f failed
	for _, q := range h.queues {
		if q.st == nil {
			continue
		}
		f.waiters = append(f.waiters, q.st.waiters...)
		q.st.waiters = nil
		q.receivers = 0
		q.compactLocked()
	}
	for name, c := range h.calls {
		f.calls = append(f.calls, c.fn)
		delete(h.calls, name)
	}
	for name, st := range h.streams {
		st.ended = true
		f.calls = append(f.calls, func(m types.Message, err error) { st.fn(m, err) })
		delete(h.streams, name)
	}
	h.demand = 0
	return f
}

type delivery struct {
	w    *waiter
	msgs []types.Message
}

type answer struct {
	fn func(types.Message, error)
	st *stream // instead of fn: a multi-message expectation's
	m  types.Message
}

// route hands received messages to expectations and waiting receivers,
// holds the rest in their queues' buffers, and settles orphans. It reports
// whether it woke anyone.
func (h *Host) route(msgs []types.Message) bool {
	if len(msgs) == 0 {
		return false
	}
	var (
		answers   []answer
		deliver   []delivery
		touched   []*Queue
		orphans   []types.Message
		overflow  []types.Message
		toRelease []types.Message
		tags      []batch.Count
	)
	h.mu.Lock()
	now := h.opts.Clock.Now()
	deadline := now.Add(h.recvVisibility).UnixNano()
	for _, m := range msgs {
		if h.closed {
			toRelease = append(toRelease, m)
			continue
		}
		name := routingName(m)
		if c, ok := h.calls[name]; ok {
			delete(h.calls, name)
			if answers == nil {
				answers = make([]answer, 0, len(msgs)) // mostly replies: one allocation
			}
			if c.more != nil {
				// A reply that may come in parts: the call becomes a
				// multi-message expectation, its demand kept, before the
				// rest of this receive is routed.
				st := &stream{fn: c.more, demand: 1}
				if h.streams == nil {
					h.streams = make(map[string]*stream)
				}
				h.streams[name] = st
				answers = append(answers, answer{st: st, m: m})
			} else {
				h.demand--
				answers = append(answers, answer{fn: c.fn, m: m})
			}
			if c.tag != "" && h.opts.Answering != nil {
				tags = batch.AddCount(tags, c.tag)
			}
			continue
		}
		if st := h.streams[name]; st != nil {
			answers = append(answers, answer{st: st, m: m})
			continue
		}
		q := h.queues[name]
		if q == nil {
			orphans = append(orphans, m)
			continue
		}
		st := q.state()
		q.fifoArrivedLocked(st)
		if st.buf.n >= h.opts.BufferSize {
			overflow = append(overflow, m)
			continue
		}
		e := &entry{m: m, q: q, deadline: deadline}
		st.buf.push(e)
		h.held.push(e)
		q.touch(now)
		if st.buf.n == 1 {
			touched = append(touched, q)
		}
	}
	for _, q := range touched {
		deliver = q.serveWaitersLocked(deliver, now)
	}
	if e := h.held.head; e != nil {
		h.wakeByLocked(time.Unix(0, e.deadline).Add(-h.releaseMargin()))
	}
	h.mu.Unlock()

	c := h.opts.Counters
	c.Routed.Add(int64(len(msgs) - len(orphans) - len(overflow) - len(toRelease)))
	if len(tags) > 0 {
		h.opts.Answering(tags)
	}
	for _, a := range answers {
		if a.st != nil {
			h.handOn(a.st, a.m)
			continue
		}
		a.fn(a.m, nil)
		// The call has its reply: delete it off the call's path, waiting
		// for company as long as its visibility allows.
		h.deleteAsync(a.m, h.answeredLinger(), "answered")
	}
	for _, d := range deliver {
		d.w.fn(d.msgs, nil)
	}
	for _, m := range toRelease {
		h.release(m, h.loop.ReleaseDelay(), "closed")
	}
	for _, m := range overflow {
		c.Overflowed.Add(1)
		h.release(m, h.opts.OrphanReleaseDelay, "overflow")
	}
	for _, m := range orphans {
		h.orphan(m)
	}
	return len(deliver) > 0 || len(answers) > 0
}

// tell tells Options.Observer of e, an event on this host queue.
func (h *Host) tell(e observe.Event) {
	if h.opts.Observer != nil {
		e.Queue = h.url
		callback.Observe(context.Background(), h.log, h.opts.Observer, e)
	}
}

// routingName returns a host message's routing attribute, or "".
func routingName(m types.Message) string {
	if v, ok := m.MessageAttributes[sqsapi.VirtualQueueNameAttribute]; ok && v.StringValue != nil {
		return *v.StringValue
	}
	return ""
}

// release makes a host message visible again after delay, in a batch call,
// and tells the observer why.
func (h *Host) release(m types.Message, delay time.Duration, why string) {
	h.opts.Counters.Released.Add(1)
	h.tell(observe.Event{Kind: observe.Released, Message: &m, Reason: why, Duration: delay})
	h.vis.Submit(h.url, batch.Visibility{ReceiptHandle: aws.ToString(m.ReceiptHandle), Timeout: int32(delay / time.Second)}, func(_ struct{}, err error) {
		if err != nil {
			h.log.LogAttrs(context.Background(), slog.LevelWarn, "hostq: releasing a message failed; it reappears after its visibility timeout",
				slog.String("queue_url", h.url), slog.String("message_id", aws.ToString(m.MessageId)), slog.Any("error", err))
		}
	})
}

// deleteAsync deletes a host message in a batch call that may wait up to
// within for company.
func (h *Host) deleteAsync(m types.Message, within time.Duration, why string) {
	h.deletes.SubmitWithin(h.url, aws.ToString(m.ReceiptHandle), within, func(_ struct{}, err error) {
		if err != nil {
			h.log.LogAttrs(context.Background(), slog.LevelWarn, "hostq: deleting a message failed",
				slog.String("queue_url", h.url), slog.String("message_id", aws.ToString(m.MessageId)), slog.String("reason", why), slog.Any("error", err))
		}
	})
}

// orphan settles a message no route takes.
func (h *Host) orphan(m types.Message) {
	h.opts.Counters.Orphaned.Add(1)
	name := routingName(m)
	verdict := Delete
	if h.opts.Orphan != nil {
		verdict = h.opts.Orphan(h.ctx, h.url, name, m)
	}
	h.log.LogAttrs(context.Background(), slog.LevelInfo, "hostq: message for no waiting call or virtual queue (a late or duplicate reply, or a deleted queue's)",
		slog.String("queue_url", h.url), slog.String("virtual_queue", name),
		slog.String("message_id", aws.ToString(m.MessageId)), slog.String("action", verdict.String()))
	switch verdict {
	case Delete:
		h.tell(observe.Event{Kind: observe.Dropped, Message: &m, Reason: "orphan"})
		h.deleteAsync(m, batch.DeleteLinger, "orphan")
	case Release:
		h.release(m, h.opts.OrphanReleaseDelay, "orphan")
	}
}

// DeleteMessage deletes a message received from this host, sharing a
// batch call with concurrent deletes; a lone delete goes out at once.
func (h *Host) DeleteMessage(ctx context.Context, handle string) error {
	_, err := h.deletes.Do(ctx, h.url, handle)
	return err
}

// ChangeVisibility changes a received message's visibility, sharing a
// batch call with concurrent changes.
func (h *Host) ChangeVisibility(ctx context.Context, handle string, timeout int32) error {
	_, err := h.vis.Do(ctx, h.url, batch.Visibility{ReceiptHandle: handle, Timeout: timeout})
	return err
}

// ChangeVisibilities changes the visibility of received messages together
// (10 a call) and returns each one's error, in order.
func (h *Host) ChangeVisibilities(ctx context.Context, handles []string, timeout int32) []error {
	vs := make([]batch.Visibility, len(handles))
	for i, hd := range handles {
		vs[i] = batch.Visibility{ReceiptHandle: hd, Timeout: timeout}
	}
	errs := make([]error, len(handles))
	for i, r := range h.vis.DoAll(ctx, h.url, vs) {
		errs[i] = r.Err
	}
	return errs
}

// wakeByLocked makes sure the maintenance goroutine runs by t.
func (h *Host) wakeByLocked(t time.Time) {
	if h.maintainAt.IsZero() || t.Before(h.maintainAt) {
		select {
		case h.wake <- struct{}{}:
		default:
		}
	}
}

// maintain releases held messages before their receive visibility ends and
// deletes queues idle past their retention. One goroutine per host sleeps
// until the earliest such deadline.
func (h *Host) maintain() {
	defer h.wg.Done()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		now := h.opts.Clock.Now()
		h.mu.Lock()
		release := h.dueReleasesLocked(now)
		expired, next := h.dueExpiriesLocked(now)
		if e := h.held.head; e != nil {
			if n := time.Unix(0, e.deadline).Add(-h.releaseMargin()); next.IsZero() || n.Before(next) {
				next = n
			}
		}
		var removed []removal
		for _, q := range expired {
			removed = append(removed, q.removeLocked())
		}
		wait := time.Hour
		if !next.IsZero() {
			wait = max(next.Sub(now), time.Millisecond)
		}
		wakeAt := now.Add(wait)
		h.maintainAt = wakeAt
		h.mu.Unlock()
		for _, m := range release {
			h.release(m, 0, "expiring")
		}
		for i, q := range expired {
			h.opts.Counters.Expired.Add(1)
			h.log.LogAttrs(context.Background(), slog.LevelDebug, "hostq: idle virtual queue expired",
				slog.String("queue_url", h.url), slog.String("virtual_queue", q.name))
			h.settle(removed[i])
		}

		timer.Reset(wait)
		select {
		case <-h.ctx.Done():
			return
		case <-h.wake: // Reset above re-arms the timer (Go 1.23+ timer semantics)
		case <-timer.C:
		}
	}
}

// dueReleasesLocked takes the held messages whose release time has come,
// oldest first: each is also the oldest of its queue's buffer.
func (h *Host) dueReleasesLocked(now time.Time) []types.Message {
	limit := now.Add(h.releaseMargin()).UnixNano()
	var due []types.Message
	for e := h.held.head; e != nil && e.deadline <= limit; e = h.held.head {
		h.held.unlink(e)
		q := e.q
		if q.st.buf.pop() != e {
			panic("hostq: ledger and queue buffer out of order")
		}
		q.compactLocked()
		due = append(due, e.m)
	}
	return due
}

// Gone ends a host whose queue was found deleted: its queues and held
// messages (gone with the queue) are dropped, receivers and expectations
// fail with an error matching *types.QueueDoesNotExist, its goroutines
// stop, and Options.OnGone is called. It makes no API call.
func (h *Host) Gone() {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return
	}
	h.closed, h.gone = true, true
	h.isClosed.Store(true)
	h.cancel() // aborts the loop, whose context is h.ctx
	f := h.takeAllLocked()
	for _, q := range h.queues {
		q.removeLocked() // its messages went with the host queue
	}
	h.held = ledger{}
	h.mu.Unlock()
	h.log.LogAttrs(context.Background(), slog.LevelWarn, "hostq: host queue was deleted", slog.String("queue_url", h.url))
	// The owner forgets the host before its callers hear of it: a caller
	// told at once sends again, and must get a new host queue, not this
	// one a second time.
	if h.opts.OnGone != nil {
		h.opts.OnGone(h)
	}
	f.fail(awserr.NewQueueDoesNotExist("host queue " + h.url + " was deleted"))
}

// Close stops the pollers, fails waiting receivers and expectations with
// sqsapi.ErrClosed, releases every held message and flushes pending
// deletes and visibility changes. Released messages become visible at
// once, or, when Close cancelled a long poll, as soon as that poll's wait
// has surely ended on the server (at most PollWaitTime plus 2 s): SQS can
// hand messages to a poll whose client went away. It returns when done or
// when ctx ends (with ctx's error, the unflushed calls abandoned), and is
// idempotent.
func (h *Host) Close(ctx context.Context) error {
	return h.closer.Do(ctx, func() error {
		h.mu.Lock()
		gone := h.gone
		h.closed = true
		h.isClosed.Store(true)
		h.mu.Unlock()
		// A long poll in flight is cancelled: waiting for its end would
		// keep an idle host's Close for up to PollWaitTime. What the server
		// may still hand it is covered by the release delay below.
		h.cancel() // aborts the loop, whose context is h.ctx
		waitErr := lifecycle.Wait(ctx, &h.wg)

		h.mu.Lock()
		f := h.takeAllLocked()
		var release []types.Message
		for e := h.held.head; e != nil; e = e.next {
			release = append(release, e.m)
		}
		h.held = ledger{}
		for _, q := range h.queues {
			if q.st != nil {
				q.st.buf = buffer{}
				q.compactLocked()
			}
		}
		h.mu.Unlock()
		f.fail(sqsapi.ErrClosed)
		// Released messages must not fall into a receive that Close
		// cancelled but the server still holds: they become visible after
		// it ends.
		if !gone {
			delay := h.loop.ReleaseDelay()
			for _, m := range release {
				h.release(m, delay, "closed")
			}
		}
		return errors.Join(waitErr, h.vis.Close(ctx), h.deletes.Close(ctx))
	})
}
