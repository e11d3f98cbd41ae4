// Package wire holds the helpers of the wire format that users need not
// see: virtual queue URLs ("<host-url>#<name>"), the String message
// attributes tempqueues adds, and the checks of inputs against SQS's limits
// that run before any API call, all reporting *sqsapi.InvalidInputError.
package wire

import (
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/sqsapi"
	"strings"
)

const (
	// MinIdleQueueRetention is the smallest idle retention the library
	// accepts for temporary queues.
	MinIdleQueueRetention = 1 * time.Second

	// MaxAttributeNameLength is SQS's limit on a message attribute's name,
	// in characters.
	MaxAttributeNameLength = 256
)

// Invalid returns an *InvalidInputError; reason is formatted with args.
func Invalid(op, param, reason string, args ...any) error {
	if len(args) > 0 {
		reason = fmt.Sprintf(reason, args...)
	}
	return &sqsapi.InvalidInputError{Op: op, Param: param, Reason: reason}
}

// CheckMessageAttributes rejects a message whose attributes, plus the extra
// ones tempqueues will add, exceed SQS's limit of 10, or that carry an
// attribute without a DataType. op names the calling operation in the error.
func CheckMessageAttributes(op string, attrs map[string]types.MessageAttributeValue, extra int) error {
	if n := len(attrs) + extra; n > sqsapi.MaxMessageAttributes {
		if extra > 0 {
			return Invalid(op, "MessageAttributes", "%d attributes plus %d added by tempqueues exceed the SQS limit of %d", len(attrs), extra, sqsapi.MaxMessageAttributes)
		}
		return Invalid(op, "MessageAttributes", "%d attributes exceed the SQS limit of %d", len(attrs), sqsapi.MaxMessageAttributes)
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

// CheckSystemAttributes rejects message system attributes SQS would
// refuse: it knows one, the X-Ray trace header AWSTraceHeader, a non-empty
// String. System attributes count neither against the 10 message
// attributes nor against the message size.
func CheckSystemAttributes(op string, sys map[string]types.MessageSystemAttributeValue) error {
	for name, v := range sys {
		if name != string(types.MessageSystemAttributeNameForSendsAWSTraceHeader) || aws.ToString(v.DataType) != "String" || aws.ToString(v.StringValue) == "" {
			return Invalid(op, "MessageSystemAttributes", "%q: only a non-empty String AWSTraceHeader is allowed", name)
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
	if n := MessageSize(body, attrs); n > sqsapi.MaxMessageSize {
		return Invalid(op, "MessageBody", "message of %d bytes exceeds the SQS maximum of %d", n, sqsapi.MaxMessageSize)
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

// StringAttribute is a message attribute of DataType String.
func StringAttribute(v string) types.MessageAttributeValue {
	return types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(v)}
}

// SQS hard limits the library checks before a call, beside sqsapi's: no
// user or peer needs to name them.
const (
	MaxBatchEntries      = 10           // entries per batch call
	MaxReceiveMessages   = 10           // MaxNumberOfMessages
	MaxWaitTimeSeconds   = 20           // WaitTimeSeconds
	MaxDelaySeconds      = 900          // DelaySeconds
	MaxVisibilityTimeout = 12 * 60 * 60 // seconds; also the cap since receipt
	MaxQueueNameLength   = 80           // characters, ".fifo" included
)

// DefaultIdleQueueRetention is the default idle retention of temporary
// queues, which the Options of the requester, tempqueue and the
// responder's sessions state.
const DefaultIdleQueueRetention = 300 * time.Second

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
