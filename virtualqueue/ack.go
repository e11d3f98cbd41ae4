package virtualqueue

import (
	"context"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/internal/wire"
	"github.com/tempqueues/tempqueues/sqsapi"
)

// settle records activity on a virtual queue of this client, if it exists,
// and updates the in-flight record of handles received from it: deleted
// (deadline zero) or with a new visibility deadline.
func (c *Client) settle(hostURL, name string, deadline time.Time, handles ...string) {
	if h := c.lookupHost(hostURL); h != nil {
		if q := h.Queue(name); q != nil {
			q.Settle(deadline, handles...)
		}
	}
}

// DeleteMessage passes through, or deletes a message received from a virtual
// queue from its host queue. Concurrent deletes to one host share
// DeleteMessageBatch calls; a lone delete goes out at once. It works even
// after Close or after the virtual queue was deleted: deleting a handled
// message is always right.
func (c *Client) DeleteMessage(ctx context.Context, in *sqs.DeleteMessageInput, optFns ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error) {
	if in == nil || !wire.IsVirtualQueueURL(queueURLOf(in.QueueUrl)) {
		return c.sqs.DeleteMessage(ctx, in, optFns...)
	}
	const op = "virtualqueue.DeleteMessage"
	hostURL, name, err := wire.ParseVirtualQueueURL(*in.QueueUrl)
	if err != nil {
		return nil, withOp(err, op)
	}
	handle := aws.ToString(in.ReceiptHandle)
	if handle == "" {
		return nil, wire.Invalid(op, "ReceiptHandle", "empty")
	}
	c.settle(hostURL, name, time.Time{}, handle)
	h := c.lookupHost(hostURL)
	if len(optFns) > 0 || h == nil || h.Closed() {
		// Deleting a handled message is always right, even with no open
		// host to batch it.
		return c.sqs.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(hostURL), ReceiptHandle: in.ReceiptHandle}, optFns...)
	}
	if err := h.DeleteMessage(ctx, handle); err != nil {
		return nil, err
	}
	return &sqs.DeleteMessageOutput{}, nil
}

// DeleteMessageBatch passes through, or deletes messages received from a
// virtual queue from its host queue in one call.
func (c *Client) DeleteMessageBatch(ctx context.Context, in *sqs.DeleteMessageBatchInput, optFns ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error) {
	if in == nil || !wire.IsVirtualQueueURL(queueURLOf(in.QueueUrl)) {
		return c.sqs.DeleteMessageBatch(ctx, in, optFns...)
	}
	const op = "virtualqueue.DeleteMessageBatch"
	hostURL, name, err := wire.ParseVirtualQueueURL(*in.QueueUrl)
	if err != nil {
		return nil, withOp(err, op)
	}
	if n := len(in.Entries); n == 0 || n > wire.MaxBatchEntries {
		return nil, wire.Invalid(op, "Entries", "%d entries; a batch takes 1 to %d", n, wire.MaxBatchEntries)
	}
	handles := make([]string, len(in.Entries))
	for i, e := range in.Entries {
		handles[i] = aws.ToString(e.ReceiptHandle)
	}
	c.settle(hostURL, name, time.Time{}, handles...)
	cp := *in
	cp.QueueUrl = aws.String(hostURL)
	return c.sqs.DeleteMessageBatch(ctx, &cp, optFns...)
}

// ChangeMessageVisibility passes through, or changes the host visibility of a
// message received from a virtual queue. Concurrent changes to one host share
// ChangeMessageVisibilityBatch calls.
func (c *Client) ChangeMessageVisibility(ctx context.Context, in *sqs.ChangeMessageVisibilityInput, optFns ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error) {
	if in == nil || !wire.IsVirtualQueueURL(queueURLOf(in.QueueUrl)) {
		return c.sqs.ChangeMessageVisibility(ctx, in, optFns...)
	}
	const op = "virtualqueue.ChangeMessageVisibility"
	hostURL, name, err := wire.ParseVirtualQueueURL(*in.QueueUrl)
	if err != nil {
		return nil, withOp(err, op)
	}
	if in.VisibilityTimeout < 0 || in.VisibilityTimeout > wire.MaxVisibilityTimeout {
		return nil, wire.Invalid(op, "VisibilityTimeout", "%d is outside 0 to %d", in.VisibilityTimeout, wire.MaxVisibilityTimeout)
	}
	handle := aws.ToString(in.ReceiptHandle)
	if handle == "" {
		return nil, wire.Invalid(op, "ReceiptHandle", "empty")
	}
	if c.isClosed() {
		return nil, sqsapi.ErrClosed
	}
	c.settle(hostURL, name, time.Now().Add(time.Duration(in.VisibilityTimeout)*time.Second), handle)
	h := c.lookupHost(hostURL)
	if len(optFns) > 0 || h == nil || h.Closed() {
		cp := *in
		cp.QueueUrl = aws.String(hostURL)
		return c.sqs.ChangeMessageVisibility(ctx, &cp, optFns...)
	}
	if err := h.ChangeVisibility(ctx, handle, in.VisibilityTimeout); err != nil {
		return nil, err
	}
	return &sqs.ChangeMessageVisibilityOutput{}, nil
}

// ChangeMessageVisibilityBatch passes through, or changes the host visibility
// of messages received from a virtual queue in one call.
func (c *Client) ChangeMessageVisibilityBatch(ctx context.Context, in *sqs.ChangeMessageVisibilityBatchInput, optFns ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error) {
	if in == nil || !wire.IsVirtualQueueURL(queueURLOf(in.QueueUrl)) {
		return c.sqs.ChangeMessageVisibilityBatch(ctx, in, optFns...)
	}
	const op = "virtualqueue.ChangeMessageVisibilityBatch"
	hostURL, name, err := wire.ParseVirtualQueueURL(*in.QueueUrl)
	if err != nil {
		return nil, withOp(err, op)
	}
	if n := len(in.Entries); n == 0 || n > wire.MaxBatchEntries {
		return nil, wire.Invalid(op, "Entries", "%d entries; a batch takes 1 to %d", n, wire.MaxBatchEntries)
	}
	for _, e := range in.Entries {
		if e.VisibilityTimeout < 0 || e.VisibilityTimeout > wire.MaxVisibilityTimeout {
			return nil, wire.Invalid(op, "VisibilityTimeout", "%d is outside 0 to %d", e.VisibilityTimeout, wire.MaxVisibilityTimeout)
		}
	}
	if c.isClosed() {
		return nil, sqsapi.ErrClosed
	}
	now := time.Now()
	for _, e := range in.Entries {
		c.settle(hostURL, name, now.Add(time.Duration(e.VisibilityTimeout)*time.Second), aws.ToString(e.ReceiptHandle))
	}
	cp := *in
	cp.QueueUrl = aws.String(hostURL)
	cp.Entries = append([]types.ChangeMessageVisibilityBatchRequestEntry(nil), in.Entries...)
	return c.sqs.ChangeMessageVisibilityBatch(ctx, &cp, optFns...)
}
