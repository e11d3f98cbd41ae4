package virtualqueue

import (
	"context"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/internal/awserr"
	"github.com/tempqueues/tempqueues/internal/hostq"
	"github.com/tempqueues/tempqueues/internal/wire"
	"github.com/tempqueues/tempqueues/sqsapi"
)

// CreateQueue creates a virtual queue when the attributes include
// HostQueueUrl, and otherwise passes through. A virtual queue accepts only the
// attributes HostQueueUrl and IdleQueueRetentionPeriodSeconds (whole seconds,
// at least 1) and Tags (kept locally). Creating an existing virtual queue with
// the same retention returns its URL; with another retention it fails with
// *types.QueueNameExists, as SQS does.
func (c *Client) CreateQueue(ctx context.Context, in *sqs.CreateQueueInput, optFns ...func(*sqs.Options)) (*sqs.CreateQueueOutput, error) {
	if in == nil {
		return nil, wire.Invalid("virtualqueue.CreateQueue", "input", "nil")
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
	h, err := c.getHost(ctx, hostURL)
	if err != nil {
		return nil, err
	}
	q, err := h.CreateQueue(name, retention, in.Tags, c.opts.MaxVirtualQueues)
	if err == hostq.ErrTooManyQueues {
		err = ErrTooManyQueues
	}
	if err != nil {
		return nil, err
	}
	return &sqs.CreateQueueOutput{QueueUrl: aws.String(q.URL())}, nil
}

// checkCreate validates a virtual CreateQueue before any call.
func checkCreate(hostURL, name string, attrs map[string]string) (int32, error) {
	const op = "virtualqueue.CreateQueue"
	if hostURL == "" || wire.IsVirtualQueueURL(hostURL) {
		return 0, wire.Invalid(op, sqsapi.HostQueueURLAttribute, "%q is not a real queue URL", hostURL)
	}
	if _, _, err := wire.ParseVirtualQueueURL(wire.VirtualQueueURL(hostURL, name)); err != nil {
		return 0, withOp(err, op)
	}
	var retention int32
	for k, v := range attrs {
		switch k {
		case sqsapi.HostQueueURLAttribute:
		case sqsapi.IdleQueueRetentionPeriodAttribute:
			n, err := strconv.ParseInt(v, 10, 32)
			if err != nil || n < int64(wire.MinIdleQueueRetention/time.Second) {
				return 0, wire.Invalid(op, k, "%q must be a whole number of seconds, at least %d", v, int(wire.MinIdleQueueRetention/time.Second))
			}
			retention = int32(n)
		default:
			return 0, wire.Invalid(op, "Attributes", "virtual queues take no attribute %q (only %s and %s)", k, sqsapi.HostQueueURLAttribute, sqsapi.IdleQueueRetentionPeriodAttribute)
		}
	}
	return retention, nil
}

// DeleteQueue deletes a virtual queue locally (no API call) or passes
// through. Its buffered messages become orphans; receivers waiting on it get
// *types.QueueDoesNotExist. Deleting a host queue of this client through it
// (or finding it already gone) also drops the host's virtual queues.
func (c *Client) DeleteQueue(ctx context.Context, in *sqs.DeleteQueueInput, optFns ...func(*sqs.Options)) (*sqs.DeleteQueueOutput, error) {
	if in == nil || !wire.IsVirtualQueueURL(queueURLOf(in.QueueUrl)) {
		out, err := c.sqs.DeleteQueue(ctx, in, optFns...)
		if in != nil && (err == nil || awserr.IsQueueDoesNotExist(err)) {
			if h := c.lookupHost(queueURLOf(in.QueueUrl)); h != nil {
				h.Gone()
			}
		}
		return out, err
	}
	q, err := c.lookup("DeleteQueue", *in.QueueUrl)
	if err != nil {
		return nil, err
	}
	q.Delete()
	return &sqs.DeleteQueueOutput{}, nil
}

// GetQueueAttributes on a virtual URL answers locally: HostQueueUrl,
// IdleQueueRetentionPeriodSeconds (when set), the host's VisibilityTimeout
// and ReceiveMessageWaitTimeSeconds (and, on a FIFO host, FifoQueue and
// ContentBasedDeduplication), and the virtual queue's own approximate
// counts (buffered, and received but not deleted within their visibility).
func (c *Client) GetQueueAttributes(ctx context.Context, in *sqs.GetQueueAttributesInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error) {
	if in == nil || !wire.IsVirtualQueueURL(queueURLOf(in.QueueUrl)) {
		return c.sqs.GetQueueAttributes(ctx, in, optFns...)
	}
	q, err := c.lookup("GetQueueAttributes", *in.QueueUrl)
	if err != nil {
		return nil, err
	}
	h := q.Host()
	visible, notVisible := q.Counts()
	all := map[string]string{
		sqsapi.HostQueueURLAttribute:                                          h.URL(),
		string(types.QueueAttributeNameApproximateNumberOfMessages):           strconv.Itoa(visible),
		string(types.QueueAttributeNameApproximateNumberOfMessagesNotVisible): strconv.Itoa(notVisible),
		string(types.QueueAttributeNameApproximateNumberOfMessagesDelayed):    "0",
		string(types.QueueAttributeNameVisibilityTimeout):                     strconv.Itoa(int(h.Visibility() / time.Second)),
		string(types.QueueAttributeNameReceiveMessageWaitTimeSeconds):         strconv.Itoa(int(h.WaitTime())),
	}
	if r := q.Retention(); r > 0 {
		all[sqsapi.IdleQueueRetentionPeriodAttribute] = strconv.Itoa(int(r))
	}
	if h.FIFO() {
		all[string(types.QueueAttributeNameFifoQueue)] = "true"
		all[string(types.QueueAttributeNameContentBasedDeduplication)] = strconv.FormatBool(h.ContentBasedDeduplication())
	}
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
	if in == nil || !wire.IsVirtualQueueURL(queueURLOf(in.QueueUrl)) {
		return c.sqs.SetQueueAttributes(ctx, in, optFns...)
	}
	return nil, wire.Invalid("virtualqueue.SetQueueAttributes", "QueueUrl", "virtual queue %s has no attributes of its own; set them on the host queue", *in.QueueUrl)
}

// PurgeQueue passes through; on a virtual URL it deletes the virtual queue's
// buffered messages from the host queue (a local purge: messages already
// received and not deleted, or still on the host queue, are not affected).
func (c *Client) PurgeQueue(ctx context.Context, in *sqs.PurgeQueueInput, optFns ...func(*sqs.Options)) (*sqs.PurgeQueueOutput, error) {
	if in == nil || !wire.IsVirtualQueueURL(queueURLOf(in.QueueUrl)) {
		return c.sqs.PurgeQueue(ctx, in, optFns...)
	}
	q, err := c.lookup("PurgeQueue", *in.QueueUrl)
	if err != nil {
		return nil, err
	}
	q.Purge()
	return &sqs.PurgeQueueOutput{}, nil
}

// TagQueue passes through; on a virtual URL it sets local tags.
func (c *Client) TagQueue(ctx context.Context, in *sqs.TagQueueInput, optFns ...func(*sqs.Options)) (*sqs.TagQueueOutput, error) {
	if in == nil || !wire.IsVirtualQueueURL(queueURLOf(in.QueueUrl)) {
		return c.sqs.TagQueue(ctx, in, optFns...)
	}
	q, err := c.lookup("TagQueue", *in.QueueUrl)
	if err != nil {
		return nil, err
	}
	q.AddTags(in.Tags)
	return &sqs.TagQueueOutput{}, nil
}

// UntagQueue passes through; on a virtual URL it removes local tags.
func (c *Client) UntagQueue(ctx context.Context, in *sqs.UntagQueueInput, optFns ...func(*sqs.Options)) (*sqs.UntagQueueOutput, error) {
	if in == nil || !wire.IsVirtualQueueURL(queueURLOf(in.QueueUrl)) {
		return c.sqs.UntagQueue(ctx, in, optFns...)
	}
	q, err := c.lookup("UntagQueue", *in.QueueUrl)
	if err != nil {
		return nil, err
	}
	q.RemoveTags(in.TagKeys)
	return &sqs.UntagQueueOutput{}, nil
}

// ListQueueTags passes through; on a virtual URL it returns the local tags.
func (c *Client) ListQueueTags(ctx context.Context, in *sqs.ListQueueTagsInput, optFns ...func(*sqs.Options)) (*sqs.ListQueueTagsOutput, error) {
	if in == nil || !wire.IsVirtualQueueURL(queueURLOf(in.QueueUrl)) {
		return c.sqs.ListQueueTags(ctx, in, optFns...)
	}
	q, err := c.lookup("ListQueueTags", *in.QueueUrl)
	if err != nil {
		return nil, err
	}
	return &sqs.ListQueueTagsOutput{Tags: q.Tags()}, nil
}
