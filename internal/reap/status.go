package reap

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/tempqueues/tempqueues/internal/awserr"
	"github.com/tempqueues/tempqueues/sqsapi"
)

// The idle rule's verdicts (reaper.Verdict documents them; it adds
// "reserved" for the queues a Sweeper never inspects).
const (
	VerdictNotTemporary    = "not-temporary"
	VerdictLive            = "live"
	VerdictFutureHeartbeat = "future-heartbeat"
	VerdictIdle            = "idle"
	VerdictError           = "error"
)

// Idle applies the idle rule of sweeps, which is the Java Temporary Queue
// Client's, to a queue's tags at now: a queue is idle when it carries the
// RetentionTag and either no HeartbeatTag or a heartbeat older than the
// retention. It returns the verdict, the retention tag's value (0 when
// absent) and the heartbeat's time (zero when absent); a malformed tag
// gives VerdictError with an error wrapping ErrBadTag.
func Idle(tags map[string]string, now time.Time) (verdict string, retention time.Duration, heartbeat time.Time, err error) {
	const maxRetentionSeconds = 100 * 365 * 24 * 3600
	rs, ok := tags[sqsapi.RetentionTag]
	if !ok {
		return VerdictNotTemporary, 0, time.Time{}, nil
	}
	secs, perr := strconv.ParseInt(strings.TrimSpace(rs), 10, 64)
	// The bound keeps secs*1000 and the Duration from overflowing (a
	// wrapped product would make a live queue look idle); 100 years is
	// longer than any queue lives.
	if perr != nil || secs < 0 || secs > maxRetentionSeconds {
		return VerdictError, 0, time.Time{}, fmt.Errorf("%w: %s=%q", ErrBadTag, sqsapi.RetentionTag, rs)
	}
	retention = time.Duration(secs) * time.Second
	hs, ok := tags[sqsapi.HeartbeatTag]
	if !ok {
		return VerdictIdle, retention, time.Time{}, nil // the Java rule: retention tag but never a heartbeat
	}
	last, perr := strconv.ParseInt(strings.TrimSpace(hs), 10, 64)
	if perr != nil {
		return VerdictError, retention, time.Time{}, fmt.Errorf("%w: %s=%q", ErrBadTag, sqsapi.HeartbeatTag, hs)
	}
	heartbeat = time.UnixMilli(last)
	switch age := now.UnixMilli() - last; {
	case age < 0:
		return VerdictFutureHeartbeat, retention, heartbeat, nil
	case age > secs*1000:
		return VerdictIdle, retention, heartbeat, nil
	default:
		return VerdictLive, retention, heartbeat, nil
	}
}

// List lists the queues with the prefix (every page) and calls fn for
// each, from several goroutines at once: its URL, whether its
// name is a requester host queue's, whether it is reserved (the lease
// queue or a Java sweeper queue, whose tags are not read), and its tags,
// or why they could not be read. It deletes nothing and reads no queue
// attributes; tags are read at most 10 a second (a third of the account's
// tagging quota, as sweeps do). A queue deleted meanwhile is left out.
// reaper.Sweeper.Queues applies Idle to what it lists, at Now.
func (s *Sweeper) List(ctx context.Context, fn func(url string, hostQueue, reserved bool, tags map[string]string, err error)) error {
	var calls atomic.Int64
	urls, err := s.list(ctx, &calls)
	if err != nil {
		return fmt.Errorf("reaper: ListQueues: %w", err)
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(sweepConcurrency)
	for _, u := range urls {
		name := queueName(u)
		host := s.isHostQueue(name)
		if s.reserved(name) {
			fn(u, host, true, nil, nil)
			continue
		}
		g.Go(func() error {
			tags, err := s.listTags(gctx, &calls, u)
			switch {
			case awserr.IsQueueDoesNotExist(err):
			case err != nil:
				fn(u, host, false, nil, queueError(u, "ListQueueTags", err))
			default:
				fn(u, host, false, tags, nil)
			}
			return nil
		})
	}
	_ = g.Wait()
	return ctx.Err()
}

// Now is the time of the Sweeper's clock, at which the idle rule judges.
func (s *Sweeper) Now() time.Time { return s.opts.Clock.Now() }
