// Package sqsapi is the contract every tempqueues package shares: Client,
// the SQS operations the library calls with the exact method signatures of
// *sqs.Client; the wire constants of the AWS Java Temporary Queue Client and
// the attributes tempqueues adds; SQS's hard limits and its queue naming
// rule; the typed input errors (ErrInvalidInput, *InvalidInputError) and
// ErrClosed. It imports no other tempqueues package. The options for the
// *sqs.Client given to tempqueues (BufferRequestBodies, which every such
// client should have, and the call-counting CallCounter) are in package
// sqsclient.
//
// Every tempqueues wrapper accepts a Client and most also implement it, so
// they stack: a *virtualqueue.Client wraps an *sqs.Client, a requester wraps
// a *virtualqueue.Client, and a test can wrap any of them to inject faults.
//
// A virtual queue's URL is its host queue's URL, '#', and its name:
// "<host-url>#<name>". Such a URL must never reach SQS itself.
//
// Errors are the SDK's: a missing queue, whether SQS or tempqueues reports
// it, matches errors.As(err, new(*types.QueueDoesNotExist)).
package sqsapi

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// MessageClient is the message operations of Client: what a consumer of
// ordinary queues calls (responder.New takes it; redrive.Client adds one
// operation). *sqs.Client and every Client implement it.
type MessageClient interface {
	SendMessage(ctx context.Context, params *sqs.SendMessageInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
	SendMessageBatch(ctx context.Context, params *sqs.SendMessageBatchInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error)
	ReceiveMessage(ctx context.Context, params *sqs.ReceiveMessageInput, optFns ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	DeleteMessage(ctx context.Context, params *sqs.DeleteMessageInput, optFns ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error)
	DeleteMessageBatch(ctx context.Context, params *sqs.DeleteMessageBatchInput, optFns ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error)
	ChangeMessageVisibility(ctx context.Context, params *sqs.ChangeMessageVisibilityInput, optFns ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error)
	ChangeMessageVisibilityBatch(ctx context.Context, params *sqs.ChangeMessageVisibilityBatchInput, optFns ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error)
}

// Client is every SQS operation tempqueues calls, with the method signatures
// of *sqs.Client. *sqs.Client and *virtualqueue.Client implement it.
// Packages that call only part of it (responder, redrive, backlog) take
// their own smaller interface, which any Client satisfies.
type Client interface {
	MessageClient

	CreateQueue(ctx context.Context, params *sqs.CreateQueueInput, optFns ...func(*sqs.Options)) (*sqs.CreateQueueOutput, error)
	DeleteQueue(ctx context.Context, params *sqs.DeleteQueueInput, optFns ...func(*sqs.Options)) (*sqs.DeleteQueueOutput, error)
	GetQueueUrl(ctx context.Context, params *sqs.GetQueueUrlInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueUrlOutput, error)
	ListQueues(ctx context.Context, params *sqs.ListQueuesInput, optFns ...func(*sqs.Options)) (*sqs.ListQueuesOutput, error)
	GetQueueAttributes(ctx context.Context, params *sqs.GetQueueAttributesInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error)
	SetQueueAttributes(ctx context.Context, params *sqs.SetQueueAttributesInput, optFns ...func(*sqs.Options)) (*sqs.SetQueueAttributesOutput, error)
	PurgeQueue(ctx context.Context, params *sqs.PurgeQueueInput, optFns ...func(*sqs.Options)) (*sqs.PurgeQueueOutput, error)

	TagQueue(ctx context.Context, params *sqs.TagQueueInput, optFns ...func(*sqs.Options)) (*sqs.TagQueueOutput, error)
	UntagQueue(ctx context.Context, params *sqs.UntagQueueInput, optFns ...func(*sqs.Options)) (*sqs.UntagQueueOutput, error)
	ListQueueTags(ctx context.Context, params *sqs.ListQueueTagsInput, optFns ...func(*sqs.Options)) (*sqs.ListQueueTagsOutput, error)
}

var _ Client = (*sqs.Client)(nil)
