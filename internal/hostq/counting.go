package hostq

import (
	"context"
	"sync/atomic"

	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/smithy-go/middleware"

	"github.com/tempqueues/tempqueues/internal/callcount"
	"github.com/tempqueues/tempqueues/sqsapi"
)

// CountCalls returns client wrapped to count in n, by operation, the
// requests each call sends: every attempt, the SDK's retries included, as
// SQS bills them and sqsclient.CallCounter counts them. A call counts one
// as it starts (a long poll in flight is counted); an SDK middleware each
// call adds counts its later attempts (a client without the SDK's
// middleware stack, a fake, makes none).
func CountCalls(client sqsapi.Client, n *callcount.Counter) sqsapi.Client {
	return counting{next: client, n: n}
}

// count makes one call of op through call, counting its first attempt at
// once and the others as the SDK makes them.
func count[O any](n *callcount.Counter, op string, o []func(*sqs.Options), call func(...func(*sqs.Options)) (O, error)) (O, error) {
	n.Add(op, 1)
	a := &attempts{n: n, op: op}
	return call(append(o[:len(o):len(o)], a.option)...)
}

// attempts counts the attempts of one call after its first: its
// middleware runs after the SDK's retry loop, once per request sent.
type attempts struct {
	n    *callcount.Counter
	op   string
	sent atomic.Int64
}

func (a *attempts) option(o *sqs.Options) { o.APIOptions = append(o.APIOptions, a.register) }

func (a *attempts) register(stack *middleware.Stack) error {
	return stack.Finalize.Add(middleware.FinalizeMiddlewareFunc("tempqueues.CountCalls",
		func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
			if a.sent.Add(1) > 1 {
				a.n.Add(a.op, 1)
			}
			return next.HandleFinalize(ctx, in)
		}), middleware.After)
}

type counting struct {
	next sqsapi.Client
	n    *callcount.Counter
}

func (c counting) CreateQueue(ctx context.Context, in *sqs.CreateQueueInput, o ...func(*sqs.Options)) (*sqs.CreateQueueOutput, error) {
	return count(c.n, "CreateQueue", o, func(o ...func(*sqs.Options)) (*sqs.CreateQueueOutput, error) {
		return c.next.CreateQueue(ctx, in, o...)
	})
}

func (c counting) DeleteQueue(ctx context.Context, in *sqs.DeleteQueueInput, o ...func(*sqs.Options)) (*sqs.DeleteQueueOutput, error) {
	return count(c.n, "DeleteQueue", o, func(o ...func(*sqs.Options)) (*sqs.DeleteQueueOutput, error) {
		return c.next.DeleteQueue(ctx, in, o...)
	})
}

func (c counting) GetQueueUrl(ctx context.Context, in *sqs.GetQueueUrlInput, o ...func(*sqs.Options)) (*sqs.GetQueueUrlOutput, error) {
	return count(c.n, "GetQueueUrl", o, func(o ...func(*sqs.Options)) (*sqs.GetQueueUrlOutput, error) {
		return c.next.GetQueueUrl(ctx, in, o...)
	})
}

func (c counting) ListQueues(ctx context.Context, in *sqs.ListQueuesInput, o ...func(*sqs.Options)) (*sqs.ListQueuesOutput, error) {
	return count(c.n, "ListQueues", o, func(o ...func(*sqs.Options)) (*sqs.ListQueuesOutput, error) { return c.next.ListQueues(ctx, in, o...) })
}

func (c counting) GetQueueAttributes(ctx context.Context, in *sqs.GetQueueAttributesInput, o ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error) {
	return count(c.n, "GetQueueAttributes", o, func(o ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error) {
		return c.next.GetQueueAttributes(ctx, in, o...)
	})
}

func (c counting) SetQueueAttributes(ctx context.Context, in *sqs.SetQueueAttributesInput, o ...func(*sqs.Options)) (*sqs.SetQueueAttributesOutput, error) {
	return count(c.n, "SetQueueAttributes", o, func(o ...func(*sqs.Options)) (*sqs.SetQueueAttributesOutput, error) {
		return c.next.SetQueueAttributes(ctx, in, o...)
	})
}

func (c counting) PurgeQueue(ctx context.Context, in *sqs.PurgeQueueInput, o ...func(*sqs.Options)) (*sqs.PurgeQueueOutput, error) {
	return count(c.n, "PurgeQueue", o, func(o ...func(*sqs.Options)) (*sqs.PurgeQueueOutput, error) { return c.next.PurgeQueue(ctx, in, o...) })
}

func (c counting) TagQueue(ctx context.Context, in *sqs.TagQueueInput, o ...func(*sqs.Options)) (*sqs.TagQueueOutput, error) {
	return count(c.n, "TagQueue", o, func(o ...func(*sqs.Options)) (*sqs.TagQueueOutput, error) { return c.next.TagQueue(ctx, in, o...) })
}

func (c counting) UntagQueue(ctx context.Context, in *sqs.UntagQueueInput, o ...func(*sqs.Options)) (*sqs.UntagQueueOutput, error) {
	return count(c.n, "UntagQueue", o, func(o ...func(*sqs.Options)) (*sqs.UntagQueueOutput, error) { return c.next.UntagQueue(ctx, in, o...) })
}

func (c counting) ListQueueTags(ctx context.Context, in *sqs.ListQueueTagsInput, o ...func(*sqs.Options)) (*sqs.ListQueueTagsOutput, error) {
	return count(c.n, "ListQueueTags", o, func(o ...func(*sqs.Options)) (*sqs.ListQueueTagsOutput, error) {
		return c.next.ListQueueTags(ctx, in, o...)
	})
}

func (c counting) SendMessage(ctx context.Context, in *sqs.SendMessageInput, o ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	return count(c.n, "SendMessage", o, func(o ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
		return c.next.SendMessage(ctx, in, o...)
	})
}

func (c counting) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, o ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	return count(c.n, "SendMessageBatch", o, func(o ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
		return c.next.SendMessageBatch(ctx, in, o...)
	})
}

func (c counting) ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, o ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	return count(c.n, "ReceiveMessage", o, func(o ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
		return c.next.ReceiveMessage(ctx, in, o...)
	})
}

func (c counting) DeleteMessage(ctx context.Context, in *sqs.DeleteMessageInput, o ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error) {
	return count(c.n, "DeleteMessage", o, func(o ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error) {
		return c.next.DeleteMessage(ctx, in, o...)
	})
}

func (c counting) DeleteMessageBatch(ctx context.Context, in *sqs.DeleteMessageBatchInput, o ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error) {
	return count(c.n, "DeleteMessageBatch", o, func(o ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error) {
		return c.next.DeleteMessageBatch(ctx, in, o...)
	})
}

func (c counting) ChangeMessageVisibility(ctx context.Context, in *sqs.ChangeMessageVisibilityInput, o ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error) {
	return count(c.n, "ChangeMessageVisibility", o, func(o ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error) {
		return c.next.ChangeMessageVisibility(ctx, in, o...)
	})
}

func (c counting) ChangeMessageVisibilityBatch(ctx context.Context, in *sqs.ChangeMessageVisibilityBatchInput, o ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error) {
	return count(c.n, "ChangeMessageVisibilityBatch", o, func(o ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error) {
		return c.next.ChangeMessageVisibilityBatch(ctx, in, o...)
	})
}
