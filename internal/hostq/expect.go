package hostq

import (
	"errors"

	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/internal/wire"
)

// ErrTooManyQueues is returned by CreateQueue past its maxQueues.
var ErrTooManyQueues = errors.New("virtualqueue: too many virtual queues")

// Expect registers fn to take the next message routed to name, once: the
// requester's reply to one request. fn runs on a poller goroutine, outside
// the host's lock, with the message, after which the host deletes it (in a
// batch that waits for company within its visibility); or with an error
// when the host fails, is found gone or closes. fn must not block for long.
// A pending expectation makes the host poll, like a waiting receiver; it
// costs a map entry, no queue and no goroutine. The name must not be a
// queue's or another pending expectation's.
func (h *Host) Expect(name string, fn func(types.Message, error)) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.closedErrLocked(); err != nil {
		return err
	}
	if _, ok := h.calls[name]; ok {
		return wire.Invalid("Expect", "name", "%q is already expected", name)
	}
	if _, ok := h.queues[name]; ok {
		return wire.Invalid("Expect", "name", "%q is a virtual queue's", name)
	}
	h.calls[name] = fn
	h.demand++
	h.startPollersLocked()
	return nil
}

// Unexpect withdraws the expectation for name and reports whether it was
// still pending: false means its fn has been or is being called.
func (h *Host) Unexpect(name string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.calls[name]; !ok {
		return false
	}
	delete(h.calls, name)
	h.demand--
	return true
}

// Expecting returns the number of pending expectations.
func (h *Host) Expecting() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.calls)
}
