package api

import (
	"fmt"
	"net/http"
)

// Error is an error response as SQS sends it in the JSON protocol: an
// HTTP status, a body {"__type": "com.amazonaws.sqs#<Code>", "message": ...}
// and, because the SQS JSON protocol is "query compatible", the header
// x-amzn-query-error: <QueryCode>;<Sender|Receiver>. The SDK maps Code to its
// typed errors (*types.QueueDoesNotExist ...) and reports QueryCode from
// ErrorCode().
type Error struct {
	Status    int    // HTTP status
	Code      string // the error shape's name, e.g. "QueueDoesNotExist"
	QueryCode string // the legacy query-protocol code
	Sender    bool   // the sender's fault (4xx), not the server's
	Msg       string
}

func (e *Error) Error() string { return e.Code + ": " + e.Msg }

// queryCodes maps SQS error shape names to the legacy query-protocol codes
// AWS sends in x-amzn-query-error (from the SQS service model's
// awsQueryError traits). Codes not listed are sent unchanged.
var queryCodes = map[string]string{
	"BatchEntryIdsNotDistinct":     "AWS.SimpleQueueService.BatchEntryIdsNotDistinct",
	"BatchRequestTooLong":          "AWS.SimpleQueueService.BatchRequestTooLong",
	"EmptyBatchRequest":            "AWS.SimpleQueueService.EmptyBatchRequest",
	"InvalidBatchEntryId":          "AWS.SimpleQueueService.InvalidBatchEntryId",
	"MessageNotInflight":           "AWS.SimpleQueueService.MessageNotInflight",
	"PurgeQueueInProgress":         "AWS.SimpleQueueService.PurgeQueueInProgress",
	"QueueDeletedRecently":         "AWS.SimpleQueueService.QueueDeletedRecently",
	"QueueDoesNotExist":            "AWS.SimpleQueueService.NonExistentQueue",
	"QueueNameExists":              "QueueAlreadyExists",
	"TooManyEntriesInBatchRequest": "AWS.SimpleQueueService.TooManyEntriesInBatchRequest",
	"UnsupportedOperation":         "AWS.SimpleQueueService.UnsupportedOperation",
}

// NewError returns an error of the given HTTP status and shape name
// (code); format is formatted with args when there are any.
func NewError(status int, code, format string, args ...any) *Error {
	qc, ok := queryCodes[code]
	if !ok {
		qc = code
	}
	msg := format
	if len(args) > 0 {
		msg = fmt.Sprintf(format, args...)
	}
	return &Error{Status: status, Code: code, QueryCode: qc, Sender: status < 500, Msg: msg}
}

// SenderError returns a 400 error: the caller's fault.
func SenderError(code, format string, args ...any) *Error {
	return NewError(http.StatusBadRequest, code, format, args...)
}

// QueueDoesNotExist is SQS's answer for a queue URL or name it does not know.
func QueueDoesNotExist() *Error {
	return SenderError("QueueDoesNotExist", "The specified queue does not exist.")
}

// InvalidParameter is an InvalidParameterValue error.
func InvalidParameter(format string, args ...any) *Error {
	return SenderError("InvalidParameterValue", format, args...)
}

// MissingParameter reports a required parameter absent from the request.
func MissingParameter(name string) *Error {
	return SenderError("MissingParameter", "The request must contain the parameter %s.", name)
}

// InvalidAttributeValue is an InvalidAttributeValue error.
func InvalidAttributeValue(format string, args ...any) *Error {
	return SenderError("InvalidAttributeValue", format, args...)
}

// ReceiptHandleInvalid reports a receipt handle the queue did not issue.
func ReceiptHandleInvalid(handle string) *Error {
	return SenderError("ReceiptHandleIsInvalid", "The input receipt handle %q is not a valid receipt handle.", handle)
}
