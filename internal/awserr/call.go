package awserr

import (
	"errors"

	"github.com/aws/smithy-go"
)

// ForCall returns err, the error of an SQS call the library made for the
// caller's operation op (a SendMessageBatch that carried a SendMessage),
// as an error of op: its message is "<op>: <what>: <the service's
// error>", without the SDK's "operation error SQS: <the call>", which
// would name a call the caller never made. err stays in the chain, so
// errors.As finds the SDK's typed errors (*types.QueueDoesNotExist).
func ForCall(op, what string, err error) error {
	if err == nil {
		return nil
	}
	return &callError{op: op, what: what, err: err}
}

// ForSend is ForCall for a send of the caller's operation op to queueURL:
// "<op>: queue <queueURL> does not exist: …" for a missing queue, "<op>:
// sending to <queueURL>: …" for another error of an SDK call, and other
// errors (the library's own, a context's) unchanged.
func ForSend(op, queueURL string, err error) error {
	var oe *smithy.OperationError
	switch {
	case err == nil:
		return nil
	case IsQueueDoesNotExist(err):
		return ForCall(op, "queue "+queueURL+" does not exist", err)
	case errors.As(err, &oe):
		return ForCall(op, "sending to "+queueURL, err)
	}
	return err
}

type callError struct {
	op, what string
	err      error
}

func (e *callError) Error() string {
	msg := e.err.Error()
	var oe *smithy.OperationError
	if errors.As(e.err, &oe) && oe.Err != nil {
		msg = oe.Err.Error()
	}
	if e.what == "" {
		return e.op + ": " + msg
	}
	return e.op + ": " + e.what + ": " + msg
}

func (e *callError) Unwrap() error { return e.err }
