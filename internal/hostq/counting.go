package hostq

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/tempqueues/tempqueues/internal/callcount"
	"github.com/tempqueues/tempqueues/sqsapi"
)

// CountCalls returns client wrapped to count each call by operation in n,
// so Stats report exactly the API calls a client made (SQS bills each),
// whatever the client is.
func CountCalls(client sqsapi.Client, n *callcount.Counter) sqsapi.Client {
	return counting{next: client, n: n}
}

type counting struct {
	next sqsapi.Client
	n    *callcount.Counter
}

func (c counting) CreateQueue(ctx context.Context, in *sqs.CreateQueueInput, o ...func(*sqs.Options)) (*sqs.CreateQueueOutput, error) {
	c.n.Add("CreateQueue", 1)
	return c.next.CreateQueue(ctx, in, o...)
}

func (c counting) DeleteQueue(ctx context.Context, in *sqs.DeleteQueueInput, o ...func(*sqs.Options)) (*sqs.DeleteQueueOutput, error) {
	c.n.Add("DeleteQueue", 1)
	return c.next.DeleteQueue(ctx, in, o...)
}

func (c counting) GetQueueUrl(ctx context.Context, in *sqs.GetQueueUrlInput, o ...func(*sqs.Options)) (*sqs.GetQueueUrlOutput, error) {
	c.n.Add("GetQueueUrl", 1)
	return c.next.GetQueueUrl(ctx, in, o...)
}

func (c counting) ListQueues(ctx context.Context, in *sqs.ListQueuesInput, o ...func(*sqs.Options)) (*sqs.ListQueuesOutput, error) {
	c.n.Add("ListQueues", 1)
	return c.next.ListQueues(ctx, in, o...)
}

func (c counting) GetQueueAttributes(ctx context.Context, in *sqs.GetQueueAttributesInput, o ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error) {
	c.n.Add("GetQueueAttributes", 1)
	return c.next.GetQueueAttributes(ctx, in, o...)
}

func (c counting) SetQueueAttributes(ctx context.Context, in *sqs.SetQueueAttributesInput, o ...func(*sqs.Options)) (*sqs.SetQueueAttributesOutput, error) {
	c.n.Add("SetQueueAttributes", 1)
	return c.next.SetQueueAttributes(ctx, in, o...)
}

func (c counting) PurgeQueue(ctx context.Context, in *sqs.PurgeQueueInput, o ...func(*sqs.Options)) (*sqs.PurgeQueueOutput, error) {
	c.n.Add("PurgeQueue", 1)
	return c.next.PurgeQueue(ctx, in, o...)
}

func (c counting) TagQueue(ctx context.Context, in *sqs.TagQueueInput, o ...func(*sqs.Options)) (*sqs.TagQueueOutput, error) {
	c.n.Add("TagQueue", 1)
	return c.next.TagQueue(ctx, in, o...)
}

func (c counting) UntagQueue(ctx context.Context, in *sqs.UntagQueueInput, o ...func(*sqs.Options)) (*sqs.UntagQueueOutput, error) {
	c.n.Add("UntagQueue", 1)
	return c.next.UntagQueue(ctx, in, o...)
}

func (c counting) ListQueueTags(ctx context.Context, in *sqs.ListQueueTagsInput, o ...func(*sqs.Options)) (*sqs.ListQueueTagsOutput, error) {
	c.n.Add("ListQueueTags", 1)
	return c.next.ListQueueTags(ctx, in, o...)
}

func (c counting) SendMessage(ctx context.Context, in *sqs.SendMessageInput, o ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	c.n.Add("SendMessage", 1)
	return c.next.SendMessage(ctx, in, o...)
}

func (c counting) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, o ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	c.n.Add("SendMessageBatch", 1)
	return c.next.SendMessageBatch(ctx, in, o...)
}

func (c counting) ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, o ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	c.n.Add("ReceiveMessage", 1)
	return c.next.ReceiveMessage(ctx, in, o...)
}

func (c counting) DeleteMessage(ctx context.Context, in *sqs.DeleteMessageInput, o ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error) {
	c.n.Add("DeleteMessage", 1)
	return c.next.DeleteMessage(ctx, in, o...)
}

func (c counting) DeleteMessageBatch(ctx context.Context, in *sqs.DeleteMessageBatchInput, o ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error) {
	c.n.Add("DeleteMessageBatch", 1)
	return c.next.DeleteMessageBatch(ctx, in, o...)
}

func (c counting) ChangeMessageVisibility(ctx context.Context, in *sqs.ChangeMessageVisibilityInput, o ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error) {
	c.n.Add("ChangeMessageVisibility", 1)
	return c.next.ChangeMessageVisibility(ctx, in, o...)
}

func (c counting) ChangeMessageVisibilityBatch(ctx context.Context, in *sqs.ChangeMessageVisibilityBatchInput, o ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error) {
	c.n.Add("ChangeMessageVisibilityBatch", 1)
	return c.next.ChangeMessageVisibilityBatch(ctx, in, o...)
}
