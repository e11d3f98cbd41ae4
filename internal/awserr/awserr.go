// Package awserr classifies the errors of SQS calls: a missing queue,
// throttling, and transient failures worth a retry. It also turns the
// failed entries of batch calls into errors that classify like the rest.
package awserr

import (
	"context"
	"errors"
	"fmt"

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

// IsThrottle reports whether err is a throttling error by the SDK's rules
// ("ThrottlingException", "RequestThrottled" ...), or SQS's typed
// *types.RequestThrottled under any code (a query-compatible server may
// name it "AWS.SimpleQueueService.RequestThrottled", which the SDK's list
// lacks).
func IsThrottle(err error) bool {
	if retry.IsErrorThrottles(retry.DefaultThrottles).IsErrorThrottle(err) == aws.TrueTernary {
		return true
	}
	var rt *types.RequestThrottled
	if errors.As(err, &rt) {
		return true
	}
	var apiErr smithy.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode() == "AWS.SimpleQueueService.RequestThrottled"
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

// BatchEntryError is the failure of one entry of a batch call
// (types.BatchResultErrorEntry) as an error. It implements smithy.APIError,
// so errors.As(err, new(smithy.APIError)) exposes the SQS error code.
type BatchEntryError struct {
	Code        string
	Message     string
	SenderFault bool
}

func (e *BatchEntryError) Error() string {
	return fmt.Sprintf("sqs batch entry failed: %s: %s", e.Code, e.Message)
}

// ErrorCode returns the SQS error code, e.g. "ReceiptHandleIsInvalid".
func (e *BatchEntryError) ErrorCode() string { return e.Code }

// ErrorMessage returns the SQS error message.
func (e *BatchEntryError) ErrorMessage() string { return e.Message }

// ErrorFault tells whether the client (sender) or the server is at fault.
func (e *BatchEntryError) ErrorFault() smithy.ErrorFault {
	if e.SenderFault {
		return smithy.FaultClient
	}
	return smithy.FaultServer
}
