package reaper

import (
	"context"
	"sync"
)

// lifecycle is the Run/Start/Close state shared by Heartbeater and Reaper:
// one active run at a time, Close cancels it and waits for it to return.
type lifecycle struct {
	mu     sync.Mutex
	closed bool
	cancel context.CancelFunc // of the active run, nil when none
	done   chan struct{}      // closed when the active run returns
}

// begin registers a run. It returns the run's context, cancelled by Close,
// and end, which the run must call when it returns.
func (l *lifecycle) begin(ctx context.Context) (runCtx context.Context, end func(), err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, nil, ErrClosed
	}
	if l.cancel != nil {
		return nil, nil, ErrRunning
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	l.cancel, l.done = cancel, done
	return runCtx, func() {
		cancel()
		l.mu.Lock()
		l.cancel = nil
		l.mu.Unlock()
		close(done)
	}, nil
}

// isClosed reports whether Close was called.
func (l *lifecycle) isClosed() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.closed
}

// close marks the lifecycle closed, cancels the active run and waits until
// it has returned or ctx is done.
func (l *lifecycle) close(ctx context.Context) error {
	l.mu.Lock()
	l.closed = true
	cancel, done := l.cancel, l.done
	l.mu.Unlock()
	if cancel == nil {
		if done != nil {
			// A run may still be between its cancel and close(done).
			select {
			case <-done:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	}
	cancel()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// runResult is what Run returns: nil when stopped by Close, the caller's
// context error when that was cancelled.
func runResult(parent context.Context) error {
	return parent.Err()
}
