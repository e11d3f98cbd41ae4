package hostq

import (
	"context"
	"errors"
	"sync"
)

// Closer keeps the close half of the library's lifecycle contract for a
// type: the first Close does the work, and every other Close waits for it
// or for its own context, then returns the same result. The zero value is
// ready to use.
type Closer struct {
	mu   sync.Mutex
	done chan struct{} // closed when err is set
	err  error
}

// Close runs fn on the first call and returns its error; later calls wait
// for that result or for ctx.
func (c *Closer) Close(ctx context.Context, fn func() error) error {
	c.mu.Lock()
	first := c.done == nil
	if first {
		c.done = make(chan struct{})
	}
	done := c.done
	c.mu.Unlock()
	if first {
		c.err = fn()
		close(done)
		return c.err
	}
	select {
	case <-done:
		return c.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// CloseAll closes hosts concurrently and joins their errors.
func CloseAll(ctx context.Context, hosts []*Host) error {
	errs := make([]error, len(hosts))
	var wg sync.WaitGroup
	for i, h := range hosts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = h.Close(ctx)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}
