package console

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"maps"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"
	"golang.org/x/sync/errgroup"

	"github.com/tempqueues/tempqueues/cmd/tempq/internal/bench"
	"github.com/tempqueues/tempqueues/internal/awserr"
	"github.com/tempqueues/tempqueues/reaper"
	"github.com/tempqueues/tempqueues/sqsapi"
	"github.com/tempqueues/tempqueues/sqstest"
)

// readConcurrency bounds the queues read at once for a page.
const readConcurrency = 8

// peekLimit is the most messages the peek table shows.
const peekLimit = 50

// queue is one queue as the pages show it.
type queue struct {
	URL, Name, ARN string
	FIFO           bool
	Temporary      bool     // carries the reaper's retention tag
	Lease          bool     // the sweeper lease queue of the prefix
	Sources        []string // names of the queues whose dead-letter queue this is
	DeadLetter     string   // name of this queue's dead-letter queue
	MaxReceives    string   // maxReceiveCount of its redrive policy
	Visible        int64
	InFlight       int64
	Delayed        int64
	// Oldest is the age of the oldest message, known on the emulator only
	// (SQS reports it to CloudWatch, not through its API).
	Oldest      time.Duration
	OldestKnown bool
	Tags        []tag
	Attributes  []tag // every attribute, sorted by name
}

type tag struct{ Key, Value string }

func sortedPairs(m map[string]string) []tag {
	out := make([]tag, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, tag{k, m[k]})
	}
	return out
}

// redrivePolicy is a queue's RedrivePolicy attribute.
type redrivePolicy struct {
	DeadLetterTargetArn string          `json:"deadLetterTargetArn"`
	MaxReceiveCount     json.RawMessage `json:"maxReceiveCount"` // a number or a string, as SQS accepts both
}

// queueName returns the last path element of a queue URL or ARN.
func queueName(s string) string {
	if u, err := url.Parse(s); err == nil && u.Path != "" {
		s = u.Path
	}
	return s[strings.LastIndexAny(s, "/:")+1:]
}

// listQueueURLs returns the URL of every queue with prefix, every page.
func (c *Console) listQueueURLs(ctx context.Context, prefix string) ([]string, error) {
	var urls []string
	in := &sqs.ListQueuesInput{MaxResults: aws.Int32(1000)}
	if prefix != "" {
		in.QueueNamePrefix = aws.String(prefix)
	}
	for {
		out, err := c.client.ListQueues(ctx, in)
		if err != nil {
			return nil, err
		}
		urls = append(urls, out.QueueUrls...)
		if aws.ToString(out.NextToken) == "" {
			return urls, nil
		}
		in.NextToken = out.NextToken
	}
}

// readQueue reads a queue's attributes and tags.
func (c *Console) readQueue(ctx context.Context, queueURL string) (*queue, error) {
	attrs, err := c.client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl: aws.String(queueURL), AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameAll},
	})
	if err != nil {
		return nil, err
	}
	tags, err := c.client.ListQueueTags(ctx, &sqs.ListQueueTagsInput{QueueUrl: aws.String(queueURL)})
	if err != nil {
		return nil, err
	}
	a := attrs.Attributes
	count := func(n types.QueueAttributeName) int64 {
		v, _ := strconv.ParseInt(a[string(n)], 10, 64)
		return v
	}
	_, temporary := tags.Tags[sqsapi.RetentionTag] // the idle rule's test
	q := &queue{
		URL: queueURL, Name: queueName(queueURL), ARN: a[string(types.QueueAttributeNameQueueArn)],
		FIFO:       a[string(types.QueueAttributeNameFifoQueue)] == "true",
		Temporary:  temporary,
		Visible:    count(types.QueueAttributeNameApproximateNumberOfMessages),
		InFlight:   count(types.QueueAttributeNameApproximateNumberOfMessagesNotVisible),
		Delayed:    count(types.QueueAttributeNameApproximateNumberOfMessagesDelayed),
		Tags:       sortedPairs(tags.Tags),
		Attributes: sortedPairs(a),
	}
	q.Lease = q.Name == reaper.LeaseQueueName(c.opts.Prefix)
	if p := a[string(types.QueueAttributeNameRedrivePolicy)]; p != "" {
		var rp redrivePolicy
		if json.Unmarshal([]byte(p), &rp) == nil && rp.DeadLetterTargetArn != "" {
			q.DeadLetter = queueName(rp.DeadLetterTargetArn)
			q.MaxReceives = strings.Trim(string(rp.MaxReceiveCount), `"`)
		}
	}
	if c.opts.Emulator != nil {
		if msgs, err := c.opts.Emulator.Messages(queueURL); err == nil {
			q.Oldest, q.OldestKnown = oldest(msgs, time.Now()), true
		}
	}
	return q, nil
}

// oldest returns the age of the oldest message, 0 for none.
func oldest(msgs []sqstest.Message, now time.Time) time.Duration {
	var first time.Time
	for _, m := range msgs {
		if first.IsZero() || m.SentAt.Before(first) {
			first = m.SentAt
		}
	}
	if first.IsZero() {
		return 0
	}
	return max(now.Sub(first), 0)
}

// queues reads every queue (a queue deleted meanwhile is left out) and
// links dead-letter queues to their sources.
func (c *Console) queues(ctx context.Context) ([]*queue, error) {
	urls, err := c.listQueueURLs(ctx, "")
	if err != nil {
		return nil, err
	}
	var (
		mu  sync.Mutex
		out []*queue
	)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(readConcurrency)
	for _, u := range urls {
		g.Go(func() error {
			q, err := c.readQueue(gctx, u)
			switch {
			case awserr.IsQueueDoesNotExist(err):
				return nil
			case err != nil:
				return err
			}
			mu.Lock()
			out = append(out, q)
			mu.Unlock()
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b *queue) int { return strings.Compare(a.Name, b.Name) })
	byName := make(map[string]*queue, len(out))
	for _, q := range out {
		byName[q.Name] = q
	}
	for _, q := range out {
		if d := byName[q.DeadLetter]; d != nil {
			d.Sources = append(d.Sources, q.Name)
		}
	}
	return out, nil
}

// moveTask is a message move task as the queue page shows it.
type moveTask struct {
	types.ListMessageMoveTasksResultEntry
	Started time.Time
}

// queueDetail is the queue page's data.
type queueDetail struct {
	*queue
	Tasks []moveTask
	Peek  []peeked
	More  int // messages beyond the peek table
}

// peeked is a message in the peek table, with where it stands.
type peeked struct {
	sqstest.Message
	State string // "visible", "in flight" or "delayed"
}

// messageState says where m stands at now.
func messageState(m sqstest.Message, now time.Time) string {
	switch {
	case !m.VisibleAt.After(now):
		return "visible"
	case m.ReceiveCount > 0:
		return "in flight"
	}
	return "delayed"
}

// detail reads one queue for its page: its sources and move tasks when it
// is a dead-letter queue, and its messages on the emulator.
func (c *Console) detail(ctx context.Context, queueURL string) (*queueDetail, error) {
	q, err := c.readQueue(ctx, queueURL)
	if err != nil {
		return nil, err
	}
	d := &queueDetail{queue: q}
	src, err := c.client.ListDeadLetterSourceQueues(ctx, &sqs.ListDeadLetterSourceQueuesInput{QueueUrl: aws.String(queueURL)})
	if err != nil {
		return nil, err
	}
	for _, u := range src.QueueUrls {
		q.Sources = append(q.Sources, queueName(u))
	}
	slices.Sort(q.Sources)
	if len(q.Sources) > 0 {
		tasks, err := c.client.ListMessageMoveTasks(ctx, &sqs.ListMessageMoveTasksInput{SourceArn: aws.String(q.ARN), MaxResults: aws.Int32(10)})
		if err != nil {
			return nil, err
		}
		for _, t := range tasks.Results {
			d.Tasks = append(d.Tasks, moveTask{ListMessageMoveTasksResultEntry: t, Started: time.UnixMilli(t.StartedTimestamp)})
		}
	}
	if c.opts.Emulator != nil {
		msgs, err := c.opts.Emulator.Messages(queueURL)
		if err != nil {
			return nil, err
		}
		if len(msgs) > peekLimit {
			d.More = len(msgs) - peekLimit
			msgs = msgs[:peekLimit]
		}
		now := time.Now() // the emulator runs on real time
		for _, m := range msgs {
			d.Peek = append(d.Peek, peeked{Message: m, State: messageState(m, now)})
		}
	}
	return d, nil
}

// lease is the sweeper lease as the temporary page shows it.
type lease struct {
	Name   string
	Exists bool
	// Held: the token is in flight, taken by a process that sweeps; Free:
	// visible, for the first poll of the next window.
	Held, Free bool
	// HeldUntil is when the token reappears (emulator only).
	HeldUntil time.Time
	Receives  int
	NextSweep time.Time
	Period    time.Duration
}

// temporary is the temporary queues page's data.
type temporary struct {
	Prefix string
	Queues []temporaryQueue
	Lease  lease
}

type temporaryQueue struct {
	reaper.QueueStatus
	Name  string        // the queue's, the last segment of its URL
	Owner string        // the owner's name prefix: <prefix><uuid>
	Age   time.Duration // of the heartbeat
	Share float64       // age / retention, for the bar
}

// temporaries reads the prefix's queues as the reaper sees them, and the
// lease.
func (c *Console) temporaries(ctx context.Context) (*temporary, error) {
	qs, err := c.sweeper.Queues(ctx)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	period := cmp.Or(c.opts.SweepPeriod, 5*time.Minute)
	t := &temporary{Prefix: c.opts.Prefix, Lease: lease{Name: reaper.LeaseQueueName(c.opts.Prefix), Period: period, NextSweep: reaper.NextSweepWindow(now, period)}}
	for _, q := range qs {
		name := path.Base(q.QueueURL)
		if name == t.Lease.Name {
			t.Lease.Exists = true
			if err := c.readLease(ctx, q.QueueURL, &t.Lease); err != nil {
				return nil, err
			}
		}
		if q.Verdict == reaper.VerdictReserved {
			continue
		}
		tq := temporaryQueue{QueueStatus: q, Name: name}
		if q.RequesterHostQueue {
			tq.Owner = name[:strings.LastIndexByte(name, '-')]
		}
		if !q.Heartbeat.IsZero() {
			tq.Age = now.Sub(q.Heartbeat)
			if q.Retention > 0 {
				tq.Share = tq.Age.Seconds() / q.Retention.Seconds()
			}
		}
		t.Queues = append(t.Queues, tq)
	}
	return t, nil
}

// readLease reads the lease queue's counts, and on the emulator its token.
func (c *Console) readLease(ctx context.Context, queueURL string, l *lease) error {
	out, err := c.client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(queueURL), AttributeNames: []types.QueueAttributeName{
		types.QueueAttributeNameApproximateNumberOfMessages, types.QueueAttributeNameApproximateNumberOfMessagesNotVisible,
	}})
	if awserr.IsQueueDoesNotExist(err) {
		l.Exists = false
		return nil
	}
	if err != nil {
		return err
	}
	l.Held = out.Attributes[string(types.QueueAttributeNameApproximateNumberOfMessagesNotVisible)] != "0"
	l.Free = out.Attributes[string(types.QueueAttributeNameApproximateNumberOfMessages)] != "0"
	if c.opts.Emulator == nil {
		return nil
	}
	msgs, err := c.opts.Emulator.Messages(queueURL)
	if err != nil {
		return err
	}
	now := time.Now() // the emulator runs on real time
	for _, m := range msgs {
		if messageState(m, now) == "in flight" {
			l.HeldUntil, l.Receives = m.VisibleAt, m.ReceiveCount
		}
	}
	return nil
}

// calls are the cumulative call counts the calls page charts.
type calls struct {
	At int64 `json:"at"` // Unix milliseconds
	// Served are the calls the emulator served, the console's own left
	// out; nil on other endpoints.
	Served map[string]int64 `json:"served"`
	// Console are the calls the console itself made.
	Console map[string]int64 `json:"console"`
	// PricePerMillion is SQS's price of a million standard-queue calls.
	PricePerMillion float64 `json:"price_per_million"`
}

func (c *Console) callCounts() calls {
	out := calls{At: time.Now().UnixMilli(), Console: map[string]int64{}, PricePerMillion: bench.PricePerMillionCalls}
	if c.opts.Counter != nil {
		out.Console = c.opts.Counter.Snapshot()
	}
	if c.opts.Emulator != nil {
		out.Served = c.opts.Emulator.Calls()
		for op, n := range out.Console {
			if v := out.Served[op] - n; v > 0 {
				out.Served[op] = v
			} else {
				delete(out.Served, op)
			}
		}
	}
	return out
}

// apiError renders an error as the API gave it: "Code: message".
func apiError(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode() + ": " + ae.ErrorMessage()
	}
	return err.Error()
}
