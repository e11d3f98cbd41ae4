package hostq

import (
	"maps"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/internal/awserr"
	"github.com/tempqueues/tempqueues/internal/batch"
	"github.com/tempqueues/tempqueues/internal/wire"
	"github.com/tempqueues/tempqueues/sqsapi"
)

// Queue is one virtual queue on a host. An idle one (nothing held, nobody
// waiting, no tags, nothing in flight) is just this struct and its map
// entry: its busy state lives in a separately allocated qstate that is
// dropped when it empties. All fields are guarded by the host's mutex.
type Queue struct {
	name       string
	h          *Host
	lastActive int64 // unix nanoseconds
	expireAt   int64 // when the expiry heap next looks at it
	retention  int32 // idle seconds before expiry; 0 = never
	heapIdx    int32 // index in the host's expiry heap, -1 when absent
	receivers  int32 // receives in progress, which keep the queue alive
	removed    bool
	st         *qstate
}

type qstate struct {
	buf      buffer
	waiters  []*waiter
	tags     map[string]string
	inflight map[string]time.Time // receipt handle -> visibility deadline
}

// waiter is a receive waiting for messages. fn runs once, outside the
// host's lock, with messages or an error.
type waiter struct {
	max int
	fn  func([]types.Message, error)
}

func (q *Queue) state() *qstate {
	if q.st == nil {
		q.st = &qstate{}
	}
	return q.st
}

// compactLocked drops the busy state of a queue that became idle.
func (q *Queue) compactLocked() {
	if st := q.st; st != nil && st.buf.n == 0 && len(st.waiters) == 0 && len(st.tags) == 0 && len(st.inflight) == 0 {
		q.st = nil
	}
}

func (q *Queue) touch(now time.Time) { q.lastActive = now.UnixNano() }

// Name returns the queue's name.
func (q *Queue) Name() string { return q.name }

// Host returns the queue's host.
func (q *Queue) Host() *Host { return q.h }

// Retention returns the idle seconds after which the queue expires; 0
// means never.
func (q *Queue) Retention() int32 { return q.retention }

// URL returns the queue's virtual URL.
func (q *Queue) URL() string { return wire.VirtualQueueURL(q.h.url, q.name) }

// CreateQueue returns the queue name on this host, creating it with
// retention (idle seconds, 0 = never expires) and tags. An existing queue
// with another retention is an error matching *types.QueueNameExists, as
// SQS answers; maxQueues > 0 bounds the queues counted in
// Options.Counters.Queues.
func (h *Host) CreateQueue(name string, retention int32, tags map[string]string, maxQueues int) (*Queue, error) {
	now := h.opts.Clock.Now()
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.closedErrLocked(); err != nil {
		return nil, err
	}
	if q := h.queues[name]; q != nil {
		if q.retention != retention {
			return nil, &types.QueueNameExists{Message: aws.String("virtual queue " + name + " exists with a different " + sqsapi.IdleQueueRetentionPeriodAttribute)}
		}
		q.touch(now)
		q.addTagsLocked(tags)
		return q, nil
	}
	if _, ok := h.calls[name]; ok {
		return nil, &types.QueueNameExists{Message: aws.String("virtual queue " + name + " is a pending reply's")}
	}
	if maxQueues > 0 && h.opts.Counters.Queues.Load() >= int64(maxQueues) {
		return nil, ErrTooManyQueues
	}
	q := &Queue{name: name, h: h, retention: retention, heapIdx: -1, lastActive: now.UnixNano()}
	q.addTagsLocked(tags)
	h.queues[name] = q
	h.opts.Counters.Queues.Add(1)
	if retention > 0 {
		q.expireAt = now.Add(time.Duration(retention) * time.Second).UnixNano()
		if h.expiry.push(q) {
			h.wakeByLocked(time.Unix(0, q.expireAt))
		}
	}
	return q, nil
}

// Queue returns the live queue name, or nil.
func (h *Host) Queue(name string) *Queue {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil
	}
	return h.queues[name]
}

// removal is what a removed queue leaves to settle outside the lock.
type removal struct {
	held    []types.Message
	waiters []*waiter
}

// removeLocked unlinks the queue from its host and its held messages from
// the ledger.
func (q *Queue) removeLocked() removal {
	h := q.h
	if q.removed {
		return removal{}
	}
	q.removed = true
	if h.queues[q.name] == q {
		delete(h.queues, q.name)
		h.opts.Counters.Queues.Add(-1)
	}
	if q.heapIdx >= 0 {
		h.expiry.remove(q)
	}
	st := q.st
	q.st = nil
	if st == nil {
		return removal{}
	}
	var r removal
	for e := st.buf.pop(); e != nil; e = st.buf.pop() {
		if !h.gone {
			h.held.unlink(e)
		}
		r.held = append(r.held, e.m)
	}
	h.demand -= len(st.waiters)
	q.receivers = 0
	r.waiters = st.waiters
	return r
}

// settle finishes a removal outside the lock: held messages become orphans
// and waiting receivers learn that the queue is gone.
func (h *Host) settle(r removal) {
	for _, w := range r.waiters {
		w.fn(nil, awserr.NewQueueDoesNotExist("virtual queue was deleted while a receive waited"))
	}
	for _, m := range r.held {
		h.orphan(m)
	}
}

// Delete removes the queue (no API call): its held messages become orphans,
// its waiting receivers get an error matching *types.QueueDoesNotExist.
func (q *Queue) Delete() {
	q.h.mu.Lock()
	r := q.removeLocked()
	q.h.mu.Unlock()
	q.h.settle(r)
}

// takeLocked removes up to n held messages and records them in flight.
func (q *Queue) takeLocked(n int, now time.Time) []types.Message {
	st := q.st
	if st == nil || st.buf.n == 0 {
		return nil
	}
	if blocked, _ := q.fifoGateLocked(now, false); blocked {
		return nil
	}
	n = min(n, st.buf.n)
	msgs := make([]types.Message, n)
	if st.inflight == nil {
		st.inflight = make(map[string]time.Time)
	} else if len(st.inflight) >= 64 {
		// Messages received and never deleted through this client (left
		// to redeliver) would otherwise stay recorded forever.
		for hd, dl := range st.inflight {
			if !dl.After(now) {
				delete(st.inflight, hd)
			}
		}
	}
	for i := range msgs {
		e := st.buf.pop()
		q.h.held.unlink(e)
		msgs[i] = e.m
		st.inflight[aws.ToString(e.m.ReceiptHandle)] = time.Unix(0, e.deadline)
	}
	q.touch(now)
	return msgs
}

// serveWaitersLocked hands held messages to waiting receivers, oldest
// first, and appends the deliveries to make once the lock is released.
func (q *Queue) serveWaitersLocked(out []delivery, now time.Time) []delivery {
	st := q.st
	for st != nil && st.buf.n > 0 && len(st.waiters) > 0 {
		if blocked, _ := q.fifoGateLocked(now, false); blocked {
			break
		}
		w := st.waiters[0]
		st.waiters = st.waiters[1:]
		q.h.demand--
		q.receivers--
		out = append(out, delivery{w: w, msgs: q.takeLocked(w.max, now)})
	}
	q.compactLocked()
	return out
}

// Receive takes up to max held messages at once; when there are none and
// wait is true, it registers fn to be called once, on a host goroutine,
// with the next messages (or an error if the queue, its host or the client
// goes away) and returns a cancel function that withdraws the registration
// and reports whether it did so before fn was called. A short poll (wait
// false) that finds nothing asks the pollers for one receive so that later
// polls find messages. Registered receivers keep the queue from expiring.
func (q *Queue) Receive(max int, wait bool, fn func([]types.Message, error)) (msgs []types.Message, cancel func() bool, err error) {
	h := q.h
	now := h.opts.Clock.Now()
	var stale []types.Message
	defer func() { h.releaseNow(stale) }() // after the unlock below
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.closedErrLocked(); err != nil {
		return nil, nil, err
	}
	if q.removed {
		return nil, nil, awserr.NewQueueDoesNotExist("virtual queue " + q.URL() + " does not exist")
	}
	q.touch(now)
	_, stale = q.fifoGateLocked(now, true)
	if msgs := q.takeLocked(max, now); len(msgs) > 0 {
		q.compactLocked()
		return msgs, nil, nil
	}
	if !wait {
		h.kick = true
		h.startPollersLocked()
		return nil, nil, nil
	}
	w := &waiter{max: max, fn: fn}
	st := q.state()
	st.waiters = append(st.waiters, w)
	q.receivers++
	h.demand++
	h.startPollersLocked()
	return nil, func() bool { return q.withdraw(w) }, nil
}

// withdraw removes a registered waiter; false means it was already served.
func (q *Queue) withdraw(w *waiter) bool {
	h := q.h
	h.mu.Lock()
	defer h.mu.Unlock()
	if q.st == nil {
		return false
	}
	i := slices.Index(q.st.waiters, w)
	if i < 0 {
		return false
	}
	q.st.waiters = slices.Delete(q.st.waiters, i, i+1)
	h.demand--
	q.receivers--
	q.touch(h.opts.Clock.Now())
	q.compactLocked()
	return true
}

// Settle records activity on the queue and updates the in-flight record of
// handles received from it: deleted (deadline zero) or hidden until
// deadline.
//
// On a FIFO host, a delete that ends the queue's last message in flight
// hands the buffered messages behind it to waiting receivers.
func (q *Queue) Settle(deadline time.Time, handles ...string) {
	h := q.h
	now := h.opts.Clock.Now()
	h.mu.Lock()
	q.touch(now)
	st := q.st
	if st == nil || st.inflight == nil {
		h.mu.Unlock()
		return
	}
	for _, hd := range handles {
		if _, ok := st.inflight[hd]; !ok {
			continue
		}
		if deadline.IsZero() {
			delete(st.inflight, hd)
		} else {
			st.inflight[hd] = deadline
		}
	}
	var (
		stale   []types.Message
		deliver []delivery
	)
	if h.fifo {
		_, stale = q.fifoGateLocked(now, true)
		deliver = q.serveWaitersLocked(nil, now)
	}
	q.compactLocked()
	h.mu.Unlock()
	h.releaseNow(stale)
	for _, d := range deliver {
		d.w.fn(d.msgs, nil)
	}
}

// Counts returns the queue's held messages and those received and not
// deleted within their visibility.
func (q *Queue) Counts() (visible, notVisible int) {
	h := q.h
	now := h.opts.Clock.Now()
	h.mu.Lock()
	defer h.mu.Unlock()
	st := q.st
	if st == nil {
		return 0, 0
	}
	for handle, dl := range st.inflight {
		if dl.After(now) {
			notVisible++
		} else if !h.fifo { // on a FIFO host the record marks what is behind it stale
			delete(st.inflight, handle)
		}
	}
	visible = st.buf.n
	q.compactLocked()
	return visible, notVisible
}

// Purge deletes the queue's held messages from the host queue; messages
// received and not deleted, or still on the host queue, are not affected.
func (q *Queue) Purge() {
	h := q.h
	h.mu.Lock()
	var purged []types.Message
	if st := q.st; st != nil {
		for e := st.buf.pop(); e != nil; e = st.buf.pop() {
			h.held.unlink(e)
			purged = append(purged, e.m)
		}
		q.compactLocked()
	}
	q.touch(h.opts.Clock.Now())
	h.mu.Unlock()
	for _, m := range purged {
		h.deleteAsync(m, batch.DeleteLinger, "purge")
	}
}

func (q *Queue) addTagsLocked(tags map[string]string) {
	if len(tags) == 0 {
		return
	}
	st := q.state()
	if st.tags == nil {
		st.tags = make(map[string]string, len(tags))
	}
	maps.Copy(st.tags, tags)
}

// AddTags sets local tags.
func (q *Queue) AddTags(tags map[string]string) {
	q.h.mu.Lock()
	q.addTagsLocked(tags)
	q.h.mu.Unlock()
}

// RemoveTags removes local tags.
func (q *Queue) RemoveTags(keys []string) {
	q.h.mu.Lock()
	defer q.h.mu.Unlock()
	if q.st == nil {
		return
	}
	for _, k := range keys {
		delete(q.st.tags, k)
	}
	q.compactLocked()
}

// Tags returns a copy of the local tags.
func (q *Queue) Tags() map[string]string {
	q.h.mu.Lock()
	defer q.h.mu.Unlock()
	tags := map[string]string{}
	if q.st != nil {
		maps.Copy(tags, q.st.tags)
	}
	return tags
}
