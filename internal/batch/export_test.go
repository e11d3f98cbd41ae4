package batch

import (
	"time"

	"github.com/tempqueues/tempqueues/internal/backoff"
)

// FastRetries makes c's retries wait at most a few milliseconds.
func FastRetries[E, R any](c *Coalescer[E, R]) {
	c.opts.RetryBackoff = backoff.Policy{Base: time.Millisecond, Cap: 5 * time.Millisecond}
}

// SlowRetries makes c's retries wait a second.
func SlowRetries[E, R any](c *Coalescer[E, R]) {
	c.opts.RetryBackoff = backoff.Policy{Base: time.Second, Cap: time.Second, Rand: func(n int64) int64 { return n - 1 }}
}

// SetLatency sets c's estimate of a call's latency.
func SetLatency[E, R any](c *Coalescer[E, R], d time.Duration) {
	c.mu.Lock()
	c.lat.d = d
	c.mu.Unlock()
}
