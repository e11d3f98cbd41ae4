package sqsapi

import (
	"errors"
	"fmt"
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
	Op     string // the call, package-qualified: "virtualqueue.SendMessage", "requester.New"
	Param  string // offending parameter, e.g. "MessageAttributes"
	Reason string // what is wrong with it
}

func (e *InvalidInputError) Error() string {
	if e.Op == "" {
		return fmt.Sprintf("tempqueues: invalid %s: %s", e.Param, e.Reason)
	}
	return fmt.Sprintf("%s: invalid %s: %s", e.Op, e.Param, e.Reason)
}

// Is makes errors.Is(err, ErrInvalidInput) true.
func (e *InvalidInputError) Is(target error) bool { return target == ErrInvalidInput }
