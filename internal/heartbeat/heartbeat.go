// Package heartbeat keeps the heartbeat tags of live temporary queues
// fresh, so that no sweeper of the fleet (Go or Java) deletes them. The
// reaper and the host-queue lifecycle share it; it is internal so that the
// public packages need not export it.
//
// A queue is live while its RetentionTag (__IdleQueueRetentionPeriodSeconds,
// seconds) is present and its HeartbeatTag
// (__AmazonSQSIdleQueueDeletingClient.LastHeartbeatTimestamp, epoch
// milliseconds) is younger than the retention. A Heartbeater refreshes the
// HeartbeatTag only when it is older than Fraction of the retention: 36
// TagQueue calls an hour per queue at the default 300 s and 1/3, where the
// Java client tags every 5 s (720 an hour). One goroutine serves every
// queue of a Heartbeater, with jitter, and backs off with jitter on errors
// such as throttling.
//
// The tag, not local activity, is what other processes read: a live owner
// must keep heartbeating even when the queue is idle, so there is no
// "touch" that defers heartbeats on activity.
//
// # Under the account's tagging quota
//
// SQS serves about 30 tagging calls a second per account, heartbeats and
// sweeps together, so a large fleet can outgrow it (docs/capacity.md). The
// reaper counts the fleet and tells a Heartbeater the retention that fits
// it (Fit): queues keep to the smallest multiple of their configured
// retention that reaches it. Besides:
//
//   - the first heartbeat of a queue created with its tags comes at a
//     random point of its interval (after its first tenth), so a fleet
//     started at once spreads its heartbeats evenly instead of tagging in
//     waves;
//   - a throttled heartbeat is retried with backoff, sooner as the written
//     retention runs out, so it lands within the retention whenever the
//     account has any capacity left;
//   - a throttled heartbeat doubles the queue's retention (at most once per
//     heartbeat, up to MaxRaise times the configured one), written with the
//     retry in the RetentionTag, which Go and Java sweepers both read: the
//     queue then heartbeats half as often, and a fleet whose count missed
//     its size settles where its heartbeats fit the quota. A dead queue is
//     then deleted after its raised retention.
package heartbeat

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/internal/awserr"
	"github.com/tempqueues/tempqueues/internal/backoff"
	"github.com/tempqueues/tempqueues/internal/callbound"
	"github.com/tempqueues/tempqueues/internal/clock"
	"github.com/tempqueues/tempqueues/internal/lifecycle"
	"github.com/tempqueues/tempqueues/internal/wire"
	"github.com/tempqueues/tempqueues/sqsapi"
)

const (
	// DefaultFraction is the default share of a queue's retention after
	// which its heartbeat tag is refreshed: at the default 300 s retention,
	// one TagQueue every 100 s.
	DefaultFraction = 1.0 / 3
	// MaxFraction is the largest accepted Fraction. Above it too little of
	// the retention is left for retries after throttling and for clock
	// skew between the heartbeating and the sweeping process.
	MaxFraction = 0.5
	// DefaultCallTimeout bounds each TagQueue call, so a hung connection
	// cannot stall heartbeats for longer than a retry.
	DefaultCallTimeout = callbound.Timeout

	// jitter spreads the heartbeats of queues registered at the same
	// moment (±10% of the interval), so a fleet started at once does not
	// tag in bursts. It is symmetric: the average rate stays one per
	// interval.
	jitter = 0.1

	// MaxRaise bounds the retention a throttled queue raises itself to:
	// MaxRaise times the configured retention (and at most maxRetention).
	MaxRaise = 16
	// maxRetention bounds a raised retention: past a day a dead process's
	// queue lingers too long for anyone's taste.
	maxRetention = 24 * time.Hour
)

// Options configure a Heartbeater. Zero values mean the defaults.
type Options struct {
	// Logger receives warnings (throttling, deleted queues) and a debug
	// record per heartbeat. Nil means silent.
	Logger *slog.Logger
	// Fraction is the share of a queue's retention after which its
	// heartbeat tag is refreshed. Default DefaultFraction; a value outside
	// (0, MaxFraction] is replaced by the default.
	Fraction float64
	// CallTimeout bounds each TagQueue call. Default DefaultCallTimeout.
	CallTimeout time.Duration
	// OnQueueGone, if set, is called from the heartbeat goroutine when a
	// registered queue turns out to be deleted (QueueDoesNotExist). The
	// queue has been dropped already; the owner may recreate it and Add it
	// again. err matches *types.QueueDoesNotExist with errors.As. It must
	// not block for long: the heartbeats of other queues wait for it.
	OnQueueGone func(queueURL string, err error)
	// Clock reads the time for heartbeat timestamps and schedules, and
	// draws the jitter. The zero value is the real clock.
	Clock clock.Clock
}

// Tagger is the one call a Heartbeater makes. *sqs.Client and
// sqsapi.Client implement it.
type Tagger interface {
	TagQueue(ctx context.Context, params *sqs.TagQueueInput, optFns ...func(*sqs.Options)) (*sqs.TagQueueOutput, error)
}

// Heartbeater heartbeats the queues registered with Add or AddTagged. Its
// one goroutine starts on the first Add and returns when no queue is left
// or on Close, so a process with no queue has no goroutine and makes no
// call.
type Heartbeater struct {
	client Tagger
	opts   Options
	ctx    context.Context // cancelled by Close
	cancel context.CancelFunc

	mu      sync.Mutex
	queues  map[string]*beat // by queue URL
	running bool             // the goroutine is running
	closed  bool
	wg      sync.WaitGroup // the goroutine
	wake    chan struct{}  // buffered 1: registration changed

	// need is the retention the fleet needs its queues to keep to (Fit),
	// set at fitAt; zero before the first Fit.
	need  time.Duration
	fitAt time.Time

	stopper lifecycle.Once

	heartbeats, failures, gone, throttled, raises atomic.Int64
	lastThrottle                                  atomic.Int64 // UnixNano of the last throttled call; 0 if none
}

// beat is the schedule of one registered queue. The goroutine updates it
// under Heartbeater.mu.
type beat struct {
	url       string
	retention time.Duration // as configured
	// effective is the retention heartbeats keep to: retention, or more
	// after throttling; the next successful call writes it when
	// tagRetention is set.
	effective time.Duration
	// written is the RetentionTag's value and last the HeartbeatTag's, as
	// this process last wrote them (zero before the first write): the
	// deadline sweepers judge the queue by is last + written.
	written time.Duration
	last    time.Time
	// tagRetention: the RetentionTag must be (re)written.
	tagRetention bool
	// raised: effective was raised since the last successful heartbeat.
	raised   bool
	due      time.Time
	failures int // consecutive failed TagQueue calls
}

// New returns a Heartbeater that tags queues with client. It makes no call
// and starts no goroutine.
func New(client Tagger, o Options) *Heartbeater {
	if !(o.Fraction > 0 && o.Fraction <= MaxFraction) {
		o.Fraction = DefaultFraction
	}
	if o.CallTimeout <= 0 {
		o.CallTimeout = DefaultCallTimeout
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Heartbeater{
		client: client,
		opts:   o,
		ctx:    ctx,
		cancel: cancel,
		queues: make(map[string]*beat),
		wake:   make(chan struct{}, 1),
	}
}

// Tags returns the tags that mark a queue as a live temporary queue with
// the given retention, heartbeat at now: the RetentionTag in whole seconds
// and the HeartbeatTag in epoch milliseconds, exactly as the Java client
// writes them. Pass them as CreateQueueInput.Tags (AWS then also requires
// sqs:TagQueue), beside any tags of the user's, and register the queue
// with AddTagged, which saves the first TagQueue call. Heartbeats write
// only these two keys and TagQueue merges, so other tags stay.
func Tags(retention time.Duration, now time.Time) map[string]string {
	return map[string]string{
		sqsapi.RetentionTag: strconv.FormatInt(int64(retention/time.Second), 10),
		sqsapi.HeartbeatTag: strconv.FormatInt(now.UnixMilli(), 10),
	}
}

// Add registers a queue with its idle retention. The goroutine writes both
// tags at once, then refreshes the HeartbeatTag every Fraction of the
// retention. Adding a registered queue again with the same retention keeps
// its schedule; with another retention both tags are rewritten. Add makes
// no call itself. It returns an error matching sqsapi.ErrInvalidInput for a
// URL without a queue name or a retention that is not whole seconds of at
// least wire.MinIdleQueueRetention, and sqsapi.ErrClosed after Close.
func (h *Heartbeater) Add(queueURL string, retention time.Duration) error {
	return h.add("heartbeat.Add", queueURL, retention, 0, time.Time{})
}

// AddTagged registers a queue created with both tags, as Tags (or
// Fitted and Tags) wrote them in CreateQueueInput.Tags: tags is that map,
// of which AddTagged reads only the RetentionTag and the HeartbeatTag. The
// queue's first TagQueue comes at a random point of one heartbeat interval
// of the written retention, after its first tenth. retention is the
// configured one, as for Add. Errors are those of Add, and invalid input
// when either tag is missing or malformed.
func (h *Heartbeater) AddTagged(queueURL string, retention time.Duration, tags map[string]string) error {
	const op = "heartbeat.AddTagged"
	written, err := strconv.ParseInt(tags[sqsapi.RetentionTag], 10, 64)
	if err != nil || written <= 0 {
		return wire.Invalid(op, "tags", "%s = %q is not a positive number of seconds", sqsapi.RetentionTag, tags[sqsapi.RetentionTag])
	}
	ms, err := strconv.ParseInt(tags[sqsapi.HeartbeatTag], 10, 64)
	if err != nil || ms <= 0 {
		return wire.Invalid(op, "tags", "%s = %q is not epoch milliseconds", sqsapi.HeartbeatTag, tags[sqsapi.HeartbeatTag])
	}
	return h.add(op, queueURL, retention, time.Duration(written)*time.Second, time.UnixMilli(ms))
}

// add registers a queue; written and taggedAt are its tags' values, or
// zero for a queue to tag at once.
func (h *Heartbeater) add(op, queueURL string, retention, written time.Duration, taggedAt time.Time) error {
	if queueName(queueURL) == "" {
		return wire.Invalid(op, "queueURL", "%q has no queue name", queueURL)
	}
	if retention < wire.MinIdleQueueRetention {
		return wire.Invalid(op, "retention", "%v is below the minimum of %v", retention, wire.MinIdleQueueRetention)
	}
	if retention%time.Second != 0 {
		return wire.Invalid(op, "retention", "%v is not a whole number of seconds (the tag holds seconds)", retention)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return sqsapi.ErrClosed
	}
	b, ok := h.queues[queueURL]
	effective := h.fittedLocked(retention)
	switch {
	case ok && b.retention == retention:
		// Already heartbeating with this retention: keep the schedule.
	case taggedAt.IsZero():
		h.queues[queueURL] = &beat{url: queueURL, retention: retention, effective: effective, tagRetention: true, due: h.opts.Clock.Now()}
	default:
		// The first heartbeat at a random point of the interval: queues
		// created together then heartbeat evenly spread, not in a wave.
		iv := h.interval(written)
		first := iv/10 + time.Duration(h.opts.Clock.Int64N(int64(iv-iv/10)+1))
		h.queues[queueURL] = &beat{url: queueURL, retention: retention, effective: effective,
			written: written, last: taggedAt, due: taggedAt.Add(first), tagRetention: effective != written}
	}
	if !h.running {
		h.running = true
		h.wg.Add(1)
		go h.loop()
	}
	h.signal()
	return nil
}

// Remove stops heartbeating a queue, e.g. before the owner deletes it. It
// makes no call; the tags stay until the queue is deleted. Removing the
// last queue ends the goroutine.
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

// Stats are counters of a Heartbeater.
type Stats struct {
	Heartbeats int64 // successful TagQueue calls
	Failures   int64 // failed TagQueue calls, each retried after a backoff
	QueuesGone int64 // registered queues found deleted and dropped
	Throttled  int64 // failed calls SQS throttled (counted in Failures too)
	Raises     int64 // retentions doubled after throttling
}

// Stats returns the Heartbeater's counters.
func (h *Heartbeater) Stats() Stats {
	return Stats{Heartbeats: h.heartbeats.Load(), Failures: h.failures.Load(), QueuesGone: h.gone.Load(),
		Throttled: h.throttled.Load(), Raises: h.raises.Load()}
}

// LastThrottle returns when a TagQueue call of this Heartbeater was last
// throttled, or the zero time. The account's tagging quota is shared, so
// a sweeper in the same process reads it as a sign that other processes'
// heartbeats may be late too.
func (h *Heartbeater) LastThrottle() time.Time {
	if n := h.lastThrottle.Load(); n != 0 {
		return time.Unix(0, n)
	}
	return time.Time{}
}

// NoteThrottle records a throttled tagging call made by someone else in
// the process (a sweep), for LastThrottle.
func (h *Heartbeater) NoteThrottle(at time.Time) {
	n := at.UnixNano()
	for {
		old := h.lastThrottle.Load()
		if old >= n || h.lastThrottle.CompareAndSwap(old, n) {
			return
		}
	}
}

// Effective returns the retention a registered queue heartbeats by now
// (the configured one, or more after throttling), and false when the
// queue is not registered.
func (h *Heartbeater) Effective(queueURL string) (time.Duration, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	b, ok := h.queues[queueURL]
	if !ok {
		return 0, false
	}
	return b.effective, true
}

// Fit sets the retention the fleet needs every queue to keep to, so that
// the fleet's heartbeats fit the account's tagging quota; the reaper
// estimates it from the fleet's size (docs/capacity.md). Each registered
// queue then heartbeats by Fitted(its configured retention), written in its
// RetentionTag with its next heartbeat. A queue lowers its retention only
// when no tagging call of the process was throttled since the previous Fit:
// a retention raised by throttling stays while the account is busy.
func (h *Heartbeater) Fit(need time.Duration) {
	type change struct {
		url      string
		from, to time.Duration
	}
	var changed []change
	h.mu.Lock()
	lt := h.LastThrottle()
	quiet := lt.IsZero() || (!h.fitAt.IsZero() && lt.Before(h.fitAt))
	h.need, h.fitAt = need, h.opts.Clock.Now()
	for _, b := range h.queues {
		f := h.fittedLocked(b.retention)
		if f > b.effective || (f < b.effective && quiet) {
			changed = append(changed, change{b.url, b.effective, f})
			b.effective = f
			b.tagRetention = b.written == 0 || f != b.written
		}
	}
	h.mu.Unlock()
	for _, c := range changed {
		h.opts.Logger.Info("heartbeat: fitting the queue's idle retention to the fleet's size",
			slog.String("queue", c.url), slog.Duration("from", c.from), slog.Duration("to", c.to))
	}
}

// Fitted returns the retention a queue configured with retention keeps to
// under the latest Fit: retention, or the smallest multiple of it that
// reaches the fleet's need, at most MaxRaise times it and a day. Tag a new
// queue with it (Tags) and register it with AddTagged.
func (h *Heartbeater) Fitted(retention time.Duration) time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.fittedLocked(retention)
}

func (h *Heartbeater) fittedLocked(retention time.Duration) time.Duration {
	if h.need <= retention || retention <= 0 {
		return retention
	}
	k := (h.need + retention - 1) / retention
	return min(k*retention, h.raiseLimit(retention))
}

// Close stops heartbeating: later Add calls return sqsapi.ErrClosed, and a
// TagQueue call in flight is cancelled. A heartbeat owes nothing, so Close
// flushes nothing; it waits until the goroutine has returned and then
// returns nil, or returns ctx's error if ctx ends first. Later calls wait
// for the first one's result (internal/lifecycle). Registered queues keep
// their tags and become idle after their retention.
func (h *Heartbeater) Close(ctx context.Context) error {
	return h.stopper.Do(ctx, func() error {
		h.mu.Lock()
		h.closed = true
		h.mu.Unlock()
		h.cancel()
		return lifecycle.Wait(ctx, &h.wg)
	})
}

func (h *Heartbeater) signal() {
	select {
	case h.wake <- struct{}{}:
	default:
	}
}

// raiseLimit is the largest retention a queue configured with retention
// raises itself to after throttling.
func (h *Heartbeater) raiseLimit(retention time.Duration) time.Duration {
	return max(retention, min(MaxRaise*retention, maxRetention))
}

// interval is the nominal time between two heartbeats of a queue.
func (h *Heartbeater) interval(retention time.Duration) time.Duration {
	return time.Duration(float64(retention) * h.opts.Fraction)
}

// retryPolicy is the backoff after failed heartbeats of a queue. Its cap is
// one interval: with Fraction at most 1/2, a queue throttled for a while
// still gets several attempts before its retention runs out, and a
// throttled account is not hammered by many queues retrying fast.
func (h *Heartbeater) retryPolicy(retention time.Duration) backoff.Policy {
	iv := h.interval(retention)
	return backoff.Policy{
		Base: min(max(iv/20, 50*time.Millisecond), 2*time.Second),
		Cap:  min(iv, time.Minute),
		Rand: h.opts.Clock.Int64N,
	}
}

// pending is a heartbeat to send, copied out of the registry so the call is
// made without holding the lock.
type pending struct {
	b            *beat
	url          string
	retention    time.Duration // effective: the one to write
	tagRetention bool
}

// loop is the heartbeat goroutine: it tags the queues that are due, then
// sleeps until the next one is due or the registry changes. It returns on
// Close, or when no queue is registered.
func (h *Heartbeater) loop() {
	defer h.wg.Done()
	ctx := h.ctx
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		due, next, ok := h.collect(h.opts.Clock.Now())
		if !ok {
			return
		}
		for _, p := range due {
			if ctx.Err() != nil {
				break
			}
			h.beatOnce(ctx, p)
		}
		if len(due) > 0 {
			continue // time has passed while tagging: look again
		}
		timer.Reset(max(h.opts.Clock.Until(next), time.Millisecond))
		select {
		case <-ctx.Done():
		case <-h.wake:
		case <-timer.C:
		}
		// Since Go 1.23 a stopped timer delivers no stale tick, so Stop is
		// enough before the next Reset.
		timer.Stop()
	}
}

// collect returns the queues due at now and the earliest future due time.
// ok is false, and the goroutine must return, when Close was called or no
// queue is registered; running is then cleared under the same lock, so a
// concurrent Add starts a new goroutine.
func (h *Heartbeater) collect(now time.Time) (due []pending, next time.Time, ok bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ctx.Err() != nil || len(h.queues) == 0 {
		h.running = false
		return nil, time.Time{}, false
	}
	for _, b := range h.queues {
		if !b.due.After(now) {
			due = append(due, pending{b: b, url: b.url, retention: b.effective, tagRetention: b.tagRetention})
			continue
		}
		if next.IsZero() || b.due.Before(next) {
			next = b.due
		}
	}
	return due, next, true
}

// jittered scales d by a random factor in [1-jitter, 1+jitter].
func (h *Heartbeater) jittered(d time.Duration) time.Duration {
	return time.Duration(float64(d) * (1 + jitter*(2*h.opts.Clock.Float64()-1)))
}

func (h *Heartbeater) beatOnce(ctx context.Context, p pending) {
	now := h.opts.Clock.Now()
	tags := map[string]string{sqsapi.HeartbeatTag: strconv.FormatInt(now.UnixMilli(), 10)}
	if p.tagRetention {
		tags[sqsapi.RetentionTag] = strconv.FormatInt(int64(p.retention/time.Second), 10)
	}
	callCtx, cancel := context.WithTimeout(ctx, h.opts.CallTimeout)
	_, err := h.client.TagQueue(callCtx, &sqs.TagQueueInput{QueueUrl: aws.String(p.url), Tags: tags})
	cancel()
	if err != nil && ctx.Err() != nil {
		return // closing: the call was cut short, not failed
	}

	var gone *types.QueueDoesNotExist
	isGone := errors.As(err, &gone)
	throttled := err != nil && !isGone && awserr.IsThrottle(err)
	if throttled {
		h.throttled.Add(1)
		h.NoteThrottle(now)
	}
	raised := false
	h.mu.Lock()
	if h.queues[p.url] != p.b {
		// Removed (or re-added) while the call ran: its new state wins.
		h.mu.Unlock()
		return
	}
	switch {
	case err == nil:
		p.b.failures = 0
		p.b.last = now
		p.b.raised = false
		if p.tagRetention {
			p.b.written = p.retention
			// Raised again meanwhile: write that with the next heartbeat.
			p.b.tagRetention = p.b.effective != p.retention
		}
		// By the written retention, which sweepers judge the queue by: a
		// larger one (raised meanwhile) is written by the next heartbeat.
		p.b.due = now.Add(h.jittered(h.interval(p.b.written)))
	case isGone:
		delete(h.queues, p.url)
	default:
		p.b.failures++
		if throttled && !p.b.raised && p.b.effective < h.raiseLimit(p.b.retention) {
			// The account is out of tagging capacity: heartbeat half as
			// often from now on, under a retention written with the retry.
			p.b.effective = min(2*p.b.effective, h.raiseLimit(p.b.retention))
			p.b.tagRetention, p.b.raised, raised = true, true, true
		}
		written := p.b.written
		if written == 0 {
			written = p.b.retention
		}
		policy := h.retryPolicy(written)
		if throttled {
			// A throttled account needs fewer calls, not more: start the
			// backoff at a tenth of the interval, so that a fleet's retries
			// do not add up to a storm.
			policy.Base = max(policy.Base, h.interval(written)/10)
		}
		// Full jitter may pick ~0; the floor keeps a persistently failing
		// queue from spinning.
		d := max(policy.Delay(p.b.failures-1), policy.Base/2)
		if !p.b.last.IsZero() {
			// Retry sooner as the written retention runs out: a few
			// attempts remain before a sweeper may judge the queue idle.
			if left := p.b.last.Add(written).Sub(h.opts.Clock.Now()); left > 0 {
				d = min(d, max(left/4, policy.Base/2))
			}
		}
		p.b.due = h.opts.Clock.Now().Add(d)
	}
	failures, effective := p.b.failures, p.b.effective
	h.mu.Unlock()
	if raised {
		h.raises.Add(1)
		h.opts.Logger.Info("heartbeat throttled: raising the queue's idle retention to fit the account's tagging quota",
			slog.String("queue", p.url), slog.Duration("retention", effective))
	}

	switch {
	case err == nil:
		h.heartbeats.Add(1)
		h.opts.Logger.Debug("heartbeat", slog.String("queue", p.url))
	case isGone:
		h.failures.Add(1)
		h.gone.Add(1)
		err = fmt.Errorf("heartbeat of %s: queue was deleted: %w", p.url, err)
		h.opts.Logger.Warn("heartbeat found the queue deleted; dropped it", slog.String("queue", p.url), slog.Any("err", err))
		if h.opts.OnQueueGone != nil {
			h.opts.OnQueueGone(p.url, err)
		}
	default:
		h.failures.Add(1)
		h.opts.Logger.Warn("heartbeat failed; retrying with backoff", slog.String("queue", p.url), slog.Int("failures", failures), slog.Any("err", err))
	}
}

// queueName returns the queue name at the end of a queue URL, or "" when
// there is none.
func queueName(queueURL string) string {
	if u, err := url.Parse(queueURL); err == nil && u.Path != "" {
		queueURL = u.Path
	}
	i := strings.LastIndexByte(queueURL, '/')
	return queueURL[i+1:]
}
