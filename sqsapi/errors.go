package sqsapi

import (
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"
)

// ErrInvalidInput is matched (errors.Is) by every *InvalidInputError: input
// that tempqueues rejected before making any API call.
var ErrInvalidInput = errors.New("invalid input")

// ErrClosed is the library's one "closed" error: every long-lived type
// (virtual-queue client, requester, responder, reaper, redrive replayer)
// returns an error matching it for work asked of it after Close or
// Shutdown began, and to calls it had to abandon. Packages re-export this
// same value under their own name.
var ErrClosed = errors.New("tempqueues: closed")

// InvalidInputError reports a parameter rejected before any API call.
type InvalidInputError struct {
	Op     string // operation, e.g. "SendMessage" or "requester.New"
	Param  string // offending parameter, e.g. "MessageAttributes"
	Reason string // what is wrong with it
}

func (e *InvalidInputError) Error() string {
	if e.Op == "" {
		return fmt.Sprintf("tempqueues: invalid %s: %s", e.Param, e.Reason)
	}
	return fmt.Sprintf("tempqueues: %s: invalid %s: %s", e.Op, e.Param, e.Reason)
}

// Is makes errors.Is(err, ErrInvalidInput) true.
func (e *InvalidInputError) Is(target error) bool { return target == ErrInvalidInput }

// Invalid returns an *InvalidInputError; reason is formatted with args.
func Invalid(op, param, reason string, args ...any) error {
	if len(args) > 0 {
		reason = fmt.Sprintf(reason, args...)
	}
	return &InvalidInputError{Op: op, Param: param, Reason: reason}
}

// ValidQueueName reports whether name follows SQS's queue naming rules: 1 to
// 80 characters of A-Z, a-z, 0-9, '-' and '_'; a FIFO queue name ends in
// ".fifo", which counts towards the 80.
func ValidQueueName(name string) bool {
	if len(name) > MaxQueueNameLength {
		return false
	}
	name = strings.TrimSuffix(name, ".fifo")
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// CheckMessageAttributes rejects a message whose attributes, plus the extra
// ones tempqueues will add, exceed SQS's limit of 10, or that carry an
// attribute without a DataType. op names the calling operation in the error.
func CheckMessageAttributes(op string, attrs map[string]types.MessageAttributeValue, extra int) error {
	if n := len(attrs) + extra; n > MaxMessageAttributes {
		if extra > 0 {
			return Invalid(op, "MessageAttributes", "%d attributes plus %d added by tempqueues exceed the SQS limit of %d", len(attrs), extra, MaxMessageAttributes)
		}
		return Invalid(op, "MessageAttributes", "%d attributes exceed the SQS limit of %d", len(attrs), MaxMessageAttributes)
	}
	for name, v := range attrs {
		if name == "" || len(name) > MaxAttributeNameLength {
			return Invalid(op, "MessageAttributes", "attribute name %q must have 1 to %d characters", name, MaxAttributeNameLength)
		}
		if v.DataType == nil || *v.DataType == "" {
			return Invalid(op, "MessageAttributes", "attribute %q has no DataType", name)
		}
	}
	return nil
}

// MessageSize is the size SQS charges against MaximumMessageSize: the body
// plus, for each message attribute, its name, data type and value.
func MessageSize(body *string, attrs map[string]types.MessageAttributeValue) int {
	n := 0
	if body != nil {
		n = len(*body)
	}
	for name, v := range attrs {
		n += len(name)
		if v.DataType != nil {
			n += len(*v.DataType)
		}
		if v.StringValue != nil {
			n += len(*v.StringValue)
		}
		n += len(v.BinaryValue)
	}
	return n
}

// CheckMessageSize rejects a message larger than SQS's maximum (1 MiB).
func CheckMessageSize(op string, body *string, attrs map[string]types.MessageAttributeValue) error {
	if n := MessageSize(body, attrs); n > MaxMessageSize {
		return Invalid(op, "MessageBody", "message of %d bytes exceeds the SQS maximum of %d", n, MaxMessageSize)
	}
	return nil
}

// CheckDelaySeconds rejects a per-message DelaySeconds outside SQS's 0 to
// 900.
func CheckDelaySeconds(op string, d int32) error {
	if d < 0 || d > MaxDelaySeconds {
		return Invalid(op, "DelaySeconds", "%d is outside 0 to %d", d, MaxDelaySeconds)
	}
	return nil
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

// StringAttribute is a message attribute of DataType String.
func StringAttribute(v string) types.MessageAttributeValue {
	return types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(v)}
}
