package reaper

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tempqueues/tempqueues/internal/reap"
	"github.com/tempqueues/tempqueues/sqsapi"
)

// Sweeper deletes idle temporary queues whose name starts with the prefix.
// A queue is idle, exactly as in the Java client, when it carries the
// RetentionTag and either has no HeartbeatTag or a heartbeat older than the
// retention. An idle requester host queue (named <prefix><uuid>-<n>) is
// deleted even when it holds messages: they are replies nobody can read any
// more. Any other idle queue is deleted only when GetQueueAttributes counts
// no visible, in-flight or delayed message.
//
// A Sweeper never touches queues without the RetentionTag, queues whose
// heartbeat is in the future, the coordination queue <prefix>sweeper.fifo, or
// the Java client's sweeper queues <prefix> and <prefix>_DLQ.
//
// Clock skew: a heartbeat is compared with the sweeping process's clock, so
// clocks must agree to well within the retention minus the heartbeat
// interval (200 s at the defaults); NTP-synchronized hosts do. A heartbeat
// in the future means a skewed clock and the queue is kept.
//
// A Reaper runs sweeps under a fleet-wide lease; use a Sweeper directly for
// one-off sweeps (an operator's command, a test).
type Sweeper struct{ s *reap.Sweeper }

// NewSweeper returns a Sweeper. It makes no API call and starts no
// goroutine.
func NewSweeper(client sqsapi.Client, optFns ...func(*SweeperOptions)) (*Sweeper, error) {
	var o SweeperOptions
	for _, fn := range optFns {
		if fn != nil {
			fn(&o)
		}
	}
	s, err := reap.NewSweeper(client, func(c *reap.Config) {
		c.Prefix, c.Period, c.DryRun, c.Logger = o.Prefix, o.Period, o.DryRun, o.Logger
	})
	if err != nil {
		return nil, err
	}
	return &Sweeper{s}, nil
}

// Sweep lists the queues with the prefix (every page), inspects each one
// that might be temporary and deletes the idle ones. It costs one
// ListQueues per 1,000 queues, one ListQueueTags per inspected queue, one
// GetQueueAttributes per idle queue that is not a requester host queue, and
// one DeleteQueue per deleted queue.
//
// Per-queue failures go to Report.Errors and do not stop the sweep; Sweep
// returns an error only when listing failed or ctx ended, together with the
// report of what was done so far.
func (s *Sweeper) Sweep(ctx context.Context) (Report, error) {
	t, err := s.s.Sweep(ctx)
	return report(t), err
}

// Queues lists the queues with the prefix (every page) and applies the idle
// rule to each one's tags, as Sweep would, without deleting anything or
// reading queue attributes. It costs one ListQueues per 1,000 queues and one
// ListQueueTags per queue that is not reserved, read at most 10 a second
// (a third of the account's tagging quota, as sweeps do). The result is sorted by
// name (by URL, which differs only in the name); a queue deleted meanwhile is
// left out.
func (s *Sweeper) Queues(ctx context.Context) ([]QueueStatus, error) {
	var (
		mu  sync.Mutex
		out []QueueStatus
	)
	now := s.s.Now()
	err := s.s.List(ctx, func(url string, hostQueue, reserved bool, tags map[string]string, err error) {
		q := QueueStatus{QueueURL: url, RequesterHostQueue: hostQueue}
		switch {
		case reserved:
			q.Verdict = VerdictReserved
		case err != nil:
			q.Verdict, q.Err = VerdictError, err
		default:
			var v string
			v, q.Retention, q.Heartbeat, q.Err = reap.Idle(tags, now)
			q.Verdict = Verdict(v)
		}
		mu.Lock()
		out = append(out, q)
		mu.Unlock()
	})
	if err != nil {
		return nil, err
	}
	// The URLs of one account's queues differ only in the name.
	slices.SortFunc(out, func(a, b QueueStatus) int { return strings.Compare(a.QueueURL, b.QueueURL) })
	return out, nil
}

// Report tells what one sweep did. Every listed queue is either kept,
// deleted, the subject of an error, or was skipped or vanished during the
// sweep.
type Report struct {
	// Listed is the number of queues ListQueues returned for the prefix.
	Listed int
	// Kept is the number of queues inspected and left in place: not
	// temporary, live, heartbeat in the future (clock skew), or idle but
	// holding messages and not a requester host queue.
	Kept int
	// Deleted lists the URLs of the queues deleted; with DryRun,
	// of the queues that would have been deleted.
	Deleted []string
	// Errors holds one error per queue that could not be inspected or
	// deleted, naming the queue and wrapping the cause (the API error, or
	// a malformed tag); the sweep went on with the others.
	Errors []error
}

// report sums a sweep's tally into what users read.
func report(t reap.Tally) Report {
	return Report{Listed: t.Listed, Kept: t.Kept(), Deleted: t.Deleted, Errors: t.Errors}
}

// Verdict is the idle rule's verdict on a queue.
type Verdict string

// Verdicts of the idle rule. A sweep deletes VerdictIdle queues (a queue
// that is not a requester host queue only when it is empty) and keeps every
// other one.
const (
	// VerdictNotTemporary: no RetentionTag; never swept.
	VerdictNotTemporary Verdict = Verdict(reap.VerdictNotTemporary)
	// VerdictLive: heartbeat younger than the retention.
	VerdictLive Verdict = Verdict(reap.VerdictLive)
	// VerdictFutureHeartbeat: heartbeat in the future (clock skew); kept.
	VerdictFutureHeartbeat Verdict = Verdict(reap.VerdictFutureHeartbeat)
	// VerdictIdle: RetentionTag and no heartbeat, or one older than the
	// retention.
	VerdictIdle Verdict = Verdict(reap.VerdictIdle)
	// VerdictReserved: the coordination queue or a Java sweeper queue,
	// never inspected or swept.
	VerdictReserved Verdict = "reserved"
	// VerdictError: the tags could not be read or are malformed
	// (QueueStatus.Err says which); kept.
	VerdictError Verdict = Verdict(reap.VerdictError)
)

// QueueStatus is one queue as the idle rule sees it.
type QueueStatus struct {
	// QueueURL identifies the queue; its last path segment is the name.
	QueueURL string
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
	// is malformed.
	Err error
}

// LeaseQueueName returns the name of the FIFO queue that holds the sweeper
// lease of the fleet whose queues start with prefix ("" means
// sqsapi.DefaultQueuePrefix, as in Options). Tools that show a fleet (tempq
// console) use it to find the lease.
func LeaseQueueName(prefix string) string { return reap.LeaseQueueName(prefix) }

// NextSweepWindow returns when the next lease window after now opens for a
// fleet that sweeps every period (0 means the default, 5 minutes): the
// earliest moment a process can take the lease and sweep. The sweep starts
// within the window, whose length is a tenth of the period, between 1 s
// and 30 s. Every process computes the same windows from its own clock.
func NextSweepWindow(now time.Time, period time.Duration) time.Time {
	return reap.NextSweepWindow(now, period)
}
