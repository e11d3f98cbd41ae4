// Package sqsapi holds what every tempqueues package shares: the small
// interfaces with the exact method signatures of *sqs.Client that the library
// calls, the wire constants of the AWS Java Temporary Queue Client, SQS's
// hard limits, the typed input errors, an SDK middleware that counts API
// calls, and BufferRequestBodies, the client option that keeps the SDK from
// losing responses (every *sqs.Client given to tempqueues should have it).
//
// Every tempqueues wrapper accepts a Client and most also implement it, so
// they stack: a *virtualqueue.Client wraps an *sqs.Client, a requester wraps
// a *virtualqueue.Client, and a test can wrap any of them to inject faults.
package sqsapi

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// Sender sends messages. *sqs.Client implements it.
type Sender interface {
	SendMessage(ctx context.Context, params *sqs.SendMessageInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
	SendMessageBatch(ctx context.Context, params *sqs.SendMessageBatchInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error)
}

// Receiver receives messages. *sqs.Client implements it.
type Receiver interface {
	ReceiveMessage(ctx context.Context, params *sqs.ReceiveMessageInput, optFns ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
}

// Deleter deletes received messages. *sqs.Client implements it.
type Deleter interface {
	DeleteMessage(ctx context.Context, params *sqs.DeleteMessageInput, optFns ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error)
	DeleteMessageBatch(ctx context.Context, params *sqs.DeleteMessageBatchInput, optFns ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error)
}

// VisibilityChanger changes the visibility timeout of received messages.
// *sqs.Client implements it.
type VisibilityChanger interface {
	ChangeMessageVisibility(ctx context.Context, params *sqs.ChangeMessageVisibilityInput, optFns ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error)
	ChangeMessageVisibilityBatch(ctx context.Context, params *sqs.ChangeMessageVisibilityBatchInput, optFns ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error)
}

// QueueAdmin creates, finds, lists, inspects, configures, purges and deletes
// queues. *sqs.Client implements it.
type QueueAdmin interface {
	CreateQueue(ctx context.Context, params *sqs.CreateQueueInput, optFns ...func(*sqs.Options)) (*sqs.CreateQueueOutput, error)
	DeleteQueue(ctx context.Context, params *sqs.DeleteQueueInput, optFns ...func(*sqs.Options)) (*sqs.DeleteQueueOutput, error)
	GetQueueUrl(ctx context.Context, params *sqs.GetQueueUrlInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueUrlOutput, error)
	ListQueues(ctx context.Context, params *sqs.ListQueuesInput, optFns ...func(*sqs.Options)) (*sqs.ListQueuesOutput, error)
	GetQueueAttributes(ctx context.Context, params *sqs.GetQueueAttributesInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error)
	SetQueueAttributes(ctx context.Context, params *sqs.SetQueueAttributesInput, optFns ...func(*sqs.Options)) (*sqs.SetQueueAttributesOutput, error)
	PurgeQueue(ctx context.Context, params *sqs.PurgeQueueInput, optFns ...func(*sqs.Options)) (*sqs.PurgeQueueOutput, error)
}

// Tagger reads and writes queue tags. *sqs.Client implements it.
type Tagger interface {
	TagQueue(ctx context.Context, params *sqs.TagQueueInput, optFns ...func(*sqs.Options)) (*sqs.TagQueueOutput, error)
	UntagQueue(ctx context.Context, params *sqs.UntagQueueInput, optFns ...func(*sqs.Options)) (*sqs.UntagQueueOutput, error)
	ListQueueTags(ctx context.Context, params *sqs.ListQueueTagsInput, optFns ...func(*sqs.Options)) (*sqs.ListQueueTagsOutput, error)
}

// Client is every SQS operation tempqueues calls, with the method signatures
// of *sqs.Client. *sqs.Client and *virtualqueue.Client implement it.
type Client interface {
	Sender
	Receiver
	Deleter
	VisibilityChanger
	QueueAdmin
	Tagger
}

var _ Client = (*sqs.Client)(nil)
