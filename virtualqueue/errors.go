package virtualqueue

import "errors"

// ErrClosed is returned by operations on virtual queues after Close, and to
// receivers waiting when Close is called.
var ErrClosed = errors.New("virtualqueue: client closed")

// ErrTooManyQueues is returned by CreateQueue when Options.MaxVirtualQueues
// virtual queues exist.
var ErrTooManyQueues = errors.New("virtualqueue: too many virtual queues")
