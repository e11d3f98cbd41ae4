package virtualqueue

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/internal/batch"
	"github.com/tempqueues/tempqueues/sqsapi"
)

// waiter is a receive waiting for messages on a virtual queue. fn runs once,
// outside the host lock, with messages or an error.
type waiter struct {
	max int
	fn  func([]types.Message, error)
}

// ReceiveMessage passes through, or on a virtual URL returns messages routed
// to that virtual queue. It waits up to WaitTimeSeconds (0 to 20; when 0, the
// host queue's ReceiveMessageWaitTimeSeconds) or until ctx ends, returns as
// soon as at least one message is there, and returns at most
// MaxNumberOfMessages (1 to 10, default 1). MessageAttributeNames and
// MessageSystemAttributeNames (or AttributeNames) filter the returned
// attributes as SQS does. A VisibilityTimeout sets the host visibility of the
// returned messages. The receipt handles are the host messages'.
func (c *Client) ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, optFns ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	if in == nil || !sqsapi.IsVirtualQueueURL(queueURLOf(in.QueueUrl)) {
		return c.sqs.ReceiveMessage(ctx, in, optFns...)
	}
	const op = "ReceiveMessage"
	max, err := checkReceive(op, in)
	if err != nil {
		return nil, err
	}
	h, q, err := c.lookup(op, *in.QueueUrl)
	if err != nil {
		return nil, err
	}
	wait := in.WaitTimeSeconds
	if wait == 0 {
		wait = h.waitTime
	}
	ch := make(chan result, 1)
	w := &waiter{max: max, fn: func(m []types.Message, err error) { ch <- result{m, err} }}
	msgs, registered, err := h.receive(q, w, wait > 0)
	if err != nil {
		return nil, err
	}
	if registered {
		timer := time.NewTimer(time.Duration(wait) * time.Second)
		select {
		case r := <-ch:
			msgs, err = r.msgs, r.err
		case <-ctx.Done():
			msgs, err = h.cancelWait(q, w, ch)
			if err == nil && len(msgs) == 0 {
				err = ctx.Err()
			}
		case <-timer.C:
			msgs, err = h.cancelWait(q, w, ch)
		}
		timer.Stop()
		if err != nil {
			return nil, err
		}
	}
	c.afterReceive(h, q, in, msgs)
	return &sqs.ReceiveMessageOutput{Messages: filterMessages(msgs, in)}, nil
}

type result struct {
	msgs []types.Message
	err  error
}

// ReceiveMessageFunc registers fn to be called once with the next messages
// (at most max, 1 to 10) routed to the virtual queue at queueURL, or with an
// error if the queue is deleted, its host queue fails or the client closes.
// fn runs on a client goroutine and must not block for long; when messages
// are buffered already, it runs at once, on the caller's goroutine, before
// ReceiveMessageFunc returns. No goroutine
// waits on behalf of the registration: it is a callback, so any number can
// be pending. The returned cancel function withdraws the registration and
// reports whether it did so before fn was called. While registered, the
// virtual queue does not expire. Messages are returned with all their
// attributes; their receipt handles are the host messages'.
func (c *Client) ReceiveMessageFunc(queueURL string, max int, fn func([]types.Message, error)) (cancel func() bool, err error) {
	if max < 1 || max > sqsapi.MaxReceiveMessages {
		return nil, sqsapi.Invalid("ReceiveMessageFunc", "max", "%d is outside 1 to %d", max, sqsapi.MaxReceiveMessages)
	}
	if fn == nil {
		return nil, sqsapi.Invalid("ReceiveMessageFunc", "fn", "nil")
	}
	h, q, err := c.lookup("ReceiveMessageFunc", queueURL)
	if err != nil {
		return nil, err
	}
	w := &waiter{max: max, fn: fn}
	msgs, registered, err := h.receive(q, w, true)
	if err != nil {
		return nil, err
	}
	if !registered {
		fn(msgs, nil)
		return func() bool { return false }, nil
	}
	return func() bool { return h.withdraw(q, w) }, nil
}

// receive takes buffered messages for w at once, or registers w to wait when
// there are none and wait is true. A short poll (wait false) that finds
// nothing asks the poller for one receive so later polls find messages.
func (h *host) receive(q *vqueue, w *waiter, wait bool) (msgs []types.Message, registered bool, err error) {
	now := time.Now()
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.closedErrLocked(); err != nil {
		return nil, false, err
	}
	if q.removed {
		return nil, false, sqsapi.NewQueueDoesNotExist("virtual queue " + q.url() + " does not exist")
	}
	q.touch(now)
	if msgs := q.takeLocked(w.max, now); len(msgs) > 0 {
		q.compactLocked()
		return msgs, false, nil
	}
	if !wait {
		h.kick = true
		h.startPollersLocked()
		return nil, false, nil
	}
	st := q.state()
	st.waiters = append(st.waiters, w)
	q.receivers++
	h.demand++
	h.startPollersLocked()
	return nil, true, nil
}

// withdraw removes a registered waiter; false means it was already served.
func (h *host) withdraw(q *vqueue, w *waiter) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if q.st == nil {
		return false
	}
	i := slices.Index(q.st.waiters, w)
	if i < 0 {
		return false
	}
	q.st.waiters = slices.Delete(q.st.waiters, i, i+1)
	h.demand--
	q.receivers--
	q.touch(time.Now())
	q.compactLocked()
	return true
}

// cancelWait ends a synchronous wait. If the waiter was served in the
// meantime, its result is on ch (or about to be) and is returned, so no
// message is lost to a timeout race.
func (h *host) cancelWait(q *vqueue, w *waiter, ch chan result) ([]types.Message, error) {
	if h.withdraw(q, w) {
		return nil, nil
	}
	r := <-ch
	return r.msgs, r.err
}

// afterReceive applies a receive's VisibilityTimeout to the host messages.
func (c *Client) afterReceive(h *host, q *vqueue, in *sqs.ReceiveMessageInput, msgs []types.Message) {
	if in.VisibilityTimeout <= 0 || len(msgs) == 0 {
		return
	}
	deadline := time.Now().Add(time.Duration(in.VisibilityTimeout) * time.Second)
	for _, m := range msgs {
		c.vis.Submit(h.url, batch.Visibility{ReceiptHandle: aws.ToString(m.ReceiptHandle), Timeout: in.VisibilityTimeout}, nil)
	}
	h.mu.Lock()
	if q.st != nil && q.st.inflight != nil {
		for _, m := range msgs {
			q.st.inflight[aws.ToString(m.ReceiptHandle)] = deadline
		}
	}
	h.mu.Unlock()
}

func checkReceive(op string, in *sqs.ReceiveMessageInput) (int, error) {
	max := int(in.MaxNumberOfMessages)
	if max == 0 {
		max = 1
	}
	if max < 1 || max > sqsapi.MaxReceiveMessages {
		return 0, sqsapi.Invalid(op, "MaxNumberOfMessages", "%d is outside 1 to %d", in.MaxNumberOfMessages, sqsapi.MaxReceiveMessages)
	}
	if in.WaitTimeSeconds < 0 || in.WaitTimeSeconds > sqsapi.MaxWaitTimeSeconds {
		return 0, sqsapi.Invalid(op, "WaitTimeSeconds", "%d is outside 0 to %d", in.WaitTimeSeconds, sqsapi.MaxWaitTimeSeconds)
	}
	if in.VisibilityTimeout < 0 || in.VisibilityTimeout > sqsapi.MaxVisibilityTimeout {
		return 0, sqsapi.Invalid(op, "VisibilityTimeout", "%d is outside 0 to %d", in.VisibilityTimeout, sqsapi.MaxVisibilityTimeout)
	}
	return max, nil
}

// filterMessages returns copies of msgs carrying only the message attributes
// and system attributes the receive asked for, as SQS does.
func filterMessages(msgs []types.Message, in *sqs.ReceiveMessageInput) []types.Message {
	if len(msgs) == 0 {
		return []types.Message{}
	}
	var sys []string
	for _, n := range in.MessageSystemAttributeNames {
		sys = append(sys, string(n))
	}
	sys = append(sys, deprecatedAttributeNames(in)...)
	out := make([]types.Message, len(msgs))
	for i, m := range msgs {
		m.MessageAttributes = filterAttrs(m.MessageAttributes, in.MessageAttributeNames)
		if m.MessageAttributes == nil {
			m.MD5OfMessageAttributes = nil
		}
		m.Attributes = filterAttrs(m.Attributes, sys)
		out[i] = m
	}
	return out
}

func filterAttrs[V any](attrs map[string]V, names []string) map[string]V {
	if len(attrs) == 0 || len(names) == 0 {
		return nil
	}
	out := make(map[string]V)
	for k, v := range attrs {
		for _, n := range names {
			if n == "All" || n == ".*" || n == k || (strings.HasSuffix(n, ".*") && strings.HasPrefix(k, strings.TrimSuffix(n, "*"))) {
				out[k] = v
				break
			}
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// deprecatedAttributeNames returns the names in the deprecated AttributeNames
// field, which SQS still honours for system attributes.
func deprecatedAttributeNames(in *sqs.ReceiveMessageInput) []string {
	//lint:ignore SA1019 SQS still honours the deprecated field; so must a drop-in client
	names := in.AttributeNames
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = string(n)
	}
	return out
}
