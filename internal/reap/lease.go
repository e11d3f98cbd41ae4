package reap

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/internal/wire"
	"github.com/tempqueues/tempqueues/sqsapi"
)

// The lease: one token message in the FIFO coordination queue
// <prefix>sweeper.fifo.
//
// Time is cut into periods aligned on a fixed origin (time.Time's zero
// instant, as Truncate uses), so every process of a fleet agrees on them
// without talking. Each period has a window, starting
// `margin` after the period boundary and `margin` long. Every process polls
// the coordination queue once per period, at a random moment of the window.
// The first poll that finds the token visible receives it with a
// VisibilityTimeout reaching the next window's start (a long poll that got
// it later than it asked extends it to that start), sweeps, and leaves the
// token hidden: there is no renewal and no release. The token reappears at
// the next window whatever happened to its holder, and the first poll of
// that window takes it. Hence:
//
//   - at most one sweep per period: the token is hidden from the moment it
//     is taken until the next window;
//   - a dead sweeper is replaced in the very next window, within one period;
//   - the holder rotates at random across the fleet, spreading the sweeps;
//   - each process pays one ReceiveMessage per period (12 an hour at the
//     default 5 minutes), holder or not.
//
// The queue is FIFO, and every token is in one message group, for two
// guarantees a standard queue cannot give. SQS hands out the messages of a
// group to one receiver at a time, so even if two tokens existed, a second
// process could not take one while the first holds its own. And tokens are
// sent with a deduplication id naming the period, so processes that find the
// token missing at the same moment create one token, not several.
//
// A missing token (first start of a fleet, a purge, 14-day expiry) cannot
// be told from a token held by another process by an empty receive, so a
// process checks the queue's message counts on its first empty poll and
// after every leaseCheckEvery consecutive empty polls, and sends a token
// when there is none, then polls for it at once, so a new fleet sweeps in
// its first period. A holder that receives more than one token (a duplicate
// made beyond the deduplication window) deletes the extras.
const (
	// leaseTokenPrefix starts the body of every token; the version after
	// the slash lets a later format coexist.
	leaseTokenPrefix = "tempqueues-reaper-lease/"
	leaseTokenBody   = leaseTokenPrefix + "1"
	// leaseGroup is the message group of every token: one holder at a time.
	leaseGroup = "lease"
	// leaseWaitSeconds makes the poll a (short) long poll: a short poll of
	// a standard queue samples only some SQS servers and can miss the only
	// message. The second also absorbs the whole-second rounding of the
	// token's visibility.
	leaseWaitSeconds = 1
	// leaseCheckEvery: consecutive empty polls before a count check, about
	// two checks an hour per process at the default period.
	leaseCheckEvery = 6
	// leaseRetention keeps the token as long as SQS allows (14 days) ...
	leaseRetention = 14 * 24 * time.Hour
	// ... and the holder replaces a token older than leaseRefreshAge,
	// about two calls a week.
	leaseRefreshAge = 7 * 24 * time.Hour
)

// leaseMargin is the offset and the length of each period's poll window:
// a tenth of the period, between 1 s (the unit of visibility timeouts) and
// 30 s (enough for clock skew between NTP-synchronized hosts).
func leaseMargin(period time.Duration) time.Duration {
	return min(max(period/10, time.Second), 30*time.Second)
}

type lease struct {
	client sqsapi.Client
	opts   Config
	name   string
	margin time.Duration
	tags   *userTags // the fleet's own tags, learned from its queues

	tagged bool // the queue carries tags (owned by the lease goroutine)

	// Owned by the lease goroutine.
	url       string
	empties   int  // consecutive empty polls
	hasPolled bool // the first empty poll checks the counts

	checks, won, created, duplicates, errs atomic.Int64
}

func newLease(client sqsapi.Client, o Config, tags *userTags) *lease {
	return &lease{
		client: client,
		opts:   o,
		name:   o.Prefix + coordinationSuffix,
		margin: leaseMargin(o.Period),
		tags:   tags,
	}
}

// userTags are the tags the user gave this process's temporary queues
// (requester.Options.HostQueueTags: cost allocation, ownership), learned
// from AddTagged without the reaper's own two. The coordination queue gets
// them too, so that it is accounted to the same owner.
type userTags struct {
	mu sync.Mutex
	m  map[string]string
}

// learn keeps the user's part of tags, the first time there is one.
func (u *userTags) learn(tags map[string]string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.m != nil {
		return
	}
	for k, v := range tags {
		if k == sqsapi.RetentionTag || k == sqsapi.HeartbeatTag {
			continue
		}
		if u.m == nil {
			u.m = make(map[string]string, len(tags))
		}
		u.m[k] = v
	}
}

func (u *userTags) get() map[string]string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return maps.Clone(u.m)
}

// windowAfter returns the first window start at or after t + gap.
func (l *lease) windowAfter(t time.Time, gap time.Duration) time.Time {
	t = t.Add(gap)
	p := l.opts.Period
	start := t.Truncate(p).Add(l.margin) // absolute: the same boundaries in every process
	if start.Before(t) {
		start = start.Add(p)
	}
	return start
}

// nextPoll returns when this process polls next: at a random moment of the
// next window.
func (l *lease) nextPoll(now time.Time) time.Time {
	return l.windowAfter(now, time.Nanosecond).Add(time.Duration(l.opts.Clock.Int64N(int64(l.margin))))
}

// hideUntil returns until when a token taken at now stays hidden: the next
// window start at least one margin away, so a token picked up just before a
// window (at start-up) skips that window rather than causing a second sweep
// within moments.
func (l *lease) hideUntil(now time.Time) time.Time {
	return l.windowAfter(now, l.margin)
}

// visibility converts a hiding duration to whole seconds, rounding up: the
// token then reappears up to a second after the window starts, which the
// long poll of that window's first poller absorbs.
func visibility(d time.Duration) int32 {
	s := (d + time.Second - 1) / time.Second
	return int32(min(max(s, 1), wire.MaxVisibilityTimeout))
}

func (l *lease) log() *slog.Logger { return l.opts.Logger }

func (l *lease) callCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, callTimeout+leaseWaitSeconds*time.Second)
}

// ensure finds or creates the coordination queue, with the user's tags
// when they are known. It never carries the reaper's tags, so no sweeper
// (Go or Java) ever deletes it.
func (l *lease) ensure(ctx context.Context) error {
	cctx, cancel := l.callCtx(ctx)
	defer cancel()
	tags := l.tags.get()
	out, err := l.client.CreateQueue(cctx, &sqs.CreateQueueInput{
		QueueName: aws.String(l.name),
		Attributes: map[string]string{
			string(types.QueueAttributeNameFifoQueue):              "true",
			string(types.QueueAttributeNameMessageRetentionPeriod): strconv.Itoa(int(leaseRetention / time.Second)),
		},
		Tags: tags,
	})
	var exists *types.QueueNameExists
	if errors.As(err, &exists) {
		// Created with other attributes (by hand, or a later version): use it.
		var got *sqs.GetQueueUrlOutput
		got, err = l.client.GetQueueUrl(cctx, &sqs.GetQueueUrlInput{QueueName: aws.String(l.name)})
		if err == nil {
			l.url = aws.ToString(got.QueueUrl)
		}
		return err
	}
	if err != nil {
		return err
	}
	l.url = aws.ToString(out.QueueUrl)
	return nil
}

// acquire makes this period's lease check. It reports whether this process
// won the lease, with the token's receipt handle ("" when it cannot be
// extended) and until when it is hidden.
func (l *lease) acquire(ctx context.Context) (receipt string, until time.Time, won bool) {
	if l.url == "" {
		if err := l.ensure(ctx); err != nil {
			l.fail(ctx, "creating the coordination queue", err)
			return "", time.Time{}, false
		}
	}
	tokens, until, err := l.receive(ctx)
	if err != nil {
		l.fail(ctx, "polling the coordination queue", err)
		return "", time.Time{}, false
	}
	if len(tokens) == 0 {
		l.empties++
		if l.hasPolled && l.empties%leaseCheckEvery != 0 {
			return "", time.Time{}, false
		}
		l.hasPolled = true
		missing, err := l.missing(ctx)
		if err != nil {
			l.fail(ctx, "counting lease tokens", err)
			return "", time.Time{}, false
		}
		if !missing {
			return "", time.Time{}, false
		}
		if err := l.send(ctx, "token-"+l.periodID()); err != nil {
			l.fail(ctx, "creating the lease token", err)
			return "", time.Time{}, false
		}
		l.created.Add(1)
		l.log().Info("reaper: created the sweeper lease token", slog.String("queue", l.name))
		// Take it at once, so a new fleet sweeps in its first period; a
		// process that created it concurrently may get it instead.
		if tokens, until, err = l.receive(ctx); err != nil || len(tokens) == 0 {
			return "", time.Time{}, false
		}
	}
	l.hasPolled = true
	l.empties = 0
	for _, dup := range tokens[1:] {
		if l.deleteMessage(ctx, dup) == nil {
			l.duplicates.Add(1)
		}
	}
	tok := tokens[0]
	l.won.Add(1)
	l.tag(ctx)
	receipt = aws.ToString(tok.ReceiptHandle)
	if l.tooOld(tok) {
		// Replace the token before SQS's retention drops it, and take the
		// new one at once: the group lock hands it to no one else while the
		// old one is held, and taking it hides it until the next window.
		if err := l.send(ctx, "refresh-"+l.periodID()); err == nil && l.deleteMessage(ctx, tok) == nil {
			receipt = ""
			if fresh, u, err := l.receive(ctx); err == nil && len(fresh) > 0 {
				receipt, until = aws.ToString(fresh[0].ReceiptHandle), u
			}
		}
	}
	return receipt, until, true
}

// tag puts the user's tags on the coordination queue, once per process
// and only by the lease's holder (one call a period in the whole fleet at
// most): the queue may have been created before they were known, or by a
// process without them. SQS ignores the tags of a CreateQueue that finds
// the queue existing.
func (l *lease) tag(ctx context.Context) {
	tags := l.tags.get()
	if l.tagged || len(tags) == 0 {
		return
	}
	cctx, cancel := l.callCtx(ctx)
	defer cancel()
	if _, err := l.client.TagQueue(cctx, &sqs.TagQueueInput{QueueUrl: aws.String(l.url), Tags: tags}); err != nil {
		l.log().Warn("reaper: tagging the coordination queue failed; the next holder of the lease tries again",
			slog.String("queue", l.name), slog.Any("error", err))
		return
	}
	l.tagged = true
}

// receive polls once and returns the tokens received, hidden until the
// returned time. Other messages in the queue are deleted: it is ours, and a
// stray message would defeat the missing-token check.
func (l *lease) receive(ctx context.Context) ([]types.Message, time.Time, error) {
	now := l.opts.Clock.Now()
	until := l.hideUntil(now)
	l.checks.Add(1)
	vis := visibility(until.Sub(now))
	cctx, cancel := l.callCtx(ctx)
	out, err := l.client.ReceiveMessage(cctx, &sqs.ReceiveMessageInput{
		QueueUrl:                    aws.String(l.url),
		MaxNumberOfMessages:         wire.MaxReceiveMessages,
		WaitTimeSeconds:             leaseWaitSeconds,
		VisibilityTimeout:           vis,
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameSentTimestamp},
	})
	cancel()
	if err != nil {
		return nil, until, err
	}
	var tokens []types.Message
	for _, m := range out.Messages {
		if strings.HasPrefix(aws.ToString(m.Body), leaseTokenPrefix) {
			tokens = append(tokens, m)
			continue
		}
		l.log().Warn("reaper: deleting a foreign message from the coordination queue", slog.String("queue", l.name))
		_ = l.deleteMessage(ctx, m)
	}
	if len(tokens) > 0 {
		// SQS hides a message from its receipt, which a long poll may make
		// up to leaseWaitSeconds after now: a token created meanwhile (at a
		// fleet's start) would reappear before the window the receipt
		// calls for, and be taken again in this period.
		got := l.opts.Clock.Now()
		if want := l.hideUntil(got); now.Add(time.Duration(vis) * time.Second).Before(want) {
			if u, err := l.extend(ctx, aws.ToString(tokens[0].ReceiptHandle)); err == nil {
				until = u
			} else {
				l.fail(ctx, "hiding the lease token until its window", err)
			}
		}
	}
	return tokens, until, nil
}

// missing reports whether the coordination queue holds no message at all,
// visible, hidden or delayed.
func (l *lease) missing(ctx context.Context) (bool, error) {
	cctx, cancel := l.callCtx(ctx)
	defer cancel()
	counts := []types.QueueAttributeName{
		types.QueueAttributeNameApproximateNumberOfMessages,
		types.QueueAttributeNameApproximateNumberOfMessagesNotVisible,
		types.QueueAttributeNameApproximateNumberOfMessagesDelayed,
	}
	out, err := l.client.GetQueueAttributes(cctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(l.url), AttributeNames: counts})
	if err != nil {
		return false, err
	}
	for _, k := range counts {
		if n, ok := out.Attributes[string(k)]; !ok || n != "0" {
			return false, nil
		}
	}
	return true, nil
}

// send sends a token. dedupID makes concurrent sends of one period (within
// SQS's 5-minute deduplication window) create a single token.
func (l *lease) send(ctx context.Context, dedupID string) error {
	cctx, cancel := l.callCtx(ctx)
	defer cancel()
	_, err := l.client.SendMessage(cctx, &sqs.SendMessageInput{
		QueueUrl:               aws.String(l.url),
		MessageBody:            aws.String(leaseTokenBody),
		MessageGroupId:         aws.String(leaseGroup),
		MessageDeduplicationId: aws.String(dedupID),
	})
	return err
}

// periodID names the current period, the same in every process.
func (l *lease) periodID() string {
	return strconv.FormatInt(l.opts.Clock.Now().Truncate(l.opts.Period).Unix(), 10)
}

func (l *lease) deleteMessage(ctx context.Context, m types.Message) error {
	cctx, cancel := l.callCtx(ctx)
	defer cancel()
	_, err := l.client.DeleteMessage(cctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(l.url), ReceiptHandle: m.ReceiptHandle})
	if err != nil {
		l.fail(ctx, "deleting a coordination message", err)
	}
	return err
}

// extend keeps a held token hidden until the next window, for a sweep that
// outlasts its period.
func (l *lease) extend(ctx context.Context, receipt string) (time.Time, error) {
	now := l.opts.Clock.Now()
	until := l.hideUntil(now)
	cctx, cancel := l.callCtx(ctx)
	defer cancel()
	_, err := l.client.ChangeMessageVisibility(cctx, &sqs.ChangeMessageVisibilityInput{
		QueueUrl:          aws.String(l.url),
		ReceiptHandle:     aws.String(receipt),
		VisibilityTimeout: visibility(until.Sub(now)),
	})
	return until, err
}

func (l *lease) tooOld(m types.Message) bool {
	sent, err := strconv.ParseInt(m.Attributes[string(types.MessageSystemAttributeNameSentTimestamp)], 10, 64)
	return err == nil && l.opts.Clock.Now().Sub(time.UnixMilli(sent)) > leaseRefreshAge
}

// fail records a lease error; a deleted coordination queue is recreated at
// the next poll.
func (l *lease) fail(ctx context.Context, what string, err error) {
	if ctx.Err() != nil {
		return // shutting down
	}
	l.errs.Add(1)
	var gone *types.QueueDoesNotExist
	if errors.As(err, &gone) {
		// Recreate the queue at the next poll and check for a token at
		// once: the deleted queue took it along.
		l.url = ""
		l.hasPolled = false
	}
	l.log().Warn("reaper: lease: "+what, slog.String("queue", l.name), slog.Any("err", err))
}
