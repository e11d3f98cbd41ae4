package sqstest

import (
	"fmt"
	"net/http"
)

// apiError is an error response as SQS sends it in the JSON protocol: an
// HTTP status, a body {"__type": "com.amazonaws.sqs#<Code>", "message": ...}
// and, because the SQS JSON protocol is "query compatible", the header
// x-amzn-query-error: <QueryCode>;<Sender|Receiver>. The SDK maps Code to its
// typed errors (*types.QueueDoesNotExist ...) and reports QueryCode from
// ErrorCode().
type apiError struct {
	status    int
	code      string
	queryCode string
	sender    bool
	msg       string
}

func (e *apiError) Error() string { return e.code + ": " + e.msg }

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

func newError(status int, code, format string, args ...any) *apiError {
	qc, ok := queryCodes[code]
	if !ok {
		qc = code
	}
	msg := format
	if len(args) > 0 {
		msg = fmt.Sprintf(format, args...)
	}
	return &apiError{status: status, code: code, queryCode: qc, sender: status < 500, msg: msg}
}

func senderError(code, format string, args ...any) *apiError {
	return newError(http.StatusBadRequest, code, format, args...)
}

func errQueueDoesNotExist() *apiError {
	return senderError("QueueDoesNotExist", "The specified queue does not exist.")
}

func errInvalidParameter(format string, args ...any) *apiError {
	return senderError("InvalidParameterValue", format, args...)
}

func errMissingParameter(name string) *apiError {
	return senderError("MissingParameter", "The request must contain the parameter %s.", name)
}

func errInvalidAttributeValue(format string, args ...any) *apiError {
	return senderError("InvalidAttributeValue", format, args...)
}

func errReceiptHandleInvalid(handle string) *apiError {
	return senderError("ReceiptHandleIsInvalid", "The input receipt handle %q is not a valid receipt handle.", handle)
}
