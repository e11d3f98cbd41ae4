package reap

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"golang.org/x/sync/errgroup"

	"github.com/tempqueues/tempqueues/internal/backoff"
	"github.com/tempqueues/tempqueues/internal/heartbeat"
	"github.com/tempqueues/tempqueues/internal/wire"
	"github.com/tempqueues/tempqueues/sqsapi"
)

// listPageSize is the largest ListQueues page SQS returns. Setting
// MaxResults is also what makes SQS return a NextToken at all.
const listPageSize = 1000

// throttleRetries is how many times a sweep retries a throttled call on one
// queue before recording the error and moving on; the next sweep retries.
const throttleRetries = 3

// Sweeps and heartbeats share the account's tagging quota (about 30 calls a
// second; docs/capacity.md). A sweep reads tags at most at
// heartbeat.SweepTagRate, a third of it, leaving the rest to the fleet's
// heartbeats, which fit themselves to what is left (fleet.go). A Reaper's
// sweep reads at most sweepBudgetShare of what that rate allows in one
// period, so it ends within its period; a fleet with more queues is covered
// over several periods, each period's sweep reading the next share of it.
const (
	sweepTagBurst    = 10
	sweepBudgetShare = 0.6
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
type Sweeper struct {
	client sqsapi.Client
	opts   Config
	hostRE *regexp.Regexp
	// skip reports queues the calling process owns: alive by definition, so
	// their tags are not read. Nil for a standalone Sweeper.
	skip func(name string) bool
	// budgeted: a Reaper's lease sweep, which inspects a bounded slice of
	// the queues per period.
	budgeted bool
	// throttles records the tagging calls SQS throttled in this process;
	// shared with the Reaper's heartbeats.
	throttles throttleLog
	pace      *pacer
	// reads and readThrottles count this sweep's ListQueueTags attempts
	// and how many SQS throttled: the account's saturation, as the sweep
	// sees it (reset by each Sweep).
	reads, readThrottles atomic.Int64
}

// throttleLog is where a process notes throttled tagging calls. A throttle
// after a queue's last heartbeat means its owner's heartbeat may merely
// have been throttled, and earns the queue a grace period.
type throttleLog interface {
	LastThrottle() time.Time
	NoteThrottle(at time.Time)
}

// ownThrottles is the throttleLog of a standalone Sweeper.
type ownThrottles struct{ last atomic.Int64 }

func (o *ownThrottles) LastThrottle() time.Time {
	if n := o.last.Load(); n != 0 {
		return time.Unix(0, n)
	}
	return time.Time{}
}

func (o *ownThrottles) NoteThrottle(at time.Time) {
	n := at.UnixNano()
	for {
		old := o.last.Load()
		if old >= n || o.last.CompareAndSwap(old, n) {
			return
		}
	}
}

// pacer spaces calls to a rate, allowing a small burst.
type pacer struct {
	mu    sync.Mutex
	every time.Duration
	burst int
	next  time.Time
}

func newPacer(rate float64, burst int) *pacer {
	return &pacer{every: time.Duration(float64(time.Second) / rate), burst: burst}
}

// wait blocks until the next call may go, or ctx ends.
func (p *pacer) wait(ctx context.Context) error {
	p.mu.Lock()
	now := time.Now()
	if floor := now.Add(-time.Duration(p.burst) * p.every); p.next.Before(floor) {
		p.next = floor
	}
	at := p.next
	p.next = p.next.Add(p.every)
	p.mu.Unlock()
	return backoff.Sleep(ctx, time.Until(at))
}

// NewSweeper returns a Sweeper. It makes no API call and starts no
// goroutine; Options.DisableSweeping and Observer do not apply
// to it.
func NewSweeper(client sqsapi.Client, optFns ...func(*Config)) (*Sweeper, error) {
	if err := wire.CheckClient("reaper.NewSweeper", "client", client); err != nil {
		return nil, err
	}
	o, err := buildOptions("reaper.NewSweeper", optFns)
	if err != nil {
		return nil, err
	}
	return newSweeper(client, o, nil, nil), nil
}

// newSweeper returns a Sweeper; a Reaper passes skip (its own queues) and
// its heartbeats' throttle log, which also makes its sweeps budgeted.
func newSweeper(client sqsapi.Client, o Config, skip func(string) bool, throttles throttleLog) *Sweeper {
	const hex = `[0-9a-fA-F]`
	uuid := hex + `{8}-` + hex + `{4}-` + hex + `{4}-` + hex + `{4}-` + hex + `{12}`
	s := &Sweeper{
		client:    client,
		opts:      o,
		hostRE:    regexp.MustCompile(`^` + regexp.QuoteMeta(o.Prefix) + uuid + `-[0-9]+$`),
		skip:      skip,
		budgeted:  throttles != nil,
		throttles: throttles,
		pace:      newPacer(heartbeat.SweepTagRate, sweepTagBurst),
	}
	if s.throttles == nil {
		s.throttles = new(ownThrottles)
	}
	return s
}

// budget returns how many queues a Reaper's sweep inspects per period.
func (s *Sweeper) budget() int {
	return max(int(heartbeat.SweepTagRate*s.opts.Period.Seconds()*sweepBudgetShare), 1)
}

// slice returns the candidates a budgeted sweep inspects in the period of
// now: all of them when they fit the budget, else one of k =
// ceil(candidates/budget) shares, chosen by a hash of each queue's name,
// the share of period number p being p mod k. Periods are counted from a
// fixed origin, as the lease's are, so whichever process sweeps next takes
// the next share without shared state, and the whole fleet is covered
// every k periods; queues created or deleted meanwhile move no other
// queue to another share (k changes only when the fleet crosses a
// multiple of the budget).
func (s *Sweeper) slice(cands []string, now time.Time) []string {
	n, b := len(cands), s.budget()
	if !s.budgeted || n <= b {
		return cands
	}
	k := uint64((n + b - 1) / b)
	share := uint64(now.UnixNano()/int64(s.opts.Period)) % k
	out := make([]string, 0, b)
	for _, u := range cands {
		h := fnv.New64a()
		_, _ = h.Write([]byte(queueName(u)))
		if h.Sum64()%k == share {
			out = append(out, u)
		}
	}
	return out
}

// isHostQueue reports whether name has the form of a requester host
// queue, <prefix><36-character UUID>-<n>.
func (s *Sweeper) isHostQueue(name string) bool {
	return s.hostRE.MatchString(name)
}

// Tally is the record of one sweep, by outcome: the log prints it whole,
// and each face sums it into the reaper.Report its users read.
type Tally struct {
	Listed   int           // queues ListQueues returned for the prefix
	Deleted  []string      // queues deleted (with DryRun, that would have been)
	Errors   []error       // one per queue that could not be inspected or deleted
	Outcomes Outcomes      // what became of the other queues
	Calls    int           // API calls, retries included
	Duration time.Duration // from the first call to the last

	fleet int // queues listed, less the lease and Java sweeper queues
}

// Outcomes count the queues a sweep neither deleted nor failed on, by why.
type Outcomes struct {
	Skipped      int // the coordination queue, Java sweeper queues, own queues
	Candidates   int // queues whose tags were read
	NotTemporary int // no RetentionTag
	Live         int // heartbeat younger than the retention
	Future       int // heartbeat in the future: clock skew, kept
	NotEmpty     int // idle, not a requester host queue, holds messages
	Vanished     int // deleted by someone else during the sweep
	Grace        int // idle by the rule, kept: tagging was throttled since its heartbeat
	Deferred     int // left for the next periods' sweeps (budget)
}

// Kept is the number of queues inspected, or left for later, and kept in
// place: what reaper.Report.Kept says.
func (t Tally) Kept() int {
	o := t.Outcomes
	return o.NotTemporary + o.Live + o.Future + o.NotEmpty + o.Grace + o.Deferred
}

// queueError is the error of one queue in a sweep.
func queueError(queueURL, op string, err error) error {
	return fmt.Errorf("reaper: sweep %s: %s: %w", queueURL, op, err)
}

// ErrBadTag is wrapped by the error of a queue whose RetentionTag or
// HeartbeatTag is not a decimal integer; such a queue is kept.
var ErrBadTag = errors.New("reaper: malformed tag")

// outcome is the verdict on one inspected queue.
type outcome int

const (
	outError outcome = iota
	outNotTemporary
	outLive
	outFuture
	outNotEmpty
	outDeleted
	outVanished
	outGrace
)

// Sweep lists the queues with the prefix (every page), inspects each one
// that might be temporary and deletes the idle ones. It costs one
// ListQueues per 1,000 queues, one ListQueueTags per inspected queue, one
// GetQueueAttributes per idle queue that is not a requester host queue, and
// one DeleteQueue per deleted queue.
//
// Per-queue failures go to Tally.Errors and do not stop the sweep; Sweep
// returns an error only when listing failed or ctx ended, together with the
// tally of what was done so far.
func (s *Sweeper) Sweep(ctx context.Context) (Tally, error) {
	start := s.opts.Clock.Now()
	var rep Tally
	var calls atomic.Int64
	s.reads.Store(0)
	s.readThrottles.Store(0)

	urls, err := s.list(ctx, &calls)
	rep.Listed = len(urls)
	if err != nil {
		rep.Calls = int(calls.Load())
		rep.Duration = s.opts.Clock.Since(start)
		return rep, fmt.Errorf("reaper: sweep: ListQueues: %w", err)
	}

	var mu sync.Mutex // guards rep below
	d := &rep.Outcomes
	var cands []string
	rep.fleet = len(urls)
	for _, u := range urls {
		name := queueName(u)
		reserved := s.reserved(name)
		if reserved {
			rep.fleet--
		}
		if reserved || (s.skip != nil && s.skip(name)) {
			d.Skipped++
			continue
		}
		cands = append(cands, u)
	}
	picked := s.slice(cands, start)
	d.Deferred = len(cands) - len(picked)
	if s.budgeted {
		// A sweep cut short by its period's end leaves the rest of its share
		// to the share's next turn: in listing (name) order that would
		// always be the same queues, so a dead one among them could wait
		// cycle after cycle.
		for i := len(picked) - 1; i > 0; i-- {
			j := int(s.opts.Clock.Int64N(int64(i + 1)))
			picked[i], picked[j] = picked[j], picked[i]
		}
	}
	var demand float64 // heartbeats a second the inspected queues need
	// A lease sweep stops starting inspections when its period ends, half a
	// lease margin before the holder would extend its token: a sweep that
	// ran into the next window would hold the lease through it, and the
	// fleet would skip that period's sweep.
	deadline := start.Truncate(s.opts.Period).Add(s.opts.Period)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(sweepConcurrency)
	for i, u := range picked {
		if s.budgeted && s.opts.Clock.Now().After(deadline) {
			d.Deferred += len(picked) - i
			break
		}
		name := queueName(u)
		d.Candidates++
		g.Go(func() error {
			out, retention, qerr := s.inspect(gctx, u, name, &calls)
			mu.Lock()
			defer mu.Unlock()
			if retention > 0 && out != outDeleted {
				demand += 1 / (retention.Seconds() * heartbeat.DefaultFraction)
			}
			switch out {
			case outNotTemporary:
				d.NotTemporary++
			case outLive:
				d.Live++
			case outGrace:
				d.Grace++
			case outFuture:
				d.Future++
			case outNotEmpty:
				d.NotEmpty++
			case outDeleted:
				rep.Deleted = append(rep.Deleted, u)
			case outVanished:
				d.Vanished++
			case outError:
				rep.Errors = append(rep.Errors, qerr)
			}
			return nil // one queue's failure never stops the sweep
		})
	}
	_ = g.Wait()
	rep.Calls = int(calls.Load())
	rep.Duration = s.opts.Clock.Since(start)
	if err := ctx.Err(); err != nil {
		return rep, fmt.Errorf("reaper: sweep interrupted: %w", err)
	}
	s.checkCapacity(demand, len(picked), len(cands))
	s.opts.Logger.Info("reaper: swept",
		slog.String("prefix", s.opts.Prefix), slog.Bool("dry_run", s.opts.DryRun),
		slog.Int("listed", rep.Listed), slog.Int("skipped", d.Skipped), slog.Int("candidates", d.Candidates),
		slog.Int("kept", rep.Kept()), slog.Int("live", d.Live), slog.Int("not_temporary", d.NotTemporary),
		slog.Int("not_empty", d.NotEmpty), slog.Int("future_heartbeat", d.Future),
		slog.Int("deleted", len(rep.Deleted)), slog.Int("vanished", d.Vanished), slog.Int("errors", len(rep.Errors)),
		slog.Int("grace", d.Grace), slog.Int("deferred", d.Deferred),
		slog.Int("calls", rep.Calls), slog.Duration("took", rep.Duration))
	return rep, nil
}

// reserved reports the queues under the prefix that are never temporary:
// the lease queue and the Java sweeper's work queue and dead-letter queue.
// Skipping them by name saves a ListQueueTags each per sweep.
func (s *Sweeper) reserved(name string) bool { return reservedName(s.opts.Prefix, name) }

func reservedName(prefix, name string) bool {
	return name == prefix+coordinationSuffix || name == prefix || name == prefix+"_DLQ"
}

// list returns every queue URL with the prefix, following NextToken.
func (s *Sweeper) list(ctx context.Context, calls *atomic.Int64) ([]string, error) {
	var urls []string
	in := &sqs.ListQueuesInput{QueueNamePrefix: aws.String(s.opts.Prefix), MaxResults: aws.Int32(listPageSize)}
	for {
		var out *sqs.ListQueuesOutput
		err := s.call(ctx, calls, func(ctx context.Context) (err error) {
			out, err = s.client.ListQueues(ctx, in)
			return err
		})
		if err != nil {
			return urls, err
		}
		urls = append(urls, out.QueueUrls...)
		if out.NextToken == nil || *out.NextToken == "" {
			return urls, nil
		}
		in.NextToken = out.NextToken
	}
}

// checkCapacity warns when the heartbeats of the fleet, estimated from the
// retentions of the queues inspected, and the sweeps do not fit the
// account's tagging quota. Reapers fit their retentions to the fleet, so
// this means processes that do not count it (DisableSweeping, another
// version) or a fleet past what MaxRaise allows: the operator should raise
// IdleQueueRetention.
func (s *Sweeper) checkCapacity(demand float64, inspected, candidates int) {
	if inspected == 0 {
		return
	}
	period := s.opts.Period
	perSecond := demand * float64(candidates) / float64(inspected)
	if perSecond+heartbeat.SweepRate(candidates, period) <= heartbeat.TaggingQuota*heartbeat.QuotaHeadroom {
		return
	}
	s.opts.Logger.Warn("reaper: the fleet's heartbeats do not fit the account's tagging quota; some are throttled: raise IdleQueueRetention",
		slog.Int("queues", candidates), slog.Float64("heartbeats_per_second", perSecond),
		slog.Float64("quota_per_second", heartbeat.TaggingQuota),
		slog.Duration("recommended_retention", heartbeat.Need(candidates, period).Round(time.Minute)))
}

// inspect applies the idle rule to one queue and deletes it when idle. It
// also returns the queue's retention tag (0 when absent or unread).
func (s *Sweeper) inspect(ctx context.Context, u, name string, calls *atomic.Int64) (outcome, time.Duration, error) {
	tags, err := s.listTags(ctx, calls, u)
	if err != nil {
		out, err := s.failed(u, "ListQueueTags", err)
		return out, 0, err
	}
	now := s.opts.Clock.Now()
	verdict, retention, heartbeat, err := Idle(tags, now)
	if err != nil {
		return outError, 0, queueError(u, "idle rule", err)
	}
	out := idle(verdict)
	if out == outDeleted && s.grace(retention, heartbeat, now) {
		return outGrace, retention, nil
	}
	out, err = s.deleteIdle(ctx, u, name, out, calls)
	return out, retention, err
}

// grace reports whether an idle queue is kept because its owner's
// heartbeats may merely have been throttled: the account is saturated (of
// this sweep's tag reads so far, at least graceMinReads were made and one
// in graceThrottleShare or more was throttled; a passing burst throttles
// fewer), tagging was throttled after the queue's last heartbeat, and the
// heartbeat is not yet twice the retention old. A queue of a dead process
// is thus deleted at the latest after two retentions, even while the
// account throttles.
func (s *Sweeper) grace(retention time.Duration, heartbeat, now time.Time) bool {
	if heartbeat.IsZero() || now.Sub(heartbeat) > 2*retention {
		return false
	}
	thr, reads := s.readThrottles.Load(), s.reads.Load()
	if reads < graceMinReads || thr*graceThrottleShare < reads {
		return false
	}
	return s.throttles.LastThrottle().After(heartbeat)
}

// graceThrottleShare: grace applies while at least one in this many of a
// sweep's tag reads is throttled, once graceMinReads reads have been made
// (a single throttled read is a burst, not a saturated account).
const (
	graceThrottleShare = 20
	graceMinReads      = 40
)

// listTags reads a queue's tags at the sweep's pace.
func (s *Sweeper) listTags(ctx context.Context, calls *atomic.Int64, u string) (map[string]string, error) {
	var tags *sqs.ListQueueTagsOutput
	err := s.call(ctx, calls, func(ctx context.Context) (err error) {
		if err := s.pace.wait(ctx); err != nil {
			return err
		}
		s.reads.Add(1)
		tags, err = s.client.ListQueueTags(ctx, &sqs.ListQueueTagsInput{QueueUrl: aws.String(u)})
		if err != nil && isThrottle(err) {
			s.readThrottles.Add(1)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return tags.Tags, nil
}

// deleteIdle deletes a queue the idle rule judged idle (out is
// outDeleted), after checking it is empty unless it is a requester host
// queue.
func (s *Sweeper) deleteIdle(ctx context.Context, u, name string, out outcome, calls *atomic.Int64) (outcome, error) {
	if out != outDeleted {
		return out, nil
	}

	if !s.isHostQueue(name) {
		// Not ours to judge: a queue made by the Java auto-temporary client
		// or by hand may hold messages somebody still wants.
		var attrs *sqs.GetQueueAttributesOutput
		err := s.call(ctx, calls, func(ctx context.Context) (err error) {
			attrs, err = s.client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
				QueueUrl: aws.String(u),
				AttributeNames: []types.QueueAttributeName{
					types.QueueAttributeNameApproximateNumberOfMessages,
					types.QueueAttributeNameApproximateNumberOfMessagesNotVisible,
					types.QueueAttributeNameApproximateNumberOfMessagesDelayed,
				},
			})
			return err
		})
		if err != nil {
			return s.failed(u, "GetQueueAttributes", err)
		}
		for _, k := range []types.QueueAttributeName{
			types.QueueAttributeNameApproximateNumberOfMessages,
			types.QueueAttributeNameApproximateNumberOfMessagesNotVisible,
			types.QueueAttributeNameApproximateNumberOfMessagesDelayed,
		} {
			if n, ok := attrs.Attributes[string(k)]; !ok || n != "0" {
				// A missing count is treated as "not empty": never delete
				// on a guess.
				return outNotEmpty, nil
			}
		}
	}

	if s.opts.DryRun {
		s.opts.Logger.Info("reaper: would delete idle queue (dry run)", slog.String("queue", u))
		return outDeleted, nil
	}
	err := s.call(ctx, calls, func(ctx context.Context) error {
		_, err := s.client.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: aws.String(u)})
		return err
	})
	if err != nil {
		return s.failed(u, "DeleteQueue", err)
	}
	s.opts.Logger.Info("reaper: deleted idle queue", slog.String("queue", u))
	return outDeleted, nil
}

// failed classifies an API error on one queue: a queue deleted under the
// sweep is fine, anything else is recorded.
func (s *Sweeper) failed(u, op string, err error) (outcome, error) {
	var gone *types.QueueDoesNotExist
	if errors.As(err, &gone) {
		s.opts.Logger.Debug("reaper: queue vanished during the sweep", slog.String("queue", u))
		return outVanished, nil
	}
	s.opts.Logger.Warn("reaper: sweep could not handle a queue", slog.String("queue", u), slog.String("op", op), slog.Any("err", err))
	return outError, queueError(u, op, err)
}

// idle turns the idle rule's verdict on a queue (other than
// VerdictError) into outDeleted for an idle queue, or the reason to keep
// it.
func idle(verdict string) outcome {
	switch verdict {
	case VerdictNotTemporary:
		return outNotTemporary
	case VerdictFutureHeartbeat:
		return outFuture
	case VerdictIdle:
		return outDeleted
	default:
		return outLive
	}
}

// call runs one API call with the call timeout, counting it, and retries it
// a few times with jittered backoff when SQS throttles.
func (s *Sweeper) call(ctx context.Context, calls *atomic.Int64, fn func(context.Context) error) error {
	policy := backoff.Policy{Base: 200 * time.Millisecond, Cap: 5 * time.Second, Rand: s.opts.Clock.Int64N}
	for attempt := 0; ; attempt++ {
		calls.Add(1)
		callCtx, cancel := context.WithTimeout(ctx, callTimeout)
		err := fn(callCtx)
		cancel()
		if err == nil || attempt >= throttleRetries || !isThrottle(err) {
			return err
		}
		s.throttles.NoteThrottle(s.opts.Clock.Now())
		if err := backoff.Sleep(ctx, max(policy.Delay(attempt), policy.Base/2)); err != nil {
			return err
		}
	}
}

// isThrottle reports SQS throttling, by type or by the SDK's list of
// throttling error codes.
func isThrottle(err error) bool {
	var rt *types.RequestThrottled
	if errors.As(err, &rt) {
		return true
	}
	return retry.IsErrorThrottles(retry.DefaultThrottles).IsErrorThrottle(err).Bool()
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
