package reap

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/tempqueues/tempqueues/internal/awserr"
	"github.com/tempqueues/tempqueues/sqsapi"
)

// Verdict is the idle rule's verdict on a queue.
type Verdict string

// Verdicts of the idle rule. A sweep deletes VerdictIdle queues (a queue
// that is not a requester host queue only when it is empty) and keeps every
// other one.
const (
	// VerdictNotTemporary: no RetentionTag; never swept.
	VerdictNotTemporary Verdict = "not-temporary"
	// VerdictLive: heartbeat younger than the retention.
	VerdictLive Verdict = "live"
	// VerdictFutureHeartbeat: heartbeat in the future (clock skew); kept.
	VerdictFutureHeartbeat Verdict = "future-heartbeat"
	// VerdictIdle: RetentionTag and no heartbeat, or one older than the
	// retention.
	VerdictIdle Verdict = "idle"
	// VerdictReserved: the coordination queue or a Java sweeper queue,
	// never inspected or swept.
	VerdictReserved Verdict = "reserved"
	// VerdictError: the tags could not be read or are malformed
	// (QueueStatus.Err says which); kept.
	VerdictError Verdict = "error"
)

// QueueStatus is one queue as the idle rule sees it.
type QueueStatus struct {
	// QueueURL and Name identify the queue; IdleStatus leaves them empty.
	QueueURL string
	Name     string
	// RequesterHostQueue reports the name form <prefix><uuid>-<n>: such a
	// queue is deleted when idle even if it holds messages; any other idle
	// queue only when empty.
	RequesterHostQueue bool
	// Retention is the RetentionTag's value, 0 when the tag is absent.
	Retention time.Duration
	// Heartbeat is the HeartbeatTag's time, zero when the tag is absent.
	Heartbeat time.Time
	// Verdict is the rule's verdict at the time of the call.
	Verdict Verdict
	// Err says why, with VerdictError: the tags could not be read, or one
	// is malformed (wrapping ErrBadTag).
	Err error
}

// IdleStatus applies the idle rule of sweeps, which is the Java Temporary
// Queue Client's, to a queue's tags at now: a queue is idle when it carries
// the RetentionTag and either no HeartbeatTag or a heartbeat older than the
// retention. A malformed tag gives VerdictError with an Err wrapping
// ErrBadTag.
func IdleStatus(tags map[string]string, now time.Time) QueueStatus {
	const maxRetentionSeconds = 100 * 365 * 24 * 3600
	rs, ok := tags[sqsapi.RetentionTag]
	if !ok {
		return QueueStatus{Verdict: VerdictNotTemporary}
	}
	retention, err := strconv.ParseInt(strings.TrimSpace(rs), 10, 64)
	// The bound keeps retention*1000 and the Duration from overflowing (a
	// wrapped product would make a live queue look idle); 100 years is
	// longer than any queue lives.
	if err != nil || retention < 0 || retention > maxRetentionSeconds {
		return QueueStatus{Verdict: VerdictError, Err: fmt.Errorf("%w: %s=%q", ErrBadTag, sqsapi.RetentionTag, rs)}
	}
	st := QueueStatus{Retention: time.Duration(retention) * time.Second}
	hs, ok := tags[sqsapi.HeartbeatTag]
	if !ok {
		st.Verdict = VerdictIdle // the Java rule: retention tag but never a heartbeat
		return st
	}
	last, err := strconv.ParseInt(strings.TrimSpace(hs), 10, 64)
	if err != nil {
		st.Verdict, st.Err = VerdictError, fmt.Errorf("%w: %s=%q", ErrBadTag, sqsapi.HeartbeatTag, hs)
		return st
	}
	st.Heartbeat = time.UnixMilli(last)
	age := now.UnixMilli() - last
	switch {
	case age < 0:
		st.Verdict = VerdictFutureHeartbeat
	case age > retention*1000:
		st.Verdict = VerdictIdle
	default:
		st.Verdict = VerdictLive
	}
	return st
}

// Queues lists the queues with the prefix (every page) and applies the idle
// rule to each one's tags, as Sweep would, without deleting anything or
// reading queue attributes. It costs one ListQueues per 1,000 queues and one
// ListQueueTags per queue that is not reserved, read at most 10 a second
// (a third of the account's tagging quota, as sweeps do). The result is sorted by
// name; a queue deleted meanwhile is left out.
func (s *Sweeper) Queues(ctx context.Context) ([]QueueStatus, error) {
	var calls atomic.Int64
	urls, err := s.list(ctx, &calls)
	if err != nil {
		return nil, fmt.Errorf("reaper: ListQueues: %w", err)
	}
	now := s.opts.Clock.Now()
	var (
		mu  sync.Mutex
		out []QueueStatus
	)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(sweepConcurrency)
	for _, u := range urls {
		name := queueName(u)
		q := QueueStatus{QueueURL: u, Name: name, RequesterHostQueue: s.isHostQueue(name)}
		if s.reserved(name) {
			q.Verdict = VerdictReserved
			mu.Lock()
			out = append(out, q)
			mu.Unlock()
			continue
		}
		g.Go(func() error {
			tags, err := s.listTags(gctx, &calls, u)
			switch {
			case awserr.IsQueueDoesNotExist(err):
				return nil
			case err != nil:
				q.Verdict, q.Err = VerdictError, queueError(u, "ListQueueTags", err)
			default:
				st := IdleStatus(tags, now)
				q.Retention, q.Heartbeat, q.Verdict, q.Err = st.Retention, st.Heartbeat, st.Verdict, st.Err
			}
			mu.Lock()
			out = append(out, q)
			mu.Unlock()
			return nil
		})
	}
	_ = g.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b QueueStatus) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}
