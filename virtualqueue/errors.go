package virtualqueue

import (
	"errors"
)

// ErrTooManyQueues is returned by CreateQueue when Options.MaxVirtualQueues
// virtual queues exist.
var ErrTooManyQueues = errors.New("virtualqueue: too many virtual queues")
