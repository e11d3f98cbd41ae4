package redrive

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/internal/backoff"
	"github.com/tempqueues/tempqueues/internal/batch"
	"github.com/tempqueues/tempqueues/sqsapi"
)

// Action is what a Redriver did, or would do in a dry run, with a message.
type Action string

// Actions.
const (
	// ActionReplay: sent to the target with DelaySeconds, then deleted
	// from the dead-letter queue.
	ActionReplay Action = "replay"
	// ActionSchedule: the replay delay exceeds 900 s, so a copy carrying
	// the due time was sent back to the dead-letter queue (delayed, and
	// re-hidden when received early) and the original deleted.
	ActionSchedule Action = "schedule"
	// ActionWait: a scheduled copy received before its due time was hidden
	// again with ChangeMessageVisibility (a visibility hop).
	ActionWait Action = "wait"
	// ActionPark: sent unchanged to the parking queue, then deleted from
	// the dead-letter queue. Event.Reason says why.
	ActionPark Action = "park"
)

// Event describes one message handled. It is passed to Options.OnEvent.
type Event struct {
	Action    Action
	MessageID string // the message's id on the dead-letter queue
	RequestID string // its TempQueues.RequestId, if any
	// Attempt is the number of the replay (1 for the first) for replay,
	// schedule and wait, and the replays done for park.
	Attempt int
	// Delay is the DelaySeconds given to a replay, the whole delay of a
	// scheduled replay, and the time left for a wait.
	Delay time.Duration
	// Due is when a scheduled or waiting replay is due on the target.
	Due time.Time
	// Queue is where the message was sent: the target, the dead-letter
	// queue (schedule) or the parking queue; empty for a wait.
	Queue string
	// Reason is why a message was parked: ErrMaxAttempts, a *NoRoomError
	// or ErrBadAttempt.
	Reason error
	// Err is set when the action failed (a *MessageError); the message
	// stays on the dead-letter queue. For a replay whose delete failed the
	// replay happened, and it will happen again (a duplicate).
	Err    error
	DryRun bool
}

// Report counts what a Drain or Run did (in a dry run, would have done).
type Report struct {
	DeadLetterQueue string
	Target          string
	DryRun          bool
	Received        int // messages received from the dead-letter queue (in a dry run, distinct ones)
	Replayed        int // sent back to the target
	Scheduled       int // delays beyond 900 s: copies sent to wait on the dead-letter queue
	Waiting         int // scheduled copies hidden again until due
	Parked          int // sent to the parking queue
	NoRoom          int // of Parked: no room for the attempt attribute
	Failed          int // left on the dead-letter queue after an error
	DeleteErrors    int // sent, but not deleted from the dead-letter queue: will be sent again
	// Errors holds the first 100 per-message errors.
	Errors   []error
	Duration time.Duration
}

// Err joins the per-message errors, nil when there were none.
func (r Report) Err() error { return errors.Join(r.Errors...) }

const maxReportErrors = 100

// callTimeout bounds the sends, deletes and visibility changes of one
// received batch. They run on after ctx is cancelled, so that a batch is
// never half done.
const callTimeout = 30 * time.Second

// maxDelay is SQS's largest DelaySeconds.
const maxDelay = sqsapi.MaxDelaySeconds * time.Second

// Redriver replays the messages of one dead-letter queue. It is safe for
// concurrent use; several Redrivers, in one process or many, may share a
// dead-letter queue.
type Redriver struct {
	client Client
	dlq    string
	opts   Options
	policy backoff.Policy

	mu     sync.Mutex
	target string
}

// New returns a Redriver of the dead-letter queue dlqURL. It validates the
// options (an *sqsapi.InvalidInputError for bad ones) and makes no call. An
// *sqs.Client is used through a copy with sqsapi.BufferRequestBodies
// installed (see sqsapi.EnsureBufferedBodies).
func New(client Client, dlqURL string, optFns ...func(*Options)) (*Redriver, error) {
	if client == nil {
		return nil, sqsapi.Invalid("redrive.New", "client", "must not be nil")
	}
	o, err := buildOptions(dlqURL, optFns)
	if err != nil {
		return nil, err
	}
	return &Redriver{
		client: sqsapi.EnsureBufferedBodies(client),
		dlq:    dlqURL,
		opts:   o,
		policy: backoff.Policy{Base: o.Base, Cap: o.Cap, Rand: o.clock.Int64N},
		target: o.Target,
	}, nil
}

// Delay returns a random replay delay for a message replayed attempts
// times before: uniform in [0, min(Cap, Base x 2^attempts)].
func (r *Redriver) Delay(attempts int) time.Duration { return r.policy.Delay(attempts) }

// Target returns the queue messages are replayed to: Options.Target, or
// the dead-letter queue's only source queue. The latter costs one
// ListDeadLetterSourceQueues call, on first use; a *SourceError reports no
// source or several.
func (r *Redriver) Target(ctx context.Context) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.target != "" {
		return r.target, nil
	}
	out, err := r.client.ListDeadLetterSourceQueues(ctx, &sqs.ListDeadLetterSourceQueuesInput{QueueUrl: aws.String(r.dlq), MaxResults: aws.Int32(10)})
	if err != nil {
		return "", fmt.Errorf("redrive: ListDeadLetterSourceQueues on %s (name the target if the server lacks the call): %w", r.dlq, err)
	}
	if len(out.QueueUrls) != 1 {
		return "", &SourceError{DeadLetterQueue: r.dlq, Sources: out.QueueUrls}
	}
	t := out.QueueUrls[0]
	if isFIFO(t) || t == r.opts.ParkingQueue {
		return "", sqsapi.Invalid("redrive", "Target", "source queue %q is FIFO or the parking queue", t)
	}
	r.target = t
	return t, nil
}

// Drain replays the messages on the dead-letter queue until a receive finds
// none, then returns what it did. A message whose action failed stays on
// the queue, hidden for VisibilityTimeout, and is not retried by this
// Drain unless its visibility ends first. When ctx is cancelled, Drain
// finishes the batch at hand and returns ctx's error with the report.
//
// In a dry run Drain receives each message once (hiding it meanwhile),
// reports what it would do, and makes them all visible again at the end.
func (r *Redriver) Drain(ctx context.Context) (Report, error) {
	return r.run(ctx, true)
}

// Run replays messages as they arrive on the dead-letter queue, long-polling
// for WaitTime, until ctx is cancelled; then it finishes the batch at hand
// and returns the report and nil. It returns early with an error when the
// dead-letter, target or parking queue does not exist or a call fails in a
// way that retrying will not fix; throttling and server errors are retried
// with backoff.
func (r *Redriver) Run(ctx context.Context) (Report, error) {
	if r.opts.DryRun {
		return Report{DeadLetterQueue: r.dlq, DryRun: true}, ErrDryRunOnlyDrain
	}
	return r.run(ctx, false)
}

// pass is the state of one Drain or Run.
type pass struct {
	r      *Redriver
	target string
	rep    Report
	sends  *batch.Sends
	dels   *batch.Deletes
	vis    *batch.Visibilities
	// Dry runs only: messages seen, and the receipt handles to release.
	seen    map[string]bool
	release []string
}

func (r *Redriver) run(ctx context.Context, drain bool) (Report, error) {
	start := time.Now()
	p := &pass{r: r, rep: Report{DeadLetterQueue: r.dlq, DryRun: r.opts.DryRun}}
	target, err := r.Target(ctx)
	if err != nil {
		p.rep.Duration = time.Since(start)
		return p.rep, err
	}
	p.target, p.rep.Target = target, target
	p.sends = batch.NewSends(r.client, 2)
	p.dels = batch.NewDeletes(r.client, 2, 0)
	p.vis = batch.NewVisibilities(r.client, 2)
	if r.opts.DryRun {
		p.seen = make(map[string]bool)
	}
	defer p.close(ctx)
	err = p.loop(ctx, drain)
	p.rep.Duration = time.Since(start)
	r.opts.Logger.Info("redrive: done", slog.String("dlq", r.dlq), slog.String("target", target), slog.Bool("dry_run", r.opts.DryRun),
		slog.Int("received", p.rep.Received), slog.Int("replayed", p.rep.Replayed), slog.Int("scheduled", p.rep.Scheduled),
		slog.Int("parked", p.rep.Parked), slog.Int("failed", p.rep.Failed))
	if !drain && err != nil && ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		err = nil // Run stops when told to
	}
	return p.rep, err
}

// close makes the messages of a dry run visible again and stops the
// coalescers.
func (p *pass) close(ctx context.Context) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), callTimeout)
	defer cancel()
	if len(p.release) > 0 {
		vs := make([]batch.Visibility, len(p.release))
		for i, h := range p.release {
			vs[i] = batch.Visibility{ReceiptHandle: h}
		}
		for i, res := range p.vis.DoAll(cctx, p.r.dlq, vs) {
			if res.Err != nil {
				p.r.opts.Logger.Warn("redrive: dry run could not make a message visible again; it will reappear after the visibility timeout",
					slog.String("receipt_handle", vs[i].ReceiptHandle), slog.Any("err", res.Err))
			}
		}
	}
	_ = p.sends.Close(cctx)
	_ = p.dels.Close(cctx)
	_ = p.vis.Close(cctx)
}

func (p *pass) loop(ctx context.Context, drain bool) error {
	o := p.r.opts
	maxMessages := int32(sqsapi.MaxReceiveMessages)
	if o.RateLimit > 0 {
		maxMessages = int32(min(float64(sqsapi.MaxReceiveMessages), max(1, math.Ceil(o.RateLimit))))
	}
	wait := o.WaitTime
	if drain {
		wait = drainWait
	}
	visibility := o.VisibilityTimeout
	if o.DryRun {
		// Keep what a dry run saw hidden until it ends, so it sees each
		// message once; close releases them.
		visibility = max(visibility, 15*time.Minute)
	}
	retry := backoff.Policy{Base: 200 * time.Millisecond, Cap: 10 * time.Second}
	pace := pacer{rate: o.RateLimit}
	failures, actionFailures := 0, 0
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		out, err := p.r.client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl:                    aws.String(p.r.dlq),
			MaxNumberOfMessages:         maxMessages,
			WaitTimeSeconds:             int32(wait / time.Second),
			VisibilityTimeout:           int32(visibility / time.Second),
			MessageAttributeNames:       []string{"All"},
			MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAWSTraceHeader},
		})
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			failures++
			if !sqsapi.IsTransient(err) || (drain && failures > 5) {
				return fmt.Errorf("redrive: ReceiveMessage on %s: %w", p.r.dlq, err)
			}
			o.Logger.Warn("redrive: receive failed, backing off", slog.String("dlq", p.r.dlq), slog.Any("err", err))
			if err := backoff.Sleep(ctx, retry.Delay(failures-1)); err != nil {
				return err
			}
			continue
		}
		failures = 0
		msgs := out.Messages
		if o.DryRun {
			msgs = p.unseen(msgs)
			if len(msgs) == 0 && len(out.Messages) > 0 {
				return nil // every message of the queue has been seen
			}
		}
		if len(msgs) == 0 {
			if drain {
				return nil
			}
			continue
		}
		if err := pace.wait(ctx, len(msgs)); err != nil {
			// Received but not handled: they reappear after the
			// visibility timeout, unless a dry run releases them.
			return err
		}
		failed := p.rep.Failed
		if err := p.handle(ctx, msgs); err != nil {
			return err
		}
		// Only failures (a throttled or failing target): back off before the
		// next receive instead of hammering it; the messages come back after
		// their visibility timeout.
		if n := p.rep.Failed - failed; n > 0 && n == len(msgs) {
			actionFailures++
			if err := backoff.Sleep(ctx, retry.Delay(actionFailures-1)); err != nil {
				return err
			}
		} else {
			actionFailures = 0
		}
	}
}

// unseen returns the messages a dry run has not seen yet and remembers
// every receipt handle for the release at the end.
func (p *pass) unseen(msgs []types.Message) []types.Message {
	var out []types.Message
	for _, m := range msgs {
		p.release = append(p.release, aws.ToString(m.ReceiptHandle))
		if id := aws.ToString(m.MessageId); !p.seen[id] {
			p.seen[id] = true
			out = append(out, m)
		}
	}
	return out
}

// plan is the action decided for one message.
type plan struct {
	m      types.Message
	ev     Event
	entry  types.SendMessageBatchRequestEntry // for sends to ev.Queue
	hop    int32                              // for ActionWait: visibility seconds
	err    error                              // set when the action failed
	delErr error                              // set when the delete after the send failed
}

// decide chooses the action for m at now.
func (p *pass) decide(m types.Message, now time.Time) *plan {
	o := p.r.opts
	pl := &plan{m: m, ev: Event{MessageID: aws.ToString(m.MessageId), DryRun: o.DryRun}}
	if v, ok := m.MessageAttributes[sqsapi.RequestIDAttribute]; ok {
		pl.ev.RequestID = aws.ToString(v.StringValue)
	}
	pl.entry = types.SendMessageBatchRequestEntry{MessageBody: m.Body, MessageAttributes: m.MessageAttributes}
	if th, ok := m.Attributes[string(types.MessageSystemAttributeNameAWSTraceHeader)]; ok && th != "" {
		pl.entry.MessageSystemAttributes = map[string]types.MessageSystemAttributeValue{
			string(types.MessageSystemAttributeNameAWSTraceHeader): {DataType: aws.String("String"), StringValue: aws.String(th)},
		}
	}
	park := func(reason error) *plan {
		pl.ev.Action, pl.ev.Queue, pl.ev.Reason = ActionPark, o.ParkingQueue, reason
		return pl // sent unchanged
	}
	a, ok := parseAttempt(m)
	switch {
	case !ok:
		return park(ErrBadAttempt)
	case !a.due.IsZero(): // a scheduled copy
		pl.ev.Attempt, pl.ev.Due = a.n, a.due
		left := a.due.Sub(now)
		if left > maxDelay {
			hop := int32(math.Ceil((left - maxDelay).Seconds()))
			pl.ev.Action, pl.ev.Delay = ActionWait, left
			// Counted from the receipt just made; leave a minute for the
			// 12-hour cap since receipt.
			pl.hop = min(hop, sqsapi.MaxVisibilityTimeout-60)
			return pl
		}
		secs := int32(math.Ceil(max(left, 0).Seconds()))
		pl.ev.Action, pl.ev.Queue, pl.ev.Delay = ActionReplay, p.target, time.Duration(secs)*time.Second
		pl.entry.MessageAttributes = withAttempt(m.MessageAttributes, attempt{n: a.n})
		pl.entry.DelaySeconds = secs
		return pl
	case a.n >= o.MaxAttempts:
		pl.ev.Attempt = a.n
		return park(ErrMaxAttempts)
	}
	next := attempt{n: a.n + 1}
	pl.ev.Attempt = next.n
	// Room for the attribute, checked with its longest (scheduled) form.
	longest := withAttempt(m.MessageAttributes, attempt{n: next.n, due: now.Add(MaxCap)})
	if others := len(longest) - 1; others >= sqsapi.MaxMessageAttributes || sqsapi.MessageSize(m.Body, longest) > sqsapi.MaxMessageSize {
		pl.ev.Attempt = a.n
		return park(&NoRoomError{MessageID: pl.ev.MessageID, Attributes: others, Size: sqsapi.MessageSize(m.Body, longest)})
	}
	d := p.r.policy.Delay(a.n)
	if d <= maxDelay {
		secs := wholeSeconds(d, p.r.policy.Ceiling(a.n))
		pl.ev.Action, pl.ev.Queue, pl.ev.Delay = ActionReplay, p.target, time.Duration(secs)*time.Second
		pl.entry.MessageAttributes = withAttempt(m.MessageAttributes, next)
		pl.entry.DelaySeconds = secs
		return pl
	}
	next.due = now.Add(d)
	pl.ev.Action, pl.ev.Queue, pl.ev.Delay, pl.ev.Due = ActionSchedule, p.r.dlq, d, next.due
	pl.entry.MessageAttributes = withAttempt(m.MessageAttributes, next)
	pl.entry.DelaySeconds = int32(min(maxDelay, d-maxDelay) / time.Second)
	return pl
}

// wholeSeconds maps a delay d drawn uniformly from [0, ceiling] to whole
// seconds drawn uniformly from {0, ..., floor(ceiling)}: SQS delays whole
// seconds, and rounding d down would make the mean half a second short
// (with a 1 s ceiling, every delay would be 0).
func wholeSeconds(d, ceiling time.Duration) int32 {
	top := int64(ceiling / time.Second)
	if top == 0 || ceiling <= 0 {
		return 0
	}
	k := int64(float64(d) / float64(ceiling) * float64(top+1))
	return int32(min(max(k, 0), top))
}

// handle decides and carries out the actions for one received batch: the
// sends (one SendMessageBatch per destination queue), then the deletes of
// the messages sent (one DeleteMessageBatch), and the visibility hops. It
// returns an error only when the whole pass should stop.
func (p *pass) handle(ctx context.Context, msgs []types.Message) error {
	o := p.r.opts
	now := o.clock.Now()
	plans := make([]*plan, len(msgs))
	for i, m := range msgs {
		plans[i] = p.decide(m, now)
	}
	p.rep.Received += len(msgs)
	if !o.DryRun {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), callTimeout)
		defer cancel()
		p.execute(cctx, plans)
	}
	var fatal error
	for _, pl := range plans {
		p.account(pl)
		if pl.err != nil && fatal == nil && isFatal(pl.err) {
			fatal = pl.err
		}
	}
	return fatal
}

func (p *pass) execute(ctx context.Context, plans []*plan) {
	// Sends, grouped by destination queue in order of first appearance.
	var queues []string
	byQueue := make(map[string][]*plan)
	var hops []*plan
	for _, pl := range plans {
		if pl.ev.Action == ActionWait {
			hops = append(hops, pl)
			continue
		}
		q := pl.ev.Queue
		if _, ok := byQueue[q]; !ok {
			queues = append(queues, q)
		}
		byQueue[q] = append(byQueue[q], pl)
	}
	var sent []*plan
	for _, q := range queues {
		group := byQueue[q]
		entries := make([]types.SendMessageBatchRequestEntry, len(group))
		for i, pl := range group {
			entries[i] = pl.entry
		}
		for i, res := range p.sends.DoAll(ctx, q, entries) {
			if res.Err != nil {
				group[i].err = &MessageError{MessageID: group[i].ev.MessageID, Op: "SendMessageBatch", Queue: q, Err: res.Err}
				continue
			}
			sent = append(sent, group[i])
		}
	}
	// Delete only what was sent: nothing is lost, at worst sent twice.
	if len(sent) > 0 {
		handles := make([]string, len(sent))
		for i, pl := range sent {
			handles[i] = aws.ToString(pl.m.ReceiptHandle)
		}
		for i, res := range p.dels.DoAll(ctx, p.r.dlq, handles) {
			if res.Err != nil {
				sent[i].delErr = &MessageError{MessageID: sent[i].ev.MessageID, Op: "DeleteMessageBatch", Queue: p.r.dlq, Err: res.Err}
			}
		}
	}
	if len(hops) > 0 {
		vs := make([]batch.Visibility, len(hops))
		for i, pl := range hops {
			vs[i] = batch.Visibility{ReceiptHandle: aws.ToString(pl.m.ReceiptHandle), Timeout: pl.hop}
		}
		for i, res := range p.vis.DoAll(ctx, p.r.dlq, vs) {
			if res.Err != nil {
				hops[i].err = &MessageError{MessageID: hops[i].ev.MessageID, Op: "ChangeMessageVisibilityBatch", Queue: p.r.dlq, Err: res.Err}
			}
		}
	}
}

// account counts a plan's outcome, logs it and reports its event.
func (p *pass) account(pl *plan) {
	o := p.r.opts
	ev := pl.ev
	rep := &p.rep
	addErr := func(err error) {
		if len(rep.Errors) < maxReportErrors {
			rep.Errors = append(rep.Errors, err)
		}
	}
	switch {
	case pl.err != nil:
		ev.Err = pl.err
		rep.Failed++
		addErr(pl.err)
		o.Logger.Warn("redrive: action failed; the message stays on the dead-letter queue", slog.String("action", string(ev.Action)),
			slog.String("message_id", ev.MessageID), slog.Any("err", pl.err))
	default:
		switch ev.Action {
		case ActionReplay:
			rep.Replayed++
		case ActionSchedule:
			rep.Scheduled++
		case ActionWait:
			rep.Waiting++
		case ActionPark:
			rep.Parked++
			if errors.Is(ev.Reason, ErrNoRoom) {
				rep.NoRoom++
			}
		}
		if pl.delErr != nil {
			ev.Err = pl.delErr
			rep.DeleteErrors++
			addErr(pl.delErr)
			o.Logger.Warn("redrive: sent but not deleted; the message will be sent again", slog.String("message_id", ev.MessageID), slog.Any("err", pl.delErr))
		}
		o.Logger.Debug("redrive: "+string(ev.Action), slog.String("message_id", ev.MessageID), slog.String("request_id", ev.RequestID),
			slog.Int("attempt", ev.Attempt), slog.Duration("delay", ev.Delay), slog.String("queue", ev.Queue), slog.Bool("dry_run", ev.DryRun))
	}
	if o.OnEvent != nil {
		o.OnEvent(ev)
	}
}

// isFatal reports a failure that every following message would meet too:
// a call-level error (not a batch entry's) that retrying will not fix, such
// as a missing queue or denied access.
func isFatal(err error) bool {
	var entry *sqsapi.BatchEntryError
	if errors.As(err, &entry) {
		return false
	}
	return !sqsapi.IsTransient(err) && !errors.Is(err, context.DeadlineExceeded)
}

// pacer spaces messages to a rate.
type pacer struct {
	rate float64 // per second; 0 = unlimited
	next time.Time
}

// wait blocks until n more messages may be handled.
func (p *pacer) wait(ctx context.Context, n int) error {
	if p.rate <= 0 {
		return nil
	}
	now := time.Now()
	if p.next.Before(now) {
		p.next = now
	}
	at := p.next
	p.next = p.next.Add(time.Duration(float64(n) / p.rate * float64(time.Second)))
	return backoff.Sleep(ctx, at.Sub(now))
}
