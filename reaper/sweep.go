package reaper

import (
	"context"
	"errors"
	"fmt"
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
	"github.com/tempqueues/tempqueues/sqsapi"
)

// SweepClient is what a Sweeper calls: ListQueues, ListQueueTags,
// GetQueueAttributes and DeleteQueue. *sqs.Client implements it.
type SweepClient interface {
	sqsapi.QueueAdmin
	sqsapi.Tagger
}

// listPageSize is the largest ListQueues page SQS returns. Setting
// MaxResults is also what makes SQS return a NextToken at all.
const listPageSize = 1000

// throttleRetries is how many times a sweep retries a throttled call on one
// queue before recording the error and moving on; the next sweep retries.
const throttleRetries = 3

// Sweeper deletes idle temporary queues whose name starts with the prefix.
// A queue is idle, exactly as in the Java client, when it carries the
// RetentionTag and either has no HeartbeatTag or a heartbeat older than the
// retention. An idle requester host queue (named <prefix><uuid>-<n>) is
// deleted even when it holds messages: they are replies nobody can read any
// more. Any other idle queue is deleted only when GetQueueAttributes counts
// no visible, in-flight or delayed message.
//
// A Sweeper never touches queues without the RetentionTag, queues whose
// heartbeat is in the future, the coordination queue <prefix>sweeper, or
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
	client SweepClient
	opts   Options
	hostRE *regexp.Regexp
	// skip reports queues the calling process owns: alive by definition, so
	// their tags are not read. Nil for a standalone Sweeper.
	skip func(name string) bool
}

// NewSweeper returns a Sweeper. It makes no API call.
func NewSweeper(client SweepClient, optFns ...func(*Options)) (*Sweeper, error) {
	if client == nil {
		return nil, sqsapi.Invalid("reaper.NewSweeper", "client", "must not be nil")
	}
	o, err := buildOptions("reaper.NewSweeper", optFns)
	if err != nil {
		return nil, err
	}
	return newSweeper(client, o, nil), nil
}

func newSweeper(client SweepClient, o Options, skip func(string) bool) *Sweeper {
	const hex = `[0-9a-fA-F]`
	uuid := hex + `{8}-` + hex + `{4}-` + hex + `{4}-` + hex + `{4}-` + hex + `{12}`
	return &Sweeper{
		client: client,
		opts:   o,
		hostRE: regexp.MustCompile(`^` + regexp.QuoteMeta(o.Prefix) + uuid + `-[0-9]+$`),
		skip:   skip,
	}
}

// IsRequesterHostQueue reports whether name has the form of a requester
// host queue, <prefix><36-character UUID>-<n>.
func (s *Sweeper) IsRequesterHostQueue(name string) bool {
	return s.hostRE.MatchString(name)
}

// Report tells what one sweep did. Every inspected queue is counted in
// exactly one of Kept, Deleted, Vanished and Errors.
type Report struct {
	Start    time.Time
	Duration time.Duration

	// Listed is the number of queues ListQueues returned for the prefix.
	Listed int
	// Skipped queues were not inspected: the coordination queue, the Java
	// client's sweeper queues and the calling process's own queues.
	Skipped int
	// Candidates is the number of queues whose tags were read.
	Candidates int

	// Kept is the number of candidates left in place, for one of the
	// reasons below (they add up to Kept).
	Kept            int
	NotTemporary    int // no RetentionTag
	Live            int // heartbeat younger than the retention
	FutureHeartbeat int // heartbeat in the future: clock skew, kept
	NotEmpty        int // idle but not a requester host queue, and holds messages

	// Deleted lists the URLs of the queues deleted; in a dry run, of the
	// queues that would have been deleted.
	Deleted []string
	// DryRun reports that the sweep deleted nothing (Options.DryRun).
	DryRun bool
	// Vanished counts queues deleted by someone else during the sweep.
	Vanished int
	// Errors holds one *QueueError per queue that could not be inspected or
	// deleted; the sweep went on with the others.
	Errors []error

	// Calls is the number of API calls the sweep made, retries included.
	Calls int
}

// Err joins the per-queue errors, nil when there were none.
func (r Report) Err() error { return errors.Join(r.Errors...) }

// QueueError is a failure on one queue during a sweep.
type QueueError struct {
	QueueURL string
	Op       string // the API operation that failed, or "idle rule"
	Err      error
}

func (e *QueueError) Error() string {
	return fmt.Sprintf("reaper: sweep %s: %s: %v", e.QueueURL, e.Op, e.Err)
}

func (e *QueueError) Unwrap() error { return e.Err }

// ErrBadTag is wrapped by the QueueError of a queue whose RetentionTag or
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
)

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
	rep := Report{Start: s.opts.Now(), DryRun: s.opts.DryRun}
	var calls atomic.Int64

	urls, err := s.list(ctx, &calls)
	rep.Listed = len(urls)
	if err != nil {
		rep.Calls = int(calls.Load())
		rep.Duration = s.opts.Now().Sub(rep.Start)
		return rep, fmt.Errorf("reaper: sweep: ListQueues: %w", err)
	}

	var mu sync.Mutex // guards rep below
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(s.opts.SweepConcurrency)
	for _, u := range urls {
		name := queueName(u)
		if s.reserved(name) || (s.skip != nil && s.skip(name)) {
			rep.Skipped++
			continue
		}
		rep.Candidates++
		g.Go(func() error {
			out, qerr := s.inspect(gctx, u, name, &calls)
			mu.Lock()
			defer mu.Unlock()
			switch out {
			case outNotTemporary:
				rep.NotTemporary++
			case outLive:
				rep.Live++
			case outFuture:
				rep.FutureHeartbeat++
			case outNotEmpty:
				rep.NotEmpty++
			case outDeleted:
				rep.Deleted = append(rep.Deleted, u)
			case outVanished:
				rep.Vanished++
			case outError:
				rep.Errors = append(rep.Errors, qerr)
			}
			return nil // one queue's failure never stops the sweep
		})
	}
	_ = g.Wait()
	rep.Kept = rep.NotTemporary + rep.Live + rep.FutureHeartbeat + rep.NotEmpty
	rep.Calls = int(calls.Load())
	rep.Duration = s.opts.Now().Sub(rep.Start)
	if err := ctx.Err(); err != nil {
		return rep, fmt.Errorf("reaper: sweep interrupted: %w", err)
	}
	s.opts.Logger.Info("reaper: swept",
		slog.String("prefix", s.opts.Prefix), slog.Int("listed", rep.Listed), slog.Int("candidates", rep.Candidates),
		slog.Int("kept", rep.Kept), slog.Int("deleted", len(rep.Deleted)), slog.Int("errors", len(rep.Errors)),
		slog.Int("calls", rep.Calls), slog.Duration("took", rep.Duration))
	return rep, nil
}

// reserved reports the queues under the prefix that are never temporary:
// the lease queue and the Java sweeper's work queue and dead-letter queue.
// Skipping them by name saves a ListQueueTags each per sweep.
func (s *Sweeper) reserved(name string) bool {
	p := s.opts.Prefix
	return name == p+CoordinationQueueSuffix || name == p || name == p+"_DLQ"
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

// inspect applies the idle rule to one queue and deletes it when idle.
func (s *Sweeper) inspect(ctx context.Context, u, name string, calls *atomic.Int64) (outcome, error) {
	var tags *sqs.ListQueueTagsOutput
	err := s.call(ctx, calls, func(ctx context.Context) (err error) {
		tags, err = s.client.ListQueueTags(ctx, &sqs.ListQueueTagsInput{QueueUrl: aws.String(u)})
		return err
	})
	if err != nil {
		return s.failed(u, "ListQueueTags", err)
	}
	out, err := idle(tags.Tags, s.opts.Now())
	if err != nil {
		return outError, &QueueError{QueueURL: u, Op: "idle rule", Err: err}
	}
	if out != outDeleted {
		return out, nil
	}

	if !s.IsRequesterHostQueue(name) {
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
	err = s.call(ctx, calls, func(ctx context.Context) error {
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
	return outError, &QueueError{QueueURL: u, Op: op, Err: err}
}

// idle applies the Java client's idle rule to a queue's tags at now. It
// returns outDeleted for an idle queue, or the reason to keep it.
func idle(tags map[string]string, now time.Time) (outcome, error) {
	st, err := IdleStatus(tags, now)
	if err != nil {
		return outError, err
	}
	switch st.Verdict {
	case VerdictNotTemporary:
		return outNotTemporary, nil
	case VerdictFutureHeartbeat:
		return outFuture, nil
	case VerdictIdle:
		return outDeleted, nil
	default:
		return outLive, nil
	}
}

// call runs one API call with the call timeout, counting it, and retries it
// a few times with jittered backoff when SQS throttles.
func (s *Sweeper) call(ctx context.Context, calls *atomic.Int64, fn func(context.Context) error) error {
	policy := backoff.Policy{Base: 200 * time.Millisecond, Cap: 5 * time.Second}
	for attempt := 0; ; attempt++ {
		calls.Add(1)
		callCtx, cancel := context.WithTimeout(ctx, s.opts.CallTimeout)
		err := fn(callCtx)
		cancel()
		if err == nil || attempt >= throttleRetries || !isThrottle(err) {
			return err
		}
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
