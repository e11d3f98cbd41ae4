package reaper

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/internal/backoff"
	"github.com/tempqueues/tempqueues/sqsapi"
)

// heartbeatJitter spreads the heartbeats of queues registered at the same
// moment (±10% of the interval), so a fleet started at once does not tag in
// bursts. It is symmetric, so the average rate stays one per interval.
const heartbeatJitter = 0.1

// Heartbeater keeps the heartbeat tag of the queues it owns fresh, so that
// no sweeper of the fleet (Go or Java) deletes them. One goroutine serves
// every queue of the Heartbeater. It tags a queue only when its last
// heartbeat is older than HeartbeatFraction of the queue's retention, not on
// a fixed short interval, and backs off with jitter on errors.
//
// The tag, not local activity, is what other processes read: a live owner
// must keep heartbeating even when the queue is idle, so there is no
// "touch" method to defer heartbeats on activity.
//
// A Reaper contains a Heartbeater; use one directly only when the process
// runs no sweeps at all.
type Heartbeater struct {
	client sqsapi.Tagger
	opts   Options
	life   lifecycle

	mu     sync.Mutex
	queues map[string]*beat // by queue URL
	wake   chan struct{}    // buffered 1: registration changed

	heartbeats, failures, gone atomic.Int64
}

// beat is the schedule of one registered queue. The run loop owns the
// fields after registration, under Heartbeater.mu.
type beat struct {
	url       string
	name      string
	retention time.Duration
	// tagRetention: the RetentionTag has not been written yet.
	tagRetention bool
	due          time.Time
	failures     int // consecutive failed TagQueue calls
}

// NewHeartbeater returns a Heartbeater using client's TagQueue. It makes no
// API call; Run or Start starts heartbeating.
func NewHeartbeater(client sqsapi.Tagger, optFns ...func(*Options)) (*Heartbeater, error) {
	if client == nil {
		return nil, sqsapi.Invalid("reaper.NewHeartbeater", "client", "must not be nil")
	}
	o, err := buildOptions("reaper.NewHeartbeater", optFns)
	if err != nil {
		return nil, err
	}
	return newHeartbeater(client, o), nil
}

func newHeartbeater(client sqsapi.Tagger, o Options) *Heartbeater {
	return &Heartbeater{
		client: client,
		opts:   o,
		queues: make(map[string]*beat),
		wake:   make(chan struct{}, 1),
	}
}

// QueueTags returns the tags that mark a queue as a live temporary queue
// with the given retention, heartbeat at now: the RetentionTag in seconds
// and the HeartbeatTag in epoch milliseconds, exactly as the Java client
// writes them. Pass them as CreateQueueInput.Tags (AWS then also requires
// sqs:TagQueue) and register the queue with AddTagged to save the first
// TagQueue call.
func QueueTags(retention time.Duration, now time.Time) map[string]string {
	return map[string]string{
		sqsapi.RetentionTag: strconv.FormatInt(int64(retention/time.Second), 10),
		sqsapi.HeartbeatTag: strconv.FormatInt(now.UnixMilli(), 10),
	}
}

func checkRetention(op string, retention time.Duration) error {
	if retention < sqsapi.MinIdleQueueRetention {
		return sqsapi.Invalid(op, "retention", "%v is below the minimum of %v", retention, sqsapi.MinIdleQueueRetention)
	}
	if retention%time.Second != 0 {
		return sqsapi.Invalid(op, "retention", "%v is not a whole number of seconds (the tag holds seconds)", retention)
	}
	return nil
}

// Add registers a queue that this process owns, with its idle retention.
// The heartbeat goroutine writes both the RetentionTag and the HeartbeatTag
// at once, then refreshes the HeartbeatTag every HeartbeatFraction of the
// retention. Adding a registered queue again with the same retention does
// nothing; with another retention it rewrites both tags. Add makes no API
// call itself and may be called before Run.
func (h *Heartbeater) Add(queueURL string, retention time.Duration) error {
	return h.add("Heartbeater.Add", queueURL, retention, time.Time{})
}

// AddTagged registers a queue that already carries both tags, heartbeat at
// taggedAt (typically created with CreateQueueInput.Tags = QueueTags(...)).
// Its first TagQueue comes one heartbeat interval after taggedAt.
func (h *Heartbeater) AddTagged(queueURL string, retention time.Duration, taggedAt time.Time) error {
	if taggedAt.IsZero() {
		return sqsapi.Invalid("Heartbeater.AddTagged", "taggedAt", "must not be zero")
	}
	return h.add("Heartbeater.AddTagged", queueURL, retention, taggedAt)
}

func (h *Heartbeater) add(op, queueURL string, retention time.Duration, taggedAt time.Time) error {
	name := queueName(queueURL)
	if name == "" {
		return sqsapi.Invalid(op, "queueURL", "%q has no queue name", queueURL)
	}
	if err := checkRetention(op, retention); err != nil {
		return err
	}
	if h.life.isClosed() {
		return ErrClosed
	}
	h.mu.Lock()
	b, ok := h.queues[queueURL]
	switch {
	case ok && b.retention == retention:
		// Already heartbeating with this retention: keep the schedule.
	case taggedAt.IsZero():
		b = &beat{url: queueURL, name: name, retention: retention, tagRetention: true, due: h.opts.Now()}
		h.queues[queueURL] = b
	default:
		b = &beat{url: queueURL, name: name, retention: retention}
		b.due = taggedAt.Add(h.interval(retention))
		h.queues[queueURL] = b
	}
	h.mu.Unlock()
	h.signal()
	return nil
}

// Remove stops heartbeating a queue, e.g. before the owner deletes it. It
// makes no API call; the tags stay until the queue is deleted.
func (h *Heartbeater) Remove(queueURL string) {
	h.mu.Lock()
	delete(h.queues, queueURL)
	h.mu.Unlock()
	h.signal()
}

// Len returns the number of registered queues.
func (h *Heartbeater) Len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.queues)
}

// owns reports whether the queue named name is registered; a sweep of the
// same process skips it without reading its tags.
func (h *Heartbeater) owns(name string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, b := range h.queues {
		if b.name == name {
			return true
		}
	}
	return false
}

// Run heartbeats the registered queues until ctx is cancelled or Close is
// called. It returns nil after Close, ctx.Err() after cancellation, and
// ErrRunning or ErrClosed at once when it cannot start.
func (h *Heartbeater) Run(ctx context.Context) error {
	runCtx, end, err := h.life.begin(ctx)
	if err != nil {
		return err
	}
	defer end()
	h.loop(runCtx)
	return runResult(ctx)
}

// Start runs Run in a goroutine that Close stops.
func (h *Heartbeater) Start() error {
	runCtx, end, err := h.life.begin(context.Background())
	if err != nil {
		return err
	}
	go func() {
		defer end()
		h.loop(runCtx)
	}()
	return nil
}

// Close stops heartbeating and waits until the goroutine has returned or
// ctx is done. Registered queues keep their tags and become idle after
// their retention; later Add calls return ErrClosed.
func (h *Heartbeater) Close(ctx context.Context) error {
	return h.life.close(ctx)
}

// HeartbeatStats are counters of a Heartbeater.
type HeartbeatStats struct {
	Heartbeats int64 // successful TagQueue calls
	Failures   int64 // failed TagQueue calls, each retried after a backoff
	QueuesGone int64 // registered queues found deleted and dropped
}

// Stats returns the Heartbeater's counters.
func (h *Heartbeater) Stats() HeartbeatStats {
	return HeartbeatStats{Heartbeats: h.heartbeats.Load(), Failures: h.failures.Load(), QueuesGone: h.gone.Load()}
}

func (h *Heartbeater) signal() {
	select {
	case h.wake <- struct{}{}:
	default:
	}
}

// interval is the nominal time between two heartbeats of a queue.
func (h *Heartbeater) interval(retention time.Duration) time.Duration {
	return time.Duration(float64(retention) * h.opts.HeartbeatFraction)
}

// retryPolicy is the backoff after failed heartbeats of a queue. Its cap is
// one interval: with HeartbeatFraction at most 1/2, a queue throttled for a
// while still gets several attempts before its retention runs out, and a
// throttled account is not hammered by many queues retrying fast.
func (h *Heartbeater) retryPolicy(retention time.Duration) backoff.Policy {
	iv := h.interval(retention)
	return backoff.Policy{Base: min(max(iv/20, 50*time.Millisecond), 2*time.Second), Cap: min(iv, time.Minute)}
}

// pending is a heartbeat to send, copied out of the registry so the call is
// made without holding the lock.
type pending struct {
	b            *beat
	url          string
	retention    time.Duration
	tagRetention bool
}

// loop is the heartbeat goroutine: it tags the queues that are due, then
// sleeps until the next one is due or the registry changes.
func (h *Heartbeater) loop(ctx context.Context) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for ctx.Err() == nil {
		due, next := h.collect(h.opts.Now())
		for _, p := range due {
			if ctx.Err() != nil {
				return
			}
			h.beatOnce(ctx, p)
		}
		if len(due) > 0 {
			continue // time has passed while tagging: look again
		}
		var tick <-chan time.Time
		if !next.IsZero() {
			timer.Reset(max(next.Sub(h.opts.Now()), time.Millisecond))
			tick = timer.C
		}
		select {
		case <-ctx.Done():
		case <-h.wake:
		case <-tick:
		}
		// Since Go 1.23 a stopped timer delivers no stale tick, so Stop is
		// enough before the next Reset.
		timer.Stop()
	}
}

// collect returns the queues due at now and the earliest future due time
// (zero when nothing is registered).
func (h *Heartbeater) collect(now time.Time) (due []pending, next time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, b := range h.queues {
		if !b.due.After(now) {
			due = append(due, pending{b: b, url: b.url, retention: b.retention, tagRetention: b.tagRetention})
			continue
		}
		if next.IsZero() || b.due.Before(next) {
			next = b.due
		}
	}
	return due, next
}

func (h *Heartbeater) beatOnce(ctx context.Context, p pending) {
	now := h.opts.Now()
	tags := map[string]string{sqsapi.HeartbeatTag: strconv.FormatInt(now.UnixMilli(), 10)}
	if p.tagRetention {
		tags[sqsapi.RetentionTag] = strconv.FormatInt(int64(p.retention/time.Second), 10)
	}
	callCtx, cancel := context.WithTimeout(ctx, h.opts.CallTimeout)
	_, err := h.client.TagQueue(callCtx, &sqs.TagQueueInput{QueueUrl: aws.String(p.url), Tags: tags})
	cancel()
	if err != nil && ctx.Err() != nil {
		return // shutting down: the call was cut short, not failed
	}

	var gone *types.QueueDoesNotExist
	isGone := errors.As(err, &gone)
	h.mu.Lock()
	if h.queues[p.url] != p.b {
		// Removed (or re-added) while the call ran: its new state wins.
		h.mu.Unlock()
		return
	}
	switch {
	case err == nil:
		p.b.failures = 0
		p.b.tagRetention = false
		p.b.due = now.Add(backoff.Jitter(h.interval(p.retention), heartbeatJitter))
	case isGone:
		delete(h.queues, p.url)
	default:
		p.b.failures++
		policy := h.retryPolicy(p.retention)
		// Full jitter may pick ~0; the floor keeps a persistently failing
		// queue from spinning.
		p.b.due = h.opts.Now().Add(max(policy.Delay(p.b.failures-1), policy.Base/2))
	}
	failures := p.b.failures
	h.mu.Unlock()

	switch {
	case err == nil:
		h.heartbeats.Add(1)
		h.opts.Logger.Debug("reaper: heartbeat", slog.String("queue", p.url))
	case isGone:
		h.failures.Add(1)
		h.gone.Add(1)
		err = fmt.Errorf("reaper: heartbeat of %s: queue was deleted: %w", p.url, err)
		h.opts.Logger.Warn("reaper: heartbeat found the queue deleted; dropped it", slog.String("queue", p.url), slog.Any("err", err))
		if h.opts.OnQueueGone != nil {
			h.opts.OnQueueGone(p.url, err)
		}
	default:
		h.failures.Add(1)
		h.opts.Logger.Warn("reaper: heartbeat failed; retrying with backoff", slog.String("queue", p.url), slog.Int("failures", failures), slog.Any("err", err))
	}
}
