package virtualqueue

import (
	"context"
	"maps"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/internal/wire"
	"github.com/tempqueues/tempqueues/sqsapi"
)

// routed returns a copy of attrs with the routing attribute naming the
// virtual queue, after checking that it fits SQS's attribute limit and
// that the body and attribute values hold only characters SQS accepts.
func routed(op, name string, attrs map[string]types.MessageAttributeValue, body *string) (map[string]types.MessageAttributeValue, error) {
	extra := 1
	if _, ok := attrs[sqsapi.VirtualQueueNameAttribute]; ok {
		extra = 0
	}
	if err := wire.CheckMessageAttributes(op, attrs, extra); err != nil {
		return nil, err
	}
	if err := wire.CheckMessageText(op, body, attrs); err != nil {
		return nil, err
	}
	out := make(map[string]types.MessageAttributeValue, len(attrs)+1)
	maps.Copy(out, attrs)
	out[sqsapi.VirtualQueueNameAttribute] = wire.StringAttribute(name)
	if err := wire.CheckMessageSize(op, body, out); err != nil {
		return nil, err
	}
	return out, nil
}

// parseSendTarget validates a virtual destination URL.
func parseSendTarget(op, queueURL string) (hostURL, name string, err error) {
	hostURL, name, err = wire.ParseVirtualQueueURL(queueURL)
	if err != nil {
		return "", "", withOp(err, op)
	}
	return hostURL, name, nil
}

// fifoIDs returns a message's MessageGroupId and MessageDeduplicationId
// for the virtual queue name on hostURL, after checking the caller's: on a
// FIFO host the group is the virtual queue (wire.VirtualFIFOIDs), which
// needs the host's ContentBasedDeduplication (read when the host is
// opened, once); on a standard host the caller's pass as they are.
func (c *Client) fifoIDs(ctx context.Context, op, hostURL, name string, group, dedup *string, delay int32, body *string) (*string, *string, error) {
	if !wire.IsFIFOURL(hostURL) {
		return group, dedup, wire.CheckFIFOSend(op, hostURL, group, dedup, delay)
	}
	if err := wire.CheckVirtualFIFO(op, group, dedup, delay); err != nil {
		return nil, nil, err // before opening the host, which costs a call
	}
	h, err := c.getHost(ctx, hostURL)
	if err != nil {
		return nil, nil, err
	}
	return wire.VirtualFIFOIDs(op, name, group, dedup, delay, body, h.ContentBasedDeduplication())
}

// SendMessage passes through, or sends to a virtual queue: the message goes
// to the host queue with the routing attribute. The virtual queue need not
// exist in this client (it may live in another process). On a FIFO host
// the virtual queue is the message's group, and its deduplication id is
// scoped to the virtual queue (see the package documentation). Unless
// optFns are given, concurrent sends to one host share SendMessageBatch
// calls; a lone send goes out at once. A send with optFns goes alone in a
// SendMessage call, retried as a batched one is: after throttling, and
// after a transient failure until ctx's deadline.
func (c *Client) SendMessage(ctx context.Context, in *sqs.SendMessageInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	if in == nil || !wire.IsVirtualQueueURL(queueURLOf(in.QueueUrl)) {
		return c.sqs.SendMessage(ctx, in, optFns...)
	}
	const op = "virtualqueue.SendMessage"
	hostURL, name, err := parseSendTarget(op, *in.QueueUrl)
	if err != nil {
		return nil, err
	}
	attrs, err := routed(op, name, in.MessageAttributes, in.MessageBody)
	if err != nil {
		return nil, err
	}
	if err := wire.CheckDelaySeconds(op, in.DelaySeconds); err != nil {
		return nil, err
	}
	cp := *in
	if cp.MessageGroupId, cp.MessageDeduplicationId, err = c.fifoIDs(ctx, op, hostURL, name, in.MessageGroupId, in.MessageDeduplicationId, in.DelaySeconds, in.MessageBody); err != nil {
		return nil, err
	}
	c.touch(hostURL, name)
	cp.QueueUrl = aws.String(hostURL)
	cp.MessageAttributes = attrs
	return c.core.Send(ctx, op, *in.QueueUrl, &cp, optFns)
}

// SendMessageBatch passes through, or sends every entry to the virtual
// queue's host queue with the routing attribute, in one call.
func (c *Client) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	if in == nil || !wire.IsVirtualQueueURL(queueURLOf(in.QueueUrl)) {
		return c.sqs.SendMessageBatch(ctx, in, optFns...)
	}
	const op = "virtualqueue.SendMessageBatch"
	hostURL, name, err := parseSendTarget(op, *in.QueueUrl)
	if err != nil {
		return nil, err
	}
	if n := len(in.Entries); n == 0 || n > wire.MaxBatchEntries {
		return nil, wire.Invalid(op, "Entries", "%d entries; a batch takes 1 to %d", n, wire.MaxBatchEntries)
	}
	cp := *in
	cp.QueueUrl = aws.String(hostURL)
	cp.Entries = make([]types.SendMessageBatchRequestEntry, len(in.Entries))
	total := 0
	for i, e := range in.Entries {
		if err := wire.CheckDelaySeconds(op, e.DelaySeconds); err != nil {
			return nil, err
		}
		attrs, err := routed(op, name, e.MessageAttributes, e.MessageBody)
		if err != nil {
			return nil, err
		}
		if e.MessageGroupId, e.MessageDeduplicationId, err = c.fifoIDs(ctx, op, hostURL, name, e.MessageGroupId, e.MessageDeduplicationId, e.DelaySeconds, e.MessageBody); err != nil {
			return nil, err
		}
		e.MessageAttributes = attrs
		total += wire.MessageSize(e.MessageBody, attrs)
		cp.Entries[i] = e
	}
	if total > sqsapi.MaxMessageSize {
		return nil, wire.Invalid(op, "Entries", "batch of %d bytes exceeds the SQS maximum of %d", total, sqsapi.MaxMessageSize)
	}
	c.touch(hostURL, name)
	return c.sqs.SendMessageBatch(ctx, &cp, optFns...)
}

// touch records activity on a virtual queue of this client, if it exists.
func (c *Client) touch(hostURL, name string) { c.settle(hostURL, name, time.Time{}) }
