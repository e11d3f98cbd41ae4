package virtualqueue

import (
	"context"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/sqsapi"
)

// vqueue is one virtual queue. An idle one (nothing buffered, nobody waiting,
// no tags) is just this struct and its map entry: its busy state lives in a
// separately allocated vqState that is dropped when it empties. All fields are
// guarded by the host's mutex.
type vqueue struct {
	name       string
	h          *host
	lastActive int64 // unix nanoseconds
	expireAt   int64 // when the expiry heap next looks at it
	retention  int32 // idle seconds before expiry; 0 = never
	heapIdx    int32 // index in the host's expiry heap, -1 when absent
	receivers  int32 // receives in progress, which keep the queue alive
	removed    bool
	st         *vqState
}

type vqState struct {
	buf      []*bufMsg
	waiters  []*waiter
	tags     map[string]string
	inflight map[string]time.Time // receipt handle -> host visibility deadline
}

func (q *vqueue) state() *vqState {
	if q.st == nil {
		q.st = &vqState{}
	}
	return q.st
}

// compactLocked drops the busy state of a queue that became idle.
func (q *vqueue) compactLocked() {
	if st := q.st; st != nil && len(st.buf) == 0 && len(st.waiters) == 0 && len(st.tags) == 0 && len(st.inflight) == 0 {
		q.st = nil
	}
}

func (q *vqueue) touch(now time.Time) { q.lastActive = now.UnixNano() }

func (q *vqueue) url() string { return sqsapi.VirtualQueueURL(q.h.url, q.name) }

// unbufferLocked removes b from the queue's buffer.
func (q *vqueue) unbufferLocked(b *bufMsg) {
	if q.st == nil {
		return
	}
	if i := slices.Index(q.st.buf, b); i >= 0 {
		q.st.buf = slices.Delete(q.st.buf, i, i+1)
	}
	q.compactLocked()
}

// takeLocked removes up to n buffered messages and records them in flight.
func (q *vqueue) takeLocked(n int, now time.Time) []types.Message {
	st := q.st
	if st == nil || len(st.buf) == 0 {
		return nil
	}
	n = min(n, len(st.buf))
	msgs := make([]types.Message, n)
	if st.inflight == nil {
		st.inflight = make(map[string]time.Time)
	} else if len(st.inflight) >= 64 {
		// Messages received and never deleted through this client (left to
		// redeliver) would otherwise stay recorded forever.
		for hd, dl := range st.inflight {
			if !dl.After(now) {
				delete(st.inflight, hd)
			}
		}
	}
	for i, b := range st.buf[:n] {
		b.taken = true
		msgs[i] = b.m
		st.inflight[aws.ToString(b.m.ReceiptHandle)] = b.deadline
	}
	clear(st.buf[:n])
	st.buf = st.buf[n:]
	q.touch(now)
	return msgs
}

// serveWaitersLocked hands buffered messages to waiting receivers, oldest
// first, and appends the deliveries to run once the lock is released.
func (q *vqueue) serveWaitersLocked(out []delivery, now time.Time) []delivery {
	st := q.st
	for st != nil && len(st.buf) > 0 && len(st.waiters) > 0 {
		w := st.waiters[0]
		st.waiters = st.waiters[1:]
		q.h.demand--
		q.receivers--
		out = append(out, delivery{w: w, msgs: q.takeLocked(w.max, now)})
	}
	q.compactLocked()
	return out
}

// removeLocked unlinks the queue from its host and returns its buffered
// messages and waiting receivers, which the caller settles unlocked.
func (q *vqueue) removeLocked() ([]*bufMsg, []*waiter) {
	return q.h.removeLocked(q)
}

func (h *host) removeLocked(q *vqueue) ([]*bufMsg, []*waiter) {
	if q.removed {
		return nil, nil
	}
	q.removed = true
	if h.queues[q.name] == q {
		delete(h.queues, q.name)
		h.c.queues.Add(-1)
	}
	if q.heapIdx >= 0 {
		h.expiry.remove(q)
	}
	st := q.st
	q.st = nil
	if st == nil {
		return nil, nil
	}
	for _, b := range st.buf {
		b.taken = true
	}
	h.demand -= len(st.waiters)
	q.receivers = 0
	return st.buf, st.waiters
}

// settleRemoved finishes a virtual queue's removal outside the host lock:
// its buffered messages become orphans and its waiting receivers learn that
// the queue is gone.
func (c *Client) settleRemoved(h *host, dropped []*bufMsg, failed []*waiter) {
	for _, w := range failed {
		w.fn(nil, sqsapi.NewQueueDoesNotExist("virtual queue was deleted while a receive waited"))
	}
	for _, b := range dropped {
		h.orphan(b.m)
	}
}

// CreateQueue creates a virtual queue when the attributes include
// HostQueueUrl, and otherwise passes through. A virtual queue accepts only the
// attributes HostQueueUrl and IdleQueueRetentionPeriodSeconds (whole seconds,
// at least 1) and Tags (kept locally). Creating an existing virtual queue with
// the same retention returns its URL; with another retention it fails with
// *types.QueueNameExists, as SQS does.
func (c *Client) CreateQueue(ctx context.Context, in *sqs.CreateQueueInput, optFns ...func(*sqs.Options)) (*sqs.CreateQueueOutput, error) {
	if in == nil {
		return nil, sqsapi.Invalid("CreateQueue", "input", "nil")
	}
	hostURL, virtual := in.Attributes[sqsapi.HostQueueURLAttribute]
	if !virtual {
		return c.sqs.CreateQueue(ctx, in, optFns...)
	}
	name := aws.ToString(in.QueueName)
	retention, err := checkCreate(hostURL, name, in.Attributes)
	if err != nil {
		return nil, err
	}
	if c.closed.Load() {
		return nil, ErrClosed
	}
	h, err := c.getHost(ctx, hostURL)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.closedErrLocked(); err != nil {
		return nil, err
	}
	if q := h.queues[name]; q != nil {
		if q.retention != retention {
			return nil, &types.QueueNameExists{Message: aws.String("virtual queue " + name + " exists with a different " + sqsapi.IdleQueueRetentionPeriodAttribute)}
		}
		q.touch(now)
		q.addTagsLocked(in.Tags)
		return &sqs.CreateQueueOutput{QueueUrl: aws.String(q.url())}, nil
	}
	if m := c.opts.MaxVirtualQueues; m > 0 && c.queues.Load() >= int64(m) {
		return nil, ErrTooManyQueues
	}
	q := &vqueue{name: name, h: h, retention: retention, heapIdx: -1, lastActive: now.UnixNano()}
	q.addTagsLocked(in.Tags)
	h.queues[name] = q
	c.queues.Add(1)
	if retention > 0 {
		q.expireAt = now.Add(time.Duration(retention) * time.Second).UnixNano()
		if h.expiry.push(q) {
			h.wakeByLocked(time.Unix(0, q.expireAt))
		}
	}
	return &sqs.CreateQueueOutput{QueueUrl: aws.String(q.url())}, nil
}

// checkCreate validates a virtual CreateQueue before any call.
func checkCreate(hostURL, name string, attrs map[string]string) (int32, error) {
	const op = "CreateQueue"
	if hostURL == "" || sqsapi.IsVirtualQueueURL(hostURL) {
		return 0, sqsapi.Invalid(op, sqsapi.HostQueueURLAttribute, "%q is not a real queue URL", hostURL)
	}
	if _, _, err := sqsapi.ParseVirtualQueueURL(sqsapi.VirtualQueueURL(hostURL, name)); err != nil {
		return 0, withOp(err, op)
	}
	var retention int32
	for k, v := range attrs {
		switch k {
		case sqsapi.HostQueueURLAttribute:
		case sqsapi.IdleQueueRetentionPeriodAttribute:
			n, err := strconv.ParseInt(v, 10, 32)
			if err != nil || n < int64(sqsapi.MinIdleQueueRetention/time.Second) {
				return 0, sqsapi.Invalid(op, k, "%q must be a whole number of seconds, at least %d", v, int(sqsapi.MinIdleQueueRetention/time.Second))
			}
			retention = int32(n)
		default:
			return 0, sqsapi.Invalid(op, "Attributes", "virtual queues take no attribute %q (only %s and %s)", k, sqsapi.HostQueueURLAttribute, sqsapi.IdleQueueRetentionPeriodAttribute)
		}
	}
	return retention, nil
}

func (q *vqueue) addTagsLocked(tags map[string]string) {
	if len(tags) == 0 {
		return
	}
	st := q.state()
	if st.tags == nil {
		st.tags = make(map[string]string, len(tags))
	}
	maps.Copy(st.tags, tags)
}

// DeleteQueue deletes a virtual queue locally (no API call) or passes
// through. Its buffered messages become orphans; receivers waiting on it get
// *types.QueueDoesNotExist.
func (c *Client) DeleteQueue(ctx context.Context, in *sqs.DeleteQueueInput, optFns ...func(*sqs.Options)) (*sqs.DeleteQueueOutput, error) {
	if in == nil || !sqsapi.IsVirtualQueueURL(queueURLOf(in.QueueUrl)) {
		return c.sqs.DeleteQueue(ctx, in, optFns...)
	}
	h, q, err := c.lookup("DeleteQueue", *in.QueueUrl)
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	dropped, failed := q.removeLocked()
	h.mu.Unlock()
	c.settleRemoved(h, dropped, failed)
	return &sqs.DeleteQueueOutput{}, nil
}

// GetQueueAttributes on a virtual URL answers locally: HostQueueUrl,
// IdleQueueRetentionPeriodSeconds (when set), the host's VisibilityTimeout
// and ReceiveMessageWaitTimeSeconds, and the virtual queue's own approximate
// counts (buffered, and received but not deleted within their visibility).
func (c *Client) GetQueueAttributes(ctx context.Context, in *sqs.GetQueueAttributesInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error) {
	if in == nil || !sqsapi.IsVirtualQueueURL(queueURLOf(in.QueueUrl)) {
		return c.sqs.GetQueueAttributes(ctx, in, optFns...)
	}
	h, q, err := c.lookup("GetQueueAttributes", *in.QueueUrl)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	h.mu.Lock()
	visible, notVisible := 0, 0
	if st := q.st; st != nil {
		visible = len(st.buf)
		for handle, dl := range st.inflight {
			if dl.After(now) {
				notVisible++
			} else {
				delete(st.inflight, handle)
			}
		}
		q.compactLocked()
	}
	all := map[string]string{
		sqsapi.HostQueueURLAttribute:                                          h.url,
		string(types.QueueAttributeNameApproximateNumberOfMessages):           strconv.Itoa(visible),
		string(types.QueueAttributeNameApproximateNumberOfMessagesNotVisible): strconv.Itoa(notVisible),
		string(types.QueueAttributeNameApproximateNumberOfMessagesDelayed):    "0",
		string(types.QueueAttributeNameVisibilityTimeout):                     strconv.Itoa(int(h.visibility / time.Second)),
		string(types.QueueAttributeNameReceiveMessageWaitTimeSeconds):         strconv.Itoa(int(h.waitTime)),
	}
	if q.retention > 0 {
		all[sqsapi.IdleQueueRetentionPeriodAttribute] = strconv.Itoa(int(q.retention))
	}
	h.mu.Unlock()
	out := make(map[string]string)
	for _, n := range in.AttributeNames {
		if n == types.QueueAttributeNameAll {
			out = all
			break
		}
		if v, ok := all[string(n)]; ok {
			out[string(n)] = v
		}
	}
	return &sqs.GetQueueAttributesOutput{Attributes: out}, nil
}

// SetQueueAttributes passes through; on a virtual URL it fails with an error
// matching sqsapi.ErrInvalidInput: virtual queues take their settings from
// the host queue.
func (c *Client) SetQueueAttributes(ctx context.Context, in *sqs.SetQueueAttributesInput, optFns ...func(*sqs.Options)) (*sqs.SetQueueAttributesOutput, error) {
	if in == nil || !sqsapi.IsVirtualQueueURL(queueURLOf(in.QueueUrl)) {
		return c.sqs.SetQueueAttributes(ctx, in, optFns...)
	}
	return nil, sqsapi.Invalid("SetQueueAttributes", "QueueUrl", "virtual queue %s has no attributes of its own; set them on the host queue", *in.QueueUrl)
}

// PurgeQueue passes through; on a virtual URL it deletes the virtual queue's
// buffered messages from the host queue (a local purge: messages already
// received and not deleted, or still on the host queue, are not affected).
func (c *Client) PurgeQueue(ctx context.Context, in *sqs.PurgeQueueInput, optFns ...func(*sqs.Options)) (*sqs.PurgeQueueOutput, error) {
	if in == nil || !sqsapi.IsVirtualQueueURL(queueURLOf(in.QueueUrl)) {
		return c.sqs.PurgeQueue(ctx, in, optFns...)
	}
	h, q, err := c.lookup("PurgeQueue", *in.QueueUrl)
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	var purged []*bufMsg
	if st := q.st; st != nil {
		purged = st.buf
		st.buf = nil
		for _, b := range purged {
			b.taken = true
		}
		q.compactLocked()
	}
	q.touch(time.Now())
	h.mu.Unlock()
	for _, b := range purged {
		h.deleteAsync(b.m, "purge")
	}
	return &sqs.PurgeQueueOutput{}, nil
}

// TagQueue passes through; on a virtual URL it sets local tags.
func (c *Client) TagQueue(ctx context.Context, in *sqs.TagQueueInput, optFns ...func(*sqs.Options)) (*sqs.TagQueueOutput, error) {
	if in == nil || !sqsapi.IsVirtualQueueURL(queueURLOf(in.QueueUrl)) {
		return c.sqs.TagQueue(ctx, in, optFns...)
	}
	h, q, err := c.lookup("TagQueue", *in.QueueUrl)
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	q.addTagsLocked(in.Tags)
	h.mu.Unlock()
	return &sqs.TagQueueOutput{}, nil
}

// UntagQueue passes through; on a virtual URL it removes local tags.
func (c *Client) UntagQueue(ctx context.Context, in *sqs.UntagQueueInput, optFns ...func(*sqs.Options)) (*sqs.UntagQueueOutput, error) {
	if in == nil || !sqsapi.IsVirtualQueueURL(queueURLOf(in.QueueUrl)) {
		return c.sqs.UntagQueue(ctx, in, optFns...)
	}
	h, q, err := c.lookup("UntagQueue", *in.QueueUrl)
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	if q.st != nil {
		for _, k := range in.TagKeys {
			delete(q.st.tags, k)
		}
		q.compactLocked()
	}
	h.mu.Unlock()
	return &sqs.UntagQueueOutput{}, nil
}

// ListQueueTags passes through; on a virtual URL it returns the local tags.
func (c *Client) ListQueueTags(ctx context.Context, in *sqs.ListQueueTagsInput, optFns ...func(*sqs.Options)) (*sqs.ListQueueTagsOutput, error) {
	if in == nil || !sqsapi.IsVirtualQueueURL(queueURLOf(in.QueueUrl)) {
		return c.sqs.ListQueueTags(ctx, in, optFns...)
	}
	h, q, err := c.lookup("ListQueueTags", *in.QueueUrl)
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	tags := map[string]string{}
	if q.st != nil {
		maps.Copy(tags, q.st.tags)
	}
	h.mu.Unlock()
	return &sqs.ListQueueTagsOutput{Tags: tags}, nil
}
