// Package observetest records what the library tells its observe.Observer,
// so tests count events instead of reading Stats fields an operator would
// not read.
package observetest

import (
	"context"
	"sync"

	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/observe"
)

// Recorder is an observe.Observer that keeps every event. Send and Reply
// events are recorded when they start; their ends are recorded as
// Outcomes. The zero value is ready to use.
type Recorder struct {
	mu       sync.Mutex
	events   []observe.Event
	outcomes []Outcome
	changed  chan struct{} // closed and replaced on every record
}

// Outcome is the end of a Send or Reply.
type Outcome struct {
	Event observe.Event // the event that started it
	Reply *types.Message
	Err   error
}

// Observe records e and, for Send and Reply, returns a done func that
// records the outcome.
func (r *Recorder) Observe(_ context.Context, e observe.Event) func(*types.Message, error) {
	r.record(func() { r.events = append(r.events, e) })
	if e.Kind != observe.Send && e.Kind != observe.Reply {
		return nil
	}
	return func(reply *types.Message, err error) {
		r.record(func() { r.outcomes = append(r.outcomes, Outcome{Event: e, Reply: reply, Err: err}) })
	}
}

func (r *Recorder) record(f func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f()
	if r.changed != nil {
		close(r.changed)
		r.changed = nil
	}
}

// Events returns a copy of the events so far, in order.
func (r *Recorder) Events() []observe.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]observe.Event(nil), r.events...)
}

// Outcomes returns a copy of the Send and Reply outcomes so far, in order.
func (r *Recorder) Outcomes() []Outcome {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Outcome(nil), r.outcomes...)
}

// Count returns how many events of kind have been recorded whose Reason
// is reason; an empty reason counts all of the kind.
func (r *Recorder) Count(kind observe.Kind, reason string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.count(kind, reason)
}

func (r *Recorder) count(kind observe.Kind, reason string) int {
	n := 0
	for _, e := range r.events {
		if e.Kind == kind && (reason == "" || e.Reason == reason) {
			n++
		}
	}
	return n
}

// Wait blocks until Count(kind, reason) >= n and reports true, or until
// ctx ends and reports false.
func (r *Recorder) Wait(ctx context.Context, kind observe.Kind, reason string, n int) bool {
	for {
		r.mu.Lock()
		if r.count(kind, reason) >= n {
			r.mu.Unlock()
			return true
		}
		if r.changed == nil {
			r.changed = make(chan struct{})
		}
		ch := r.changed
		r.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return false
		}
	}
}
