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
	return h.ExpectTagged(name, "", fn)
}

// call is a single-message expectation: fn takes the message; tag, if set,
// is handed to Options.Answering with the others a receive answers. With
// more set (ExpectJoin), its first message makes it a multi-message
// expectation whose fn is more.
type call struct {
	fn   func(types.Message, error)
	tag  string
	more func(types.Message, error) bool
}

// ExpectTagged is Expect with a tag that Options.Answering is told, with
// those of the other expectations a receive answers, before any of them
// gets its message: the requester tags a call with the queue its request
// went to, since its caller is likely to send there again at once.
func (h *Host) ExpectTagged(name, tag string, fn func(types.Message, error)) error {
	return h.expectCall(name, call{fn: fn, tag: tag})
}

// ExpectJoin is ExpectTagged for a reply that may come in parts (a reply
// too large for one message, docs/wire.md): it costs what ExpectTagged
// costs until its first message, and fn, given each message, keeps the
// expectation for the ones that follow as long as it returns true, as
// ExpectMany's does. Only the first message's arrival is told to
// Options.Answering.
func (h *Host) ExpectJoin(name, tag string, fn func(types.Message, error) bool) error {
	return h.expectCall(name, call{fn: func(m types.Message, err error) { fn(m, err) }, tag: tag, more: fn})
}

// expectCall registers c under name.
func (h *Host) expectCall(name string, c call) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.closedErrLocked(); err != nil {
		return err
	}
	if h.expectedLocked(name) {
		return wire.Invalid("", "name", "%q is already expected", name)
	}
	if _, ok := h.queues[name]; ok {
		return wire.Invalid("", "name", "%q is a virtual queue's", name)
	}
	h.calls[name] = c
	h.demand++
	h.startPollersLocked()
	return nil
}

// Unexpect withdraws the expectation for name and reports whether it was
// still pending: false means its fn has been or is being called.
func (h *Host) Unexpect(name string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.calls[name]; ok {
		delete(h.calls, name)
		h.demand--
	} else if st, ok := h.streams[name]; ok {
		st.ended = true
		delete(h.streams, name)
		h.demand -= st.demand
	} else {
		return false
	}
	return true
}

// Expecting returns the number of pending expectations.
func (h *Host) Expecting() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.calls) + len(h.streams)
}

// expectedLocked reports whether name has a pending expectation of either
// kind.
func (h *Host) expectedLocked(name string) bool {
	_, one := h.calls[name]
	_, many := h.streams[name]
	return one || many
}

// streamDemand is the demand of a multi-message expectation: a stream
// can fill a receive by itself, so each justifies a poller of its own (up
// to MaxPollers), where single replies share one per 10.
const streamDemand = wire.MaxReceiveMessages

// stream is a multi-message expectation. It is a pointer so that the
// router can tell a registration from a later one under the same name.
type stream struct {
	fn     func(types.Message, error) bool
	ended  bool // under the host's lock: no more messages for fn
	demand int  // what it adds to the host's demand
}

// ExpectMany registers fn to take every message routed to name, a stream
// of replies to one request, until fn returns false (it took the last one),
// Unexpect withdraws it, or the host fails, is found gone or closes (fn is
// then called once with the error; its result is ignored). fn runs on a
// poller goroutine, outside the host's lock, once per message in the order
// of receipt, never concurrently with itself for one receive, after which
// the host deletes the message in a batch that waits for company within
// its visibility. Messages routed to name after fn returned false are
// orphans. Like Expect, it costs a map entry and makes the host poll; the
// name must not be a queue's or another pending expectation's.
func (h *Host) ExpectMany(name string, fn func(types.Message, error) bool) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.closedErrLocked(); err != nil {
		return err
	}
	if h.expectedLocked(name) {
		return wire.Invalid("", "name", "%q is already expected", name)
	}
	if _, ok := h.queues[name]; ok {
		return wire.Invalid("", "name", "%q is a virtual queue's", name)
	}
	if h.streams == nil {
		h.streams = make(map[string]*stream)
	}
	h.streams[name] = &stream{fn: fn, demand: streamDemand}
	h.demand += streamDemand
	h.startPollersLocked()
	return nil
}

// handOn gives m to st and deletes it; when st says it took its last
// message, st is withdrawn. Called by route outside the lock; a message for
// a stream that ended earlier in the same receive is an orphan.
func (h *Host) handOn(st *stream, m types.Message) {
	h.mu.Lock()
	ended := st.ended
	h.mu.Unlock()
	if ended {
		h.orphan(m)
		return
	}
	more := st.fn(m, nil)
	h.deleteAsync(m, h.answeredLinger(), "answered")
	if more {
		return
	}
	h.mu.Lock()
	st.ended = true
	if name := routingName(m); h.streams[name] == st {
		delete(h.streams, name)
		h.demand -= st.demand
	}
	h.mu.Unlock()
}
