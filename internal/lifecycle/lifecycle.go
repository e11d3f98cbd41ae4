// Package lifecycle is the one way the library's closable parts stop
// (docs/architecture.md, "Stopping"): the first Close or Shutdown runs the
// part's stop under its context, every later one waits for that result or
// for its own context, and every wait inside a stop selects on the
// context it was given. A stop that panics still ends: later callers get
// an error instead of blocking forever.
package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// ErrStopPanicked is matched by the error later callers get when the
// first caller's stop panicked.
var ErrStopPanicked = errors.New("tempqueues: stopping panicked")

// Once runs a part's stop once. The zero value is ready to use.
type Once struct {
	mu   sync.Mutex
	done chan struct{} // closed when err is set; nil before the first Do
	err  error
}

// Do runs stop on the first call, under ctx, and returns its error; later
// calls wait for that result or for their own ctx. When stop panics, the
// first caller's panic goes on and later callers get an error matching
// ErrStopPanicked.
func (o *Once) Do(ctx context.Context, stop func() error) error {
	o.mu.Lock()
	first := o.done == nil
	if first {
		o.done = make(chan struct{})
	}
	done := o.done
	o.mu.Unlock()
	if !first {
		select {
		case <-done:
			return o.err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	finished := false
	defer func() {
		if !finished {
			p := recover()
			o.err = fmt.Errorf("%w: %v", ErrStopPanicked, p)
			close(done)
			panic(p)
		}
	}()
	o.err = stop()
	finished = true
	close(done)
	return o.err
}

// Started reports whether the first Do has begun.
func (o *Once) Started() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.done != nil
}

// Wait waits for wg or for ctx, whichever comes first, and returns ctx's
// error in the second case; the goroutines wg counts are then left to end
// on their own (each has been told to stop).
func Wait(ctx context.Context, wg *sync.WaitGroup) error {
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
