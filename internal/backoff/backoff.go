// Package backoff computes exponential backoff delays with full jitter, as
// described in the AWS Architecture Blog post "Exponential Backoff and
// Jitter": delay = random(0, min(Cap, Base * 2^attempt)). Host-queue pollers,
// the responder's retries, the reaper and dead-letter replay share it.
package backoff

import (
	"context"
	"math/rand/v2"
	"time"
)

// Policy is an exponential backoff with full jitter. The zero value uses
// Base 100ms and Cap 20s.
type Policy struct {
	Base time.Duration // delay ceiling of attempt 0
	Cap  time.Duration // largest delay ceiling

	// Rand, if set, returns a uniform value in [0, n) and replaces the
	// default source; tests use it to make delays deterministic.
	Rand func(n int64) int64
}

const (
	defaultBase = 100 * time.Millisecond
	defaultCap  = 20 * time.Second
)

// Ceiling returns min(Cap, Base*2^attempt), the upper bound of the delay for
// attempt (0-based). Negative attempts count as 0.
func (p Policy) Ceiling(attempt int) time.Duration {
	base, limit := p.Base, p.Cap
	if base <= 0 {
		base = defaultBase
	}
	if limit <= 0 {
		limit = defaultCap
	}
	if attempt < 0 {
		attempt = 0
	}
	d := base
	for i := 0; i < attempt; i++ {
		if d >= limit/2 {
			return limit
		}
		d *= 2
	}
	return min(d, limit)
}

// Delay returns a uniformly random duration in [0, Ceiling(attempt)].
func (p Policy) Delay(attempt int) time.Duration {
	c := int64(p.Ceiling(attempt))
	if p.Rand != nil {
		return time.Duration(p.Rand(c + 1))
	}
	return time.Duration(rand.Int64N(c + 1))
}

// Sleep waits for d or until ctx is done, whichever comes first, and returns
// ctx.Err() in the latter case.
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Jitter returns d scaled by a random factor in [1-frac, 1+frac]; it spreads
// periodic work (heartbeats, sweeps) of many processes apart.
func Jitter(d time.Duration, frac float64) time.Duration {
	if d <= 0 || frac <= 0 {
		return d
	}
	f := 1 + frac*(2*rand.Float64()-1)
	return time.Duration(float64(d) * f)
}
