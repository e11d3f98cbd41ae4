package redrive

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/internal/awserr"
	"github.com/tempqueues/tempqueues/internal/backoff"
	"github.com/tempqueues/tempqueues/internal/batch"
	"github.com/tempqueues/tempqueues/internal/callback"
	"github.com/tempqueues/tempqueues/internal/callbound"
	"github.com/tempqueues/tempqueues/internal/consume"
	"github.com/tempqueues/tempqueues/internal/httpbody"
	"github.com/tempqueues/tempqueues/internal/wire"
	"github.com/tempqueues/tempqueues/observe"
	"github.com/tempqueues/tempqueues/sqsapi"
)

// The actions, the Reason of the observe.Redriven event of each message
// handled, as the package doc describes them.
const (
	actionReplay   = "replay"
	actionSchedule = "schedule"
	actionWait     = "wait"
	actionPark     = "park"
)

// Detail is the Detail of a Redriven event: what redrive alone knows of
// the action.
type Detail struct {
	// Attempt is the number of the replay (1 for the first) for replay,
	// schedule and wait, and the replays done for park.
	Attempt int
	// Due is when a scheduled or waiting replay is due on the target.
	Due time.Time
	// To is where the message was sent: the target, the dead-letter queue
	// (schedule) or the parking queue; empty for a wait.
	To string
	// Cause is why a message was parked: ErrMaxAttempts, ErrNoRoom or
	// ErrBadAttempt.
	Cause error
}

// Report counts what a Drain or Run did (in a dry run, would have done).
type Report struct {
	Received  int // messages received from the dead-letter queue (in a dry run, distinct ones)
	Replayed  int // sent back to the target
	Scheduled int // delays beyond 900 s: copies sent to wait on the dead-letter queue
	Waiting   int // scheduled copies hidden again until due
	Parked    int // sent to the parking queue
	Failed    int // left on the dead-letter queue after an error
	// Errors holds the first 100 per-message errors: the failed actions,
	// and the deletes that failed after a send (that message will be sent
	// again).
	Errors []error
}

const maxReportErrors = 100

// callTimeout bounds the sends, deletes and visibility changes of one
// received batch. They run on after ctx is cancelled, so that a batch is
// never half done.
const callTimeout = 30 * time.Second

// maxDelay is SQS's largest DelaySeconds.
const maxDelay = wire.MaxDelaySeconds * time.Second

// Redriver replays the messages of one dead-letter queue. It is safe for
// concurrent use; several Redrivers, in one process or many, may share a
// dead-letter queue.
type Redriver struct {
	client Client
	dlq    string
	opts   Options
	policy backoff.Policy
	// retry spaces receives after failed receives, and after a batch
	// whose actions all failed.
	retry backoff.Policy

	mu      sync.Mutex
	target  string
	finding chan struct{} // closed when the lookup of target in flight ends; nil when none
}

// New returns a Redriver of the dead-letter queue dlqURL. It validates the
// options (an *sqsapi.InvalidInputError for bad ones) and makes no call. An
// *sqs.Client without sqsclient.BufferRequestBodies is used through a copy
// with it installed.
func New(client Client, dlqURL string, optFns ...func(*Options)) (*Redriver, error) {
	if err := wire.CheckClient("redrive.New", "client", client); err != nil {
		return nil, err
	}
	o, err := buildOptions(dlqURL, optFns)
	if err != nil {
		return nil, err
	}
	return &Redriver{
		client: httpbody.Ensure(client),
		dlq:    dlqURL,
		opts:   o,
		policy: backoff.Policy{Base: o.BackoffBase, Cap: o.BackoffCap, Rand: o.clock.Int64N},
		retry:  backoff.Policy{Base: 200 * time.Millisecond, Cap: 10 * time.Second},
		target: o.Target,
	}, nil
}

// Target returns the queue messages are replayed to: Options.Target, or
// the dead-letter queue's only source queue. The latter costs one
// ListDeadLetterSourceQueues call, on first use; ErrNoSource or
// ErrAmbiguousSource reports no source or several.
//
// Concurrent first uses share one lookup, and no lock is held across it:
// a caller whose ctx ends while another's lookup runs returns at once, and
// a failed lookup is tried again by the next caller.
func (r *Redriver) Target(ctx context.Context) (string, error) {
	for {
		r.mu.Lock()
		if t := r.target; t != "" {
			r.mu.Unlock()
			return t, nil
		}
		wait := r.finding
		if wait == nil {
			break
		}
		r.mu.Unlock()
		select {
		case <-wait: // found, or failed (perhaps by its caller's ctx): look again
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
	done := make(chan struct{})
	r.finding = done
	r.mu.Unlock()
	t, err := r.findTarget(ctx)
	r.mu.Lock()
	r.finding = nil
	if err == nil {
		r.target = t
	}
	r.mu.Unlock()
	close(done)
	return t, err
}

// findTarget asks SQS for the dead-letter queue's only source queue.
func (r *Redriver) findTarget(ctx context.Context) (string, error) {
	ctx, cancel := callbound.Context(ctx, 0)
	defer cancel()
	out, err := r.client.ListDeadLetterSourceQueues(ctx, &sqs.ListDeadLetterSourceQueuesInput{QueueUrl: aws.String(r.dlq), MaxResults: aws.Int32(10)})
	if err != nil {
		return "", fmt.Errorf("redrive: ListDeadLetterSourceQueues on %s (name the target if the server lacks the call): %w", r.dlq, err)
	}
	switch len(out.QueueUrls) {
	case 0:
		return "", fmt.Errorf("%w: no queue names %s as its dead-letter queue: set the target", ErrNoSource, r.dlq)
	case 1:
	default:
		return "", fmt.Errorf("%w: %s is the dead-letter queue of %d queues (%s): set the target", ErrAmbiguousSource, r.dlq, len(out.QueueUrls), strings.Join(out.QueueUrls, ", "))
	}
	t := out.QueueUrls[0]
	if isFIFO(t) != isFIFO(r.dlq) || t == r.opts.ParkingQueue {
		return "", wire.Invalid("redrive", "Target", "source queue %q is the parking queue, or not of the dead-letter queue's type (FIFO or standard)", t)
	}
	return t, nil
}

// Drain replays the messages on the dead-letter queue until a receive finds
// none, then returns what it did. A message whose action failed stays on
// the queue, hidden for VisibilityTimeout, and is not retried by this
// Drain unless its visibility ends first. When ctx is cancelled, Drain
// stops as Run does and returns ctx's error with the report.
//
// In a dry run Drain receives each message once (hiding it meanwhile),
// reports what it would do, and makes them all visible again at the end.
func (r *Redriver) Drain(ctx context.Context) (Report, error) {
	return r.run(ctx, true)
}

// Run replays messages as they arrive on the dead-letter queue, long-polling
// for PollWaitTime, until ctx is cancelled. Cancelling ctx is a graceful stop,
// by the library's lifecycle rules: no new receive starts, a long poll in
// flight gets half a second (what it returns is made visible again, not
// replayed) before it is cancelled, the batch at hand is finished (its
// calls are bounded by 30 s, so a batch is never half done), and Run
// returns the report and nil. An idle Run thus stops in about half a
// second. Messages made visible again at a stop stay hidden until no
// cancelled long poll can take them.
//
// Run returns early with an error when the dead-letter, target or parking
// queue does not exist or a call fails in a way that retrying will not
// fix; throttling and server errors are retried with backoff.
func (r *Redriver) Run(ctx context.Context) (Report, error) {
	if r.opts.DryRun {
		return Report{}, wire.Invalid("redrive.Run", "Options.DryRun", "a dry run only drains: use Drain")
	}
	return r.run(ctx, false)
}

// pass is the state of one Drain, Run or Process. Drain and Run give its
// batch handler to the consumer engine (internal/consume), which receives
// from the dead-letter queue with one poller and hands it each receive's
// messages before the next receive.
type pass struct {
	r      *Redriver
	target string
	rep    Report
	sends  *batch.Sends
	dels   *batch.Deletes
	vis    *batch.Visibilities
	pace   pacer
	// Batches in a row whose actions all failed.
	actionFailures int
	// halted, closed by halt, stops the engine after a fatal error or
	// when a dry run has seen every message.
	halted   chan struct{}
	haltOnce sync.Once
	finished bool  // a dry run saw every message
	err      error // what ended the pass early
	// Dry runs only: messages seen.
	seen map[string]bool
}

func (r *Redriver) newPass(target string) *pass {
	return &pass{
		r:      r,
		target: target,
		sends:  batch.NewSends(r.client, 2, nil),
		dels:   batch.NewDeletes(r.client, 2, 0),
		vis:    batch.NewVisibilities(r.client, 2),
		pace:   pacer{rate: r.opts.RateLimit},
		halted: make(chan struct{}),
	}
}

func (p *pass) halt() { p.haltOnce.Do(func() { close(p.halted) }) }

// close stops the coalescers once their calls are done.
func (p *pass) close(ctx context.Context) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), callTimeout)
	defer cancel()
	_ = p.sends.Close(cctx)
	_ = p.dels.Close(cctx)
	_ = p.vis.Close(cctx)
}

func (r *Redriver) run(ctx context.Context, drain bool) (Report, error) {
	start := time.Now()
	target, err := r.Target(ctx)
	if err != nil {
		return Report{}, err
	}
	p := r.newPass(target)
	defer p.close(ctx)
	if r.opts.DryRun {
		p.seen = make(map[string]bool)
	}
	var counters consume.Counters
	err = consume.RunBatch(ctx, r.engine(p, drain, &counters), p.handleBatch)
	if err == nil {
		err = p.err
	}
	if err == nil && drain && !p.finished && counters.EmptyReceives.Load() == 0 {
		err = ctx.Err() // Drain did not get to the end
	}
	r.opts.Logger.Info("redrive: done", slog.String("dlq", r.dlq), slog.String("target", target), slog.Bool("dry_run", r.opts.DryRun),
		slog.Int("received", p.rep.Received), slog.Int("replayed", p.rep.Replayed), slog.Int("scheduled", p.rep.Scheduled),
		slog.Int("parked", p.rep.Parked), slog.Int("failed", p.rep.Failed), slog.Duration("duration", time.Since(start)))
	return p.rep, err
}

// engine configures the consumer engine for a pass: one poller that asks
// for a batch (RateLimit makes it smaller) and handles it before the next
// receive; Drain's receives poll for a second and the first empty one
// ends the pass.
func (r *Redriver) engine(p *pass, drain bool, counters *consume.Counters) consume.Config {
	o := r.opts
	size := wire.MaxReceiveMessages
	if o.RateLimit > 0 {
		size = int(min(float64(wire.MaxReceiveMessages), max(1, math.Ceil(o.RateLimit))))
	}
	wait := o.PollWaitTime
	if drain {
		wait = drainWait
	}
	visibility := o.VisibilityTimeout
	if o.DryRun {
		// Keep what a dry run saw hidden until it ends, so it sees each
		// message once; the engine releases them then (consume.Hold).
		visibility = max(visibility, 15*time.Minute)
	}
	return consume.Config{
		Name:              "redrive",
		Client:            r.client,
		QueueURL:          r.dlq,
		MaxConcurrency:    size,
		MaxPollers:        1,
		PollWaitTime:      wait,
		VisibilityTimeout: visibility,
		// Longer than a batch's calls (callTimeout): a batch at hand when
		// ctx ends is never cut short.
		DrainTimeout:  2 * callTimeout,
		MaxVisibility: wire.MaxVisibilityTimeout * time.Second,
		NoSpare:       true,
		Deletes:       p.dels,
		Visibility:    p.vis,
		Counters:      counters,
		Backoff:       r.retry,
		Log:           o.Logger,
		Stopping:      p.halted, // and no HardStop: the batch at hand is finished
		Key:           requestID,
		StopWhenEmpty: drain,
		Pace:          p.pace.wait,
		GiveUp: func(_ error, transient bool, failures int) bool {
			return !transient || drain && failures > 5
		},
	}
}

func requestID(m types.Message) string {
	if v, ok := m.MessageAttributes[sqsapi.RequestIDAttribute]; ok {
		return aws.ToString(v.StringValue)
	}
	return ""
}

// handleBatch is the engine's batch handler: it decides and carries out
// the actions for the messages of one receive. Each message is done with
// by its action (or left to its visibility timeout after a failure), so
// the engine leaves it; a dry run holds every message it received until
// the end.
func (p *pass) handleBatch(ctx context.Context, ds []*consume.Delivery) []consume.Outcome {
	outs := make([]consume.Outcome, len(ds))
	msgs := make([]types.Message, len(ds))
	for i, d := range ds {
		msgs[i] = d.Message
	}
	if p.r.opts.DryRun {
		for i := range outs {
			outs[i].Action = consume.Hold
		}
		if msgs = p.unseen(msgs); len(msgs) == 0 {
			p.finished = true // every message of the queue has been seen
			p.halt()
			return outs
		}
	}
	p.pace.handled(len(msgs))
	failed := p.rep.Failed
	if _, err := p.act(ctx, msgs); err != nil {
		p.err = err
		p.halt()
		return outs
	}
	// Only failures (a throttled or failing target): back off before the
	// next receive instead of hammering it; the messages come back after
	// their visibility timeout.
	if n := p.rep.Failed - failed; n > 0 && n == len(msgs) {
		p.actionFailures++
		p.pace.pause(p.r.retry.Delay(p.actionFailures - 1))
	} else {
		p.actionFailures = 0
	}
	return outs
}

// unseen returns the messages a dry run has not seen yet.
func (p *pass) unseen(msgs []types.Message) []types.Message {
	var out []types.Message
	for _, m := range msgs {
		if id := aws.ToString(m.MessageId); !p.seen[id] {
			p.seen[id] = true
			out = append(out, m)
		}
	}
	return out
}

// plan is the action decided for one message.
type plan struct {
	m         types.Message
	id        string // the message's id on the dead-letter queue
	requestID string
	action    string
	delay     time.Duration // as the Observer's Event.Duration
	detail    Detail
	entry     types.SendMessageBatchRequestEntry // for sends to detail.To
	hop       int32                              // for actionWait: visibility seconds
	err       error                              // set when the action failed
	delErr    error                              // set when the delete after the send failed
}

// decide chooses the action for m at now.
func (p *pass) decide(m types.Message, now time.Time) *plan {
	o := p.r.opts
	fifo := isFIFO(p.r.dlq)
	pl := &plan{m: m, id: aws.ToString(m.MessageId), requestID: requestID(m)}
	pl.entry = types.SendMessageBatchRequestEntry{MessageBody: m.Body, MessageAttributes: m.MessageAttributes}
	if th, ok := m.Attributes[string(types.MessageSystemAttributeNameAWSTraceHeader)]; ok && th != "" {
		pl.entry.MessageSystemAttributes = map[string]types.MessageSystemAttributeValue{
			string(types.MessageSystemAttributeNameAWSTraceHeader): {DataType: aws.String("String"), StringValue: aws.String(th)},
		}
	}
	park := func(cause error) *plan {
		pl.action, pl.detail.To, pl.detail.Cause = actionPark, o.ParkingQueue, cause
		return pl // sent unchanged
	}
	a, ok := parseAttempt(m)
	switch {
	case !ok:
		return park(ErrBadAttempt)
	case !a.due.IsZero(): // a scheduled copy
		pl.detail.Attempt, pl.detail.Due = a.n, a.due
		left := a.due.Sub(now)
		// The part of the delay the target's DelaySeconds takes; on FIFO
		// queues none, so the copy waits here until due.
		onTarget := maxDelay
		if fifo {
			onTarget = 0
		}
		if left > onTarget {
			hop := int32(math.Ceil((left - onTarget).Seconds()))
			pl.action, pl.delay = actionWait, left
			// Counted from the receipt just made; leave a minute for the
			// 12-hour cap since receipt.
			pl.hop = min(hop, wire.MaxVisibilityTimeout-60)
			return pl
		}
		secs := int32(math.Ceil(max(left, 0).Seconds()))
		pl.action, pl.detail.To, pl.delay = actionReplay, p.target, time.Duration(secs)*time.Second
		pl.entry.MessageAttributes = withAttempt(m.MessageAttributes, attempt{n: a.n})
		pl.entry.DelaySeconds = secs
		return pl
	case a.n >= o.MaxAttempts:
		pl.detail.Attempt = a.n
		return park(ErrMaxAttempts)
	}
	next := attempt{n: a.n + 1}
	pl.detail.Attempt = next.n
	// Room for the attribute, checked with its longest (scheduled) form.
	longest := withAttempt(m.MessageAttributes, attempt{n: next.n, due: now.Add(maxBackoffCap)})
	if others := len(longest) - 1; others >= sqsapi.MaxMessageAttributes || wire.MessageSize(m.Body, longest) > sqsapi.MaxMessageSize {
		pl.detail.Attempt = a.n
		return park(fmt.Errorf("%w: message %s has %d other attributes, and %d bytes with it", ErrNoRoom, pl.id, others, wire.MessageSize(m.Body, longest)))
	}
	d := p.r.policy.Delay(a.n)
	if d <= maxDelay {
		secs := wholeSeconds(d, p.r.policy.Ceiling(a.n))
		if !fifo || secs == 0 {
			pl.action, pl.detail.To, pl.delay = actionReplay, p.target, time.Duration(secs)*time.Second
			pl.entry.MessageAttributes = withAttempt(m.MessageAttributes, next)
			pl.entry.DelaySeconds = secs
			return pl
		}
		// FIFO queues take no per-message delay: any delay is scheduled.
		d = time.Duration(secs) * time.Second
	}
	next.due = now.Add(d)
	pl.action, pl.detail.To, pl.delay, pl.detail.Due = actionSchedule, p.r.dlq, d, next.due
	pl.entry.MessageAttributes = withAttempt(m.MessageAttributes, next)
	if !fifo {
		pl.entry.DelaySeconds = int32(min(maxDelay, d-maxDelay) / time.Second)
	}
	return pl
}

// withFIFOIDs gives an entry for the FIFO queue the ids SQS requires: the
// dead letter's own MessageGroupId, so a replay keeps its group, and a
// MessageDeduplicationId made from the dead letter's MessageId (scoped to
// the dead-letter queue). Neither the original's deduplication id nor the
// body (content-based deduplication) will do: a message replayed, failed
// and dead-lettered again within SQS's five-minute window would be taken
// for a duplicate of its first replay and silently dropped. A MessageId is
// new on every send, so each replay of a request is a new message, while
// the same dead letter sent twice (a retried send, or a replay whose
// delete failed, received again) is deduplicated within the window.
func withFIFOIDs(e types.SendMessageBatchRequestEntry, m types.Message, dlq string) types.SendMessageBatchRequestEntry {
	if g := m.Attributes[string(types.MessageSystemAttributeNameMessageGroupId)]; g != "" {
		e.MessageGroupId = aws.String(g)
	}
	e.MessageDeduplicationId = aws.String(wire.ScopedID(dlq, "redrive", aws.ToString(m.MessageId)))
	return e
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

// act decides and carries out the actions for messages received
// together: the sends (one SendMessageBatch per destination queue), then
// the deletes of the messages sent (one DeleteMessageBatch), and the
// visibility hops; a dry run only decides. It reports for each message
// whether it is done with on the dead-letter queue (Process), and returns
// an error only when the whole pass should stop.
// The calls run on after ctx is cancelled, within callTimeout, so that a
// batch is never half done.
func (p *pass) act(ctx context.Context, msgs []types.Message) ([]bool, error) {
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
	done := make([]bool, len(plans))
	var fatal error
	for i, pl := range plans {
		done[i] = p.account(ctx, pl)
		if pl.err != nil && fatal == nil && isFatal(pl.err) {
			fatal = pl.err
		}
	}
	return done, fatal
}

func (p *pass) execute(ctx context.Context, plans []*plan) {
	// Sends, grouped by destination queue in order of first appearance.
	var queues []string
	byQueue := make(map[string][]*plan)
	var hops []*plan
	for _, pl := range plans {
		if pl.action == actionWait {
			hops = append(hops, pl)
			continue
		}
		q := pl.detail.To
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
			if isFIFO(q) {
				entries[i] = withFIFOIDs(pl.entry, pl.m, p.r.dlq)
			}
		}
		for i, res := range p.sends.DoAll(ctx, q, entries) {
			if res.Err != nil {
				group[i].err = &actionError{messageID: group[i].id, op: "SendMessageBatch", queue: q, err: res.Err}
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
				sent[i].delErr = &actionError{messageID: sent[i].id, op: "DeleteMessageBatch", queue: p.r.dlq, err: res.Err}
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
				hops[i].err = &actionError{messageID: hops[i].id, op: "ChangeMessageVisibilityBatch", queue: p.r.dlq, err: res.Err}
			}
		}
	}
}

// account counts a plan's outcome, logs it, tells the Observer, and
// reports whether the message is done with on the dead-letter queue: its
// action happened (a replay whose own delete failed included), and it is
// not a scheduled copy hidden until due.
func (p *pass) account(ctx context.Context, pl *plan) bool {
	o := p.r.opts
	rep := &p.rep
	addErr := func(err error) {
		if len(rep.Errors) < maxReportErrors {
			rep.Errors = append(rep.Errors, err)
		}
	}
	err := pl.err
	switch {
	case pl.err != nil:
		rep.Failed++
		addErr(pl.err)
		o.Logger.Warn("redrive: action failed; the message stays on the dead-letter queue", slog.String("action", pl.action),
			slog.String("message_id", pl.id), slog.Any("err", pl.err))
	default:
		switch pl.action {
		case actionReplay:
			rep.Replayed++
		case actionSchedule:
			rep.Scheduled++
		case actionWait:
			rep.Waiting++
		case actionPark:
			rep.Parked++
		}
		if pl.delErr != nil {
			err = pl.delErr
			addErr(pl.delErr)
			o.Logger.Warn("redrive: sent but not deleted; the message will be sent again", slog.String("message_id", pl.id), slog.Any("err", pl.delErr))
		}
		o.Logger.Debug("redrive: "+pl.action, slog.String("message_id", pl.id), slog.String("request_id", pl.requestID),
			slog.Int("attempt", pl.detail.Attempt), slog.Duration("delay", pl.delay), slog.String("queue", pl.detail.To), slog.Bool("dry_run", o.DryRun))
	}
	if o.Observer != nil {
		m := pl.m
		callback.Observe(ctx, o.Logger, o.Observer, observe.Event{Kind: observe.Redriven, Queue: p.r.dlq, Message: &m,
			RequestID: pl.requestID, Reason: pl.action, Duration: pl.delay, Err: err, Detail: pl.detail})
	}
	return pl.action != actionWait && pl.err == nil
}

// isFatal reports a failure that every following message would meet too:
// a call-level error (not a batch entry's) that retrying will not fix, such
// as a missing queue or denied access.
func isFatal(err error) bool {
	var entry *awserr.BatchEntryError
	if errors.As(err, &entry) {
		return false
	}
	return !awserr.IsTransient(err) && !errors.Is(err, context.DeadlineExceeded)
}

// pacer spaces the receives of a pass: by RateLimit, counting the
// messages each batch handles, and by backoff after a batch whose actions
// all failed. The engine waits on it before each receive (Config.Pace).
type pacer struct {
	rate float64 // per second; 0 = unlimited

	mu   sync.Mutex
	next time.Time // no receive before
}

// handled accounts for n messages about to be handled.
func (p *pacer) handled(n int) {
	if p.rate <= 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.next = later(p.next, time.Now()).Add(time.Duration(float64(n) / p.rate * float64(time.Second)))
}

// pause holds the next receive back for d.
func (p *pacer) pause(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.next = later(p.next, time.Now().Add(d))
}

// wait waits until the next receive may go, or for ctx.
func (p *pacer) wait(ctx context.Context) error {
	p.mu.Lock()
	at := p.next
	p.mu.Unlock()
	return backoff.Sleep(ctx, time.Until(at))
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
