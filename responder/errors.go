package responder

import (
	"errors"
	"fmt"

	"github.com/tempqueues/tempqueues/internal/consume"
)

var (
	// ErrNoResponseRequested is returned by SendResponseMessage for a request
	// that carries no ResponseQueueUrl attribute: nobody waits for a reply.
	ErrNoResponseRequested = errors.New("responder: request has no ResponseQueueUrl attribute")

	// ErrResponseQueueGone is returned by SendResponseMessage when the queue
	// named by ResponseQueueUrl no longer exists (*types.QueueDoesNotExist):
	// the requester is gone and the reply is dropped. The SDK error stays in
	// the chain, so errors.As(err, new(*types.QueueDoesNotExist)) holds too.
	// Retrying is pointless; Serve deletes the request.
	ErrResponseQueueGone = errors.New("responder: response queue no longer exists, reply dropped")

	// ErrReplyRefused is returned by SendResponseMessage, and logged by
	// Serve and Process, for a request whose ResponseQueueUrl names a queue
	// replies may not go to (Options.AllowReplyTo): the reply is not sent,
	// and Serve deletes the request without running its handler.
	ErrReplyRefused = errors.New("responder: reply refused: the response queue is not allowed by Options.AllowReplyTo")

	// ErrVisibilityLimit is the cause (context.Cause) of a handler context
	// cancelled because its request reached SQS's cap on total visibility
	// (12 hours since receipt): SQS will make the request visible again and
	// another consumer may receive it, so the handler should stop. The
	// consumer engine under redrive's Drain and Run cancels a batch with
	// the same error, so its message names no package.
	ErrVisibilityLimit = consume.ErrVisibilityLimit

	// ErrLeaseLost is returned by Store.Renew when the caller no longer holds
	// the key's lease (it expired, or another owner took it).
	ErrLeaseLost = errors.New("responder: idempotency lease lost")
)

// PanicError is the error of a handler that panicked. Serve recovers the
// panic, logs it with the stack and treats the request as failed.
type PanicError struct {
	Value any    // the value passed to panic
	Stack []byte // the goroutine's stack at the panic
}

func (e *PanicError) Error() string { return fmt.Sprintf("responder: handler panicked: %v", e.Value) }

// Unwrap returns the panic value when it is an error.
func (e *PanicError) Unwrap() error {
	err, _ := e.Value.(error)
	return err
}
