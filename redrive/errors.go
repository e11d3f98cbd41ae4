package redrive

import (
	"errors"
	"fmt"
)

// Errors. Use errors.Is: the errors returned wrap these with the details.
var (
	// ErrMaxAttempts is the Detail.Cause of a message parked because it
	// was replayed Options.MaxAttempts times.
	ErrMaxAttempts = errors.New("redrive: maximum replay attempts reached")
	// ErrNoRoom is the Detail.Cause of a message parked because adding the
	// attempt attribute would break an SQS limit: it already has 10
	// message attributes, or it would exceed the 1 MiB message size. The
	// message is parked unchanged rather than left to loop on the
	// dead-letter queue.
	ErrNoRoom = errors.New("redrive: no room for the attempt attribute")
	// ErrBadAttempt is the Detail.Cause of a message parked because its
	// attempt attribute is malformed.
	ErrBadAttempt = errors.New("redrive: malformed attempt attribute")
	// ErrNoSource and ErrAmbiguousSource report that the target could not
	// be found from the dead-letter queue: no queue names it as its
	// dead-letter queue, or several do (the error lists them). Name the
	// target with Options.Target.
	ErrNoSource        = errors.New("redrive: the dead-letter queue has no source queue")
	ErrAmbiguousSource = errors.New("redrive: the dead-letter queue has several source queues")
)

// actionError is the failure of one action on one message. The message
// stays on the dead-letter queue and is handled again when its visibility
// timeout ends; a failed delete after a send means the send happens again.
// It wraps the call's error.
type actionError struct {
	messageID string
	op        string // the SQS operation that failed
	queue     string // the queue it was called on
	err       error
}

func (e *actionError) Error() string {
	return fmt.Sprintf("redrive: message %s: %s on %s: %v", e.messageID, e.op, e.queue, e.err)
}

func (e *actionError) Unwrap() error { return e.err }
