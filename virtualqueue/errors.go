package virtualqueue

import (
	"errors"

	"github.com/tempqueues/tempqueues/sqsapi"
)

// ErrClosed is returned by operations on virtual queues after Close, and to
// receivers waiting when Close is called. It is sqsapi.ErrClosed.
var ErrClosed = sqsapi.ErrClosed

// ErrTooManyQueues is returned by CreateQueue when Options.MaxVirtualQueues
// virtual queues exist.
var ErrTooManyQueues = errors.New("virtualqueue: too many virtual queues")
