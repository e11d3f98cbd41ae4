package virtualqueue

import (
	"cmp"
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/internal/hostq"
	"github.com/tempqueues/tempqueues/internal/wire"
)

// ReceiveMessage passes through, or on a virtual URL returns messages routed
// to that virtual queue. It waits up to WaitTimeSeconds (0 to 20; when 0, the
// host queue's ReceiveMessageWaitTimeSeconds) or until ctx ends, returns as
// soon as at least one message is there, and returns at most
// MaxNumberOfMessages (1 to 10, default 1). MessageAttributeNames and
// MessageSystemAttributeNames (or AttributeNames) filter the returned
// attributes as SQS does. A VisibilityTimeout sets the host visibility of the
// returned messages. The receipt handles are the host messages'.
func (c *Client) ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, optFns ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	if in == nil || !wire.IsVirtualQueueURL(queueURLOf(in.QueueUrl)) {
		return c.sqs.ReceiveMessage(ctx, in, optFns...)
	}
	const op = "virtualqueue.ReceiveMessage"
	max, err := checkReceive(op, in)
	if err != nil {
		return nil, err
	}
	q, err := c.lookup(op, *in.QueueUrl)
	if err != nil {
		return nil, err
	}
	wait := in.WaitTimeSeconds
	if wait == 0 {
		wait = q.Host().WaitTime()
	}
	ch := make(chan result, 1)
	msgs, cancel, err := q.Receive(max, wait > 0, func(m []types.Message, err error) { ch <- result{m, err} })
	if err != nil {
		return nil, err
	}
	if cancel != nil {
		timer := time.NewTimer(time.Duration(wait) * time.Second)
		select {
		case r := <-ch:
			msgs, err = r.msgs, r.err
		case <-ctx.Done():
			msgs, err = cancelWait(cancel, ch)
			if err == nil && len(msgs) == 0 {
				err = ctx.Err()
			}
		case <-timer.C:
			msgs, err = cancelWait(cancel, ch)
		}
		timer.Stop()
		if err != nil {
			return nil, err
		}
	}
	if err := c.afterReceive(ctx, q, in, msgs); err != nil {
		return nil, err
	}
	return &sqs.ReceiveMessageOutput{Messages: filterMessages(msgs, in)}, nil
}

type result struct {
	msgs []types.Message
	err  error
}

// cancelWait ends a synchronous wait. If the receive was served in the
// meantime, its result is on ch (or about to be) and is returned, so no
// message is lost to a timeout race.
func cancelWait(cancel func() bool, ch chan result) ([]types.Message, error) {
	if cancel() {
		return nil, nil
	}
	r := <-ch
	return r.msgs, r.err
}

// afterReceive applies a receive's VisibilityTimeout to the host messages
// and waits for it. When a change fails, the receive fails with its error
// and its messages come back once the visibility they had ends, as after
// a receive whose response was lost: handing them out with a visibility
// other than the one asked for could let a slow consumer's message reach
// another before it is done.
func (c *Client) afterReceive(ctx context.Context, q *hostq.Queue, in *sqs.ReceiveMessageInput, msgs []types.Message) error {
	if in.VisibilityTimeout <= 0 || len(msgs) == 0 {
		return nil
	}
	handles := make([]string, len(msgs))
	for i, m := range msgs {
		handles[i] = aws.ToString(m.ReceiptHandle)
	}
	deadline := time.Now().Add(time.Duration(in.VisibilityTimeout) * time.Second)
	changed := handles[:0:0]
	var failed error
	for i, err := range q.Host().ChangeVisibilities(ctx, handles, in.VisibilityTimeout) {
		if err != nil {
			failed = cmp.Or(failed, err)
			continue
		}
		changed = append(changed, handles[i])
	}
	q.Settle(deadline, changed...)
	if failed != nil {
		return fmt.Errorf("virtualqueue.ReceiveMessage: setting the VisibilityTimeout of %d of %d messages: %w", len(handles)-len(changed), len(handles), failed)
	}
	return nil
}

func checkReceive(op string, in *sqs.ReceiveMessageInput) (int, error) {
	max := int(in.MaxNumberOfMessages)
	if max == 0 {
		max = 1
	}
	if max < 1 || max > wire.MaxReceiveMessages {
		return 0, wire.Invalid(op, "MaxNumberOfMessages", "%d is outside 1 to %d", in.MaxNumberOfMessages, wire.MaxReceiveMessages)
	}
	if in.WaitTimeSeconds < 0 || in.WaitTimeSeconds > wire.MaxWaitTimeSeconds {
		return 0, wire.Invalid(op, "WaitTimeSeconds", "%d is outside 0 to %d", in.WaitTimeSeconds, wire.MaxWaitTimeSeconds)
	}
	if in.VisibilityTimeout < 0 || in.VisibilityTimeout > wire.MaxVisibilityTimeout {
		return 0, wire.Invalid(op, "VisibilityTimeout", "%d is outside 0 to %d", in.VisibilityTimeout, wire.MaxVisibilityTimeout)
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
