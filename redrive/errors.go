package redrive

import (
	"errors"
	"fmt"
	"strings"
)

// Sentinel errors. Use errors.Is.
var (
	// ErrMaxAttempts is the Event.Reason of a message parked because it was
	// replayed Options.MaxAttempts times.
	ErrMaxAttempts = errors.New("redrive: maximum replay attempts reached")
	// ErrNoRoom is matched by a *NoRoomError.
	ErrNoRoom = errors.New("redrive: no room for the attempt attribute")
	// ErrBadAttempt is the Event.Reason of a message parked because its
	// attempt attribute is malformed.
	ErrBadAttempt = errors.New("redrive: malformed attempt attribute")
	// ErrNoSource and ErrAmbiguousSource are matched by a *SourceError.
	ErrNoSource        = errors.New("redrive: the dead-letter queue has no source queue")
	ErrAmbiguousSource = errors.New("redrive: the dead-letter queue has several source queues")
	// ErrDryRunOnlyDrain is returned by Run with Options.DryRun set.
	ErrDryRunOnlyDrain = errors.New("redrive: a dry run only drains: use Drain")
)

// NoRoomError is the Event.Reason of a message parked because adding the
// attempt attribute would break an SQS limit: it already has 10 message
// attributes, or it would exceed the 1 MiB message size. The message is
// parked unchanged rather than left to loop on the dead-letter queue.
type NoRoomError struct {
	MessageID  string
	Attributes int // message attributes besides the attempt attribute
	Size       int // bytes of body and attributes with the attempt attribute
}

func (e *NoRoomError) Error() string {
	return fmt.Sprintf("redrive: message %s: no room for %s (%d other attributes, %d bytes)", e.MessageID, attemptAttr, e.Attributes, e.Size)
}

// Is makes errors.Is match ErrNoRoom.
func (e *NoRoomError) Is(target error) bool { return target == ErrNoRoom }

// SourceError reports that the target of a redrive could not be found from
// the dead-letter queue: it has no source queue, or several. Name the
// target with Options.Target.
type SourceError struct {
	DeadLetterQueue string
	Sources         []string // the source queues found
}

func (e *SourceError) Error() string {
	if len(e.Sources) == 0 {
		return fmt.Sprintf("redrive: no queue names %s as its dead-letter queue: set the target", e.DeadLetterQueue)
	}
	return fmt.Sprintf("redrive: %s is the dead-letter queue of %d queues (%s): set the target", e.DeadLetterQueue, len(e.Sources), strings.Join(e.Sources, ", "))
}

// Is makes errors.Is match ErrNoSource or ErrAmbiguousSource.
func (e *SourceError) Is(target error) bool {
	if len(e.Sources) == 0 {
		return target == ErrNoSource
	}
	return target == ErrAmbiguousSource
}

// MessageError is the failure of one action on one message. The message
// stays on the dead-letter queue and is handled again when its visibility
// timeout ends.
type MessageError struct {
	MessageID string
	Op        string // the SQS operation that failed
	Queue     string // the queue it was called on
	Err       error
}

func (e *MessageError) Error() string {
	return fmt.Sprintf("redrive: message %s: %s on %s: %v", e.MessageID, e.Op, e.Queue, e.Err)
}

func (e *MessageError) Unwrap() error { return e.Err }
