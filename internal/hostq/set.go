package hostq

import (
	"context"
	"sync"

	"github.com/tempqueues/tempqueues/sqsapi"
)

// Set holds values opened once per key (the hosts of a virtual-queue
// client by URL, an Owner's host queues by attribute set): concurrent
// first uses share one open, a failed open is retried by the next use, and
// a value whose open finished after Close is undone. The zero value is
// ready to use.
type Set[V any] struct {
	mu     sync.Mutex
	m      map[string]*setEntry[V]
	closed bool
}

type setEntry[V any] struct {
	ready chan struct{} // closed when v and err are set
	v     V
	err   error
}

// Get returns the value for key, calling open on first use. After Close it
// fails with sqsapi.ErrClosed, and a value opened while Close ran is
// passed to undo.
func (s *Set[V]) Get(ctx context.Context, key string, open func() (V, error), undo func(V)) (V, error) {
	var zero V
	for {
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			return zero, sqsapi.ErrClosed
		}
		if s.m == nil {
			s.m = make(map[string]*setEntry[V])
		}
		e := s.m[key]
		if e == nil {
			break
		}
		s.mu.Unlock()
		select {
		case <-e.ready:
		case <-ctx.Done():
			return zero, ctx.Err()
		}
		if e.err == nil {
			return e.v, nil
		}
		// The opener's failure (perhaps its context) is not ours: it
		// removed the entry, so try anew.
	}
	e := &setEntry[V]{ready: make(chan struct{})}
	s.m[key] = e
	s.mu.Unlock()

	v, err := open()
	s.mu.Lock()
	closed := s.closed
	if err != nil || closed {
		delete(s.m, key)
	}
	s.mu.Unlock()
	if err == nil && closed {
		// Close ran while the value was being opened and did not see it.
		undo(v)
		v, err = zero, sqsapi.ErrClosed
	}
	e.v, e.err = v, err
	close(e.ready)
	return v, err
}

// Lookup returns the opened value for key.
func (s *Set[V]) Lookup(key string) (V, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.m[key]; e != nil && e.done() {
		return e.v, e.err == nil
	}
	var zero V
	return zero, false
}

// Remove removes the opened values for which match holds and returns them.
func (s *Set[V]) Remove(match func(V) bool) []V {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []V
	for k, e := range s.m {
		if e.done() && e.err == nil && match(e.v) {
			delete(s.m, k)
			out = append(out, e.v)
		}
	}
	return out
}

// Values returns the opened values.
func (s *Set[V]) Values() []V {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []V
	for _, e := range s.m {
		if e.done() && e.err == nil {
			out = append(out, e.v)
		}
	}
	return out
}

// Close makes later Gets fail and returns the opened values, once; later
// calls return none. Values still being opened are undone by their Get.
func (s *Set[V]) Close() []V {
	s.mu.Lock()
	already := s.closed
	s.closed = true
	s.mu.Unlock()
	if already {
		return nil
	}
	return s.Values()
}

// Closed reports whether Close was called.
func (s *Set[V]) Closed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

func (e *setEntry[V]) done() bool {
	select {
	case <-e.ready:
		return true
	default:
		return false
	}
}
