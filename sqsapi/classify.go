package sqsapi

import (
	"context"
	"errors"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"
)

// IsQueueDoesNotExist reports whether err says the queue does not exist,
// whether SQS returned it (typed *types.QueueDoesNotExist, or the query-mode
// code "AWS.SimpleQueueService.NonExistentQueue") or tempqueues did.
func IsQueueDoesNotExist(err error) bool {
	var qdne *types.QueueDoesNotExist
	if errors.As(err, &qdne) {
		return true
	}
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) {
		switch apiErr.ErrorCode() {
		case "QueueDoesNotExist", "AWS.SimpleQueueService.NonExistentQueue":
			return true
		}
	}
	return false
}

// NewQueueDoesNotExist returns the error SQS would return for a missing
// queue, so callers can test tempqueues' errors exactly like the SDK's.
func NewQueueDoesNotExist(msg string) error {
	return &types.QueueDoesNotExist{Message: aws.String(msg)}
}

// IsThrottle reports whether err is a throttling error by the SDK's rules.
func IsThrottle(err error) bool {
	return retry.IsErrorThrottles(retry.DefaultThrottles).IsErrorThrottle(err) == aws.TrueTernary
}

// IsTransient reports whether err is worth retrying after a backoff:
// throttling, a server fault, a connection error or a timeout of the call
// itself. Context cancellation of the caller is not transient.
func IsTransient(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) {
		return false
	}
	if IsThrottle(err) {
		return true
	}
	if retry.IsErrorRetryables(retry.DefaultRetryables).IsErrorRetryable(err) == aws.TrueTernary {
		return true
	}
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) {
		return apiErr.ErrorFault() == smithy.FaultServer
	}
	return false
}
