package virtualqueue

import (
	"context"
	"log/slog"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/internal/backoff"
	"github.com/tempqueues/tempqueues/internal/batch"
	"github.com/tempqueues/tempqueues/sqsapi"
)

// host is one real host queue and the virtual queues on it. A single mutex
// guards the host and all of its virtual queues: routing a received batch,
// taking buffered messages and registering waiters are short critical
// sections, and one lock keeps them consistent without lock ordering.
type host struct {
	c   *Client
	url string

	ready   chan struct{} // closed when the attributes below are known
	initErr error

	visibility time.Duration // host VisibilityTimeout
	// recvVisibility is the visibility the poller's receives give messages:
	// Options.ReceiveVisibilityTimeout, or the host's.
	recvVisibility time.Duration
	waitTime       int32 // host ReceiveMessageWaitTimeSeconds

	mu       sync.Mutex
	queues   map[string]*vqueue
	demand   int // registered waiters across the host's virtual queues
	kick     bool
	pollers  int
	failures int        // consecutive failed polls, for backoff
	pending  []*bufMsg  // buffered messages in receipt order
	expiry   expiryHeap // virtual queues with a retention period
	wake     chan struct{}
	// ctx ends with the client's or when ForgetHost drops the host: its
	// pollers and maintenance goroutine stop.
	ctx    context.Context
	cancel context.CancelFunc
	// maintainAt is when the maintenance goroutine wakes next by itself
	// (zero before its first round): only an earlier deadline needs a signal, so
	// a routed message that goes straight to a waiting receiver, or a
	// virtual queue that expires after others, costs no wake-up.
	maintainAt time.Time
	closed     bool
	// pollUntil is when the latest receive's wait ends (unix nanos). A
	// receive cancelled by Close may stay parked on the server until then,
	// and SQS can hand it messages nobody will see; releases at Close wait
	// that long.
	pollUntil int64
}

// bufMsg is a routed message waiting in a virtual queue's buffer.
type bufMsg struct {
	m        types.Message
	q        *vqueue
	deadline time.Time // host visibility deadline
	taken    bool      // given to a receiver, released or deleted
}

func (h *host) isReady() bool {
	select {
	case <-h.ready:
		return h.initErr == nil
	default:
		return false
	}
}

// getHost returns the ready host for hostURL, reading its attributes on first
// use. Concurrent first uses share one GetQueueAttributes call.
func (c *Client) getHost(ctx context.Context, hostURL string) (*host, error) {
	c.mu.Lock()
	h := c.hosts[hostURL]
	if h == nil {
		h = &host{c: c, url: hostURL, ready: make(chan struct{}), queues: make(map[string]*vqueue), wake: make(chan struct{}, 1)}
		h.ctx, h.cancel = context.WithCancel(c.ctx)
		c.hosts[hostURL] = h
		c.mu.Unlock()
		h.initErr = h.init(ctx)
		// Under c.mu, so that Close (which sets closed under c.mu) either
		// sees this host or makes it fail: no goroutine starts after Close
		// began waiting.
		c.mu.Lock()
		if h.initErr == nil && c.closed.Load() {
			h.initErr = ErrClosed
		}
		if h.initErr != nil {
			delete(c.hosts, hostURL)
			h.cancel()
		} else {
			c.wg.Add(1)
			go h.maintain()
		}
		c.mu.Unlock()
		close(h.ready)
		return h, h.initErr
	}
	c.mu.Unlock()
	select {
	case <-h.ready:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if h.initErr != nil {
		// The first caller's failure (perhaps its context) is not ours: retry.
		return c.getHost(ctx, hostURL)
	}
	return h, nil
}

func (h *host) init(ctx context.Context) error {
	if strings.HasSuffix(h.url, ".fifo") {
		return sqsapi.Invalid("CreateQueue", "HostQueueUrl", "host queue %s is a FIFO queue; virtual queues need a standard host queue", h.url)
	}
	out, err := h.c.sqs.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl: aws.String(h.url),
		AttributeNames: []types.QueueAttributeName{
			types.QueueAttributeNameVisibilityTimeout, types.QueueAttributeNameReceiveMessageWaitTimeSeconds,
		},
	})
	if err != nil {
		return err
	}
	vt, _ := strconv.Atoi(out.Attributes[string(types.QueueAttributeNameVisibilityTimeout)])
	if vt <= 0 {
		vt = 30
	}
	wt, _ := strconv.Atoi(out.Attributes[string(types.QueueAttributeNameReceiveMessageWaitTimeSeconds)])
	h.visibility = time.Duration(vt) * time.Second
	h.recvVisibility = h.visibility
	if v := h.c.opts.ReceiveVisibilityTimeout; v > 0 {
		h.recvVisibility = v
	}
	h.waitTime = int32(wt)
	return nil
}

// releaseMargin is how long before its visibility deadline an untaken
// buffered message is released.
func (h *host) releaseMargin() time.Duration {
	if m := h.c.opts.ReleaseMargin; m > 0 {
		return min(m, h.recvVisibility/2)
	}
	return min(h.recvVisibility/4, 5*time.Second)
}

// wantPollersLocked is the number of concurrent receives the current demand
// justifies: one per 10 waiting receivers, at least one while anyone waits.
func (h *host) wantPollersLocked() int {
	if h.demand == 0 {
		if h.kick {
			return 1
		}
		return 0
	}
	return min((h.demand+sqsapi.MaxReceiveMessages-1)/sqsapi.MaxReceiveMessages, h.c.opts.MaxPollers)
}

// startPollersLocked starts pollers up to the wanted number.
func (h *host) startPollersLocked() {
	if h.closed || h.c.closed.Load() {
		return
	}
	for h.pollers < h.wantPollersLocked() {
		h.pollers++
		h.c.wg.Add(1)
		go h.poll()
	}
}

// poll receives from the host queue while there is demand and routes what it
// gets. Several may run at once under load; each exits when demand no longer
// justifies it, so an idle host costs no calls.
// With Options.Linger, the last poller makes one more receive after a
// receive that brought messages.
func (h *host) poll() {
	defer h.c.wg.Done()
	ctx := h.ctx
	linger := false
	for {
		h.mu.Lock()
		want := h.wantPollersLocked()
		if linger && want == 0 && h.pollers == 1 && !h.closed {
			want = 1
		}
		if ctx.Err() != nil || h.pollers > want {
			h.pollers--
			h.mu.Unlock()
			return
		}
		h.kick = false
		failures := h.failures
		h.pollUntil = max(h.pollUntil, time.Now().Add(h.c.opts.PollWaitTime).UnixNano())
		h.mu.Unlock()
		if failures > 0 {
			if backoff.Sleep(ctx, h.c.opts.Backoff.Delay(failures-1)) != nil {
				continue // the loop head sees the cancelled context
			}
		}
		out, err := h.c.sqs.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl:                    aws.String(h.url),
			MaxNumberOfMessages:         sqsapi.MaxReceiveMessages,
			WaitTimeSeconds:             int32(h.c.opts.PollWaitTime / time.Second),
			VisibilityTimeout:           int32(h.c.opts.ReceiveVisibilityTimeout / time.Second),
			MessageAttributeNames:       []string{"All"},
			MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
		})
		if err != nil {
			if ctx.Err() != nil {
				continue
			}
			linger = false
			h.pollFailed(err)
			continue
		}
		h.mu.Lock()
		h.failures = 0
		demand := h.demand
		h.mu.Unlock()
		h.c.log.LogAttrs(ctx, slog.LevelDebug, "virtualqueue: host queue receive",
			slog.String("queue_url", h.url), slog.Int("messages", len(out.Messages)), slog.Int("waiting", demand))
		linger = h.c.opts.Linger && len(out.Messages) > 0
		if h.route(out.Messages) {
			// Receivers were just handed messages and are runnable: let
			// them go first rather than after this poller has built and
			// signed its next receive. On an idle process this is most of
			// the wait between a reply's arrival and its caller running.
			runtime.Gosched()
		}
	}
}

// pollFailed backs off after a failed receive. A missing host queue, or any
// error that retrying will not fix, is reported to every waiting receiver;
// transient errors (throttling, 5xx, network) are retried after a jittered
// backoff while receivers keep waiting.
func (h *host) pollFailed(err error) {
	h.mu.Lock()
	h.failures++
	var failed []*waiter
	if !sqsapi.IsTransient(err) {
		failed = h.takeAllWaitersLocked()
	}
	h.mu.Unlock()
	h.c.log.LogAttrs(context.Background(), slog.LevelWarn, "virtualqueue: host queue receive failed",
		slog.String("queue_url", h.url), slog.Int("waiters_failed", len(failed)), slog.Any("error", err))
	for _, w := range failed {
		w.fn(nil, err)
	}
}

func (h *host) takeAllWaitersLocked() []*waiter {
	var all []*waiter
	for _, q := range h.queues {
		if q.st == nil {
			continue
		}
		all = append(all, q.st.waiters...)
		q.st.waiters = nil
		q.receivers = 0
		q.compactLocked()
	}
	h.demand = 0
	return all
}

type delivery struct {
	w    *waiter
	msgs []types.Message
}

// route hands received messages to waiting receivers, buffers the rest in
// their virtual queues, and applies the orphan policy to messages no virtual
// queue here can take. It reports whether it handed messages to receivers.
func (h *host) route(msgs []types.Message) bool {
	if len(msgs) == 0 {
		return false
	}
	now := time.Now()
	deadline := now.Add(h.recvVisibility)
	var (
		orphans   []types.Message
		overflow  []types.Message
		deliver   []delivery
		touched   []*vqueue
		toRelease []types.Message
	)
	h.mu.Lock()
	closing := h.closed || h.c.closed.Load()
	h.dropTakenLocked()
	for _, m := range msgs {
		if closing {
			toRelease = append(toRelease, m)
			continue
		}
		name := routingName(m)
		q := h.queues[name]
		if q == nil {
			orphans = append(orphans, m)
			continue
		}
		st := q.state()
		if len(st.buf) >= h.c.opts.BufferSize {
			overflow = append(overflow, m)
			continue
		}
		b := &bufMsg{m: m, q: q, deadline: deadline}
		st.buf = append(st.buf, b)
		h.pending = append(h.pending, b)
		q.touch(now)
		if len(st.buf) == 1 {
			touched = append(touched, q)
		}
	}
	for _, q := range touched {
		deliver = q.serveWaitersLocked(deliver, now)
	}
	if next := h.nextReleaseLocked(); !next.IsZero() {
		h.wakeByLocked(next) // messages stay buffered: release them in time
	}
	h.mu.Unlock()

	h.c.routed.Add(int64(len(msgs) - len(orphans) - len(overflow) - len(toRelease)))
	for _, d := range deliver {
		d.w.fn(d.msgs, nil)
	}
	for _, m := range toRelease {
		h.release(m, 0)
	}
	for _, m := range overflow {
		h.c.overflowed.Add(1)
		h.release(m, h.c.opts.OrphanReleaseDelay)
	}
	for _, m := range orphans {
		h.orphan(m)
	}
	return len(deliver) > 0
}

func routingName(m types.Message) string {
	if v, ok := m.MessageAttributes[sqsapi.VirtualQueueNameAttribute]; ok && v.StringValue != nil {
		return *v.StringValue
	}
	return ""
}

// release makes a host message visible again after delay, in a batch call.
func (h *host) release(m types.Message, delay time.Duration) {
	h.c.released.Add(1)
	h.c.vis.Submit(h.url, batch.Visibility{ReceiptHandle: aws.ToString(m.ReceiptHandle), Timeout: int32(delay / time.Second)}, func(_ struct{}, err error) {
		if err != nil {
			h.c.log.LogAttrs(context.Background(), slog.LevelWarn, "virtualqueue: releasing a message failed; it reappears after its visibility timeout",
				slog.String("queue_url", h.url), slog.String("message_id", aws.ToString(m.MessageId)), slog.Any("error", err))
		}
	})
}

func (h *host) deleteAsync(m types.Message, why string) {
	h.c.deletes.Submit(h.url, aws.ToString(m.ReceiptHandle), func(_ struct{}, err error) {
		if err != nil {
			h.c.log.LogAttrs(context.Background(), slog.LevelWarn, "virtualqueue: deleting a message failed",
				slog.String("queue_url", h.url), slog.String("message_id", aws.ToString(m.MessageId)), slog.String("reason", why), slog.Any("error", err))
		}
	})
}

// orphan applies the orphan policy to a message no virtual queue here takes.
func (h *host) orphan(m types.Message) {
	h.c.orphaned.Add(1)
	name := routingName(m)
	action := DeleteOrphan
	switch h.c.opts.Orphans {
	case OrphanRelease:
		action = ReleaseOrphan
	case OrphanHandle:
		if h.c.opts.OrphanHandler != nil {
			action = h.c.opts.OrphanHandler(h.c.ctx, h.url, name, m)
		}
	}
	h.c.log.LogAttrs(context.Background(), slog.LevelInfo, "virtualqueue: orphaned message",
		slog.String("queue_url", h.url), slog.String("virtual_queue", name),
		slog.String("message_id", aws.ToString(m.MessageId)), slog.Int("action", int(action)))
	switch action {
	case DeleteOrphan:
		h.deleteAsync(m, "orphan")
	case ReleaseOrphan:
		h.release(m, h.c.opts.OrphanReleaseDelay)
	}
}

// wakeByLocked makes sure the maintenance goroutine runs by t.
func (h *host) wakeByLocked(t time.Time) {
	if h.maintainAt.IsZero() || t.Before(h.maintainAt) {
		h.signal()
	}
}

// dropTakenLocked drops the taken messages at the front of h.pending (in
// receipt order, they are mostly taken in order), so that messages handed
// straight to receivers do not pile up between maintenance runs.
func (h *host) dropTakenLocked() {
	i := 0
	for i < len(h.pending) && h.pending[i].taken {
		h.pending[i] = nil
		i++
	}
	if i > 0 {
		h.pending = h.pending[:copy(h.pending, h.pending[i:])]
	}
}

// signal wakes the maintenance goroutine to recompute its next deadline.
func (h *host) signal() {
	select {
	case h.wake <- struct{}{}:
	default:
	}
}

// maintain releases buffered messages before their host visibility timeout
// ends and deletes virtual queues that stayed idle past their retention. One
// goroutine per host sleeps until the earliest such deadline.
func (h *host) maintain() {
	defer h.c.wg.Done()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		now := time.Now()
		h.mu.Lock()
		release := h.dueReleasesLocked(now)
		expired, next := h.dueExpiriesLocked(now)
		if n := h.nextReleaseLocked(); !n.IsZero() && (next.IsZero() || n.Before(next)) {
			next = n
		}
		var dropped []*bufMsg
		var failed []*waiter
		for _, q := range expired {
			d, f := h.removeLocked(q)
			dropped = append(dropped, d...)
			failed = append(failed, f...)
		}
		wait := time.Hour
		if !next.IsZero() {
			wait = max(next.Sub(now), time.Millisecond)
		}
		wakeAt := now.Add(wait)
		h.maintainAt = wakeAt
		h.mu.Unlock()
		for _, b := range release {
			h.release(b.m, 0)
		}
		for _, q := range expired {
			h.c.expired.Add(1)
			h.c.log.LogAttrs(context.Background(), slog.LevelDebug, "virtualqueue: idle virtual queue expired",
				slog.String("queue_url", h.url), slog.String("virtual_queue", q.name))
		}
		h.c.settleRemoved(h, dropped, failed)

		timer.Reset(max(time.Until(wakeAt), 0))
		select {
		case <-h.ctx.Done():
			return
		case <-h.wake: // Reset above re-arms the timer (Go 1.23+ timer semantics)
		case <-timer.C:
		}
	}
}

// dueReleasesLocked pops buffered messages whose release time has come and
// marks them taken; taken entries at the front are dropped on the way.
func (h *host) dueReleasesLocked(now time.Time) []*bufMsg {
	margin := h.releaseMargin()
	var due []*bufMsg
	i := 0
	for ; i < len(h.pending); i++ {
		b := h.pending[i]
		if b.taken {
			continue
		}
		if now.Before(b.deadline.Add(-margin)) {
			break
		}
		b.taken = true
		b.q.unbufferLocked(b)
		due = append(due, b)
	}
	h.pending = h.pending[:copy(h.pending, h.pending[i:])]
	return due
}

func (h *host) nextReleaseLocked() time.Time {
	for _, b := range h.pending {
		if !b.taken {
			return b.deadline.Add(-h.releaseMargin())
		}
	}
	return time.Time{}
}

// shutdown fails waiting receivers with ErrClosed and releases the buffered
// messages. It runs after the host's goroutines stopped.
func (h *host) shutdown() {
	h.mu.Lock()
	h.closed = true
	waiters := h.takeAllWaitersLocked()
	var release []*bufMsg
	for _, b := range h.pending {
		if !b.taken {
			b.taken = true
			release = append(release, b)
		}
	}
	h.pending = nil
	for _, q := range h.queues {
		if q.st != nil {
			q.st.buf = nil
			q.compactLocked()
		}
	}
	delay := time.Until(time.Unix(0, h.pollUntil))
	h.mu.Unlock()
	for _, w := range waiters {
		w.fn(nil, ErrClosed)
	}
	// Released messages must not fall into a receive that Close cancelled
	// but the server still holds: make them visible after it ends.
	if delay > 0 {
		delay = delay.Truncate(time.Second) + 2*time.Second
	} else {
		delay = 0
	}
	for _, b := range release {
		h.release(b.m, delay)
	}
}

// closedErrLocked is ErrClosed once the client is closed, an error matching
// *types.QueueDoesNotExist once the host was forgotten, and nil otherwise.
func (h *host) closedErrLocked() error {
	switch {
	case h.c.closed.Load():
		return ErrClosed
	case h.closed:
		return sqsapi.NewQueueDoesNotExist("host queue " + h.url + " was deleted")
	}
	return nil
}

// ForgetHost drops everything the client holds for the host queue hostURL,
// which its owner found deleted: the host's virtual queues and buffered
// messages (gone with the queue), and its goroutines. Receivers waiting on
// its virtual queues fail with an error matching *types.QueueDoesNotExist,
// as do later calls on their URLs. It cancels the host's long poll, which a
// server may keep parked until its wait ends: meant for a deleted host queue,
// not one to use again at once. It makes no API call, and does nothing for a
// host the client does not know.
func (c *Client) ForgetHost(hostURL string) {
	c.mu.Lock()
	h := c.hosts[hostURL]
	if h == nil || !h.isReady() {
		c.mu.Unlock()
		return
	}
	delete(c.hosts, hostURL)
	c.mu.Unlock()

	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return // Close got there first
	}
	h.closed = true
	h.cancel()
	waiters := h.takeAllWaitersLocked()
	for _, q := range h.queues {
		h.removeLocked(q) // its messages went with the host queue
	}
	h.pending = nil
	h.mu.Unlock()
	for _, w := range waiters {
		w.fn(nil, sqsapi.NewQueueDoesNotExist("host queue "+hostURL+" was deleted while a receive waited"))
	}
	c.log.LogAttrs(context.Background(), slog.LevelDebug, "virtualqueue: forgot deleted host queue", slog.String("queue_url", hostURL))
}
