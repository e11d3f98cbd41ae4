// Package clock is the library's one source of time and jitter. Library
// types hold a Clock value whose zero value is the real clock; their tests
// replace it through hooks in export_test.go files, so no public option
// exists only for tests.
package clock

import (
	"math/rand/v2"
	"time"
)

// Clock reads the time and draws random numbers. The zero value uses
// time.Now and math/rand/v2.
type Clock struct {
	// NowFunc, if set, replaces time.Now.
	NowFunc func() time.Time
	// Int64NFunc, if set, replaces rand.Int64N: a uniform value in [0, n).
	Int64NFunc func(n int64) int64
}

// Now returns the current time.
func (c Clock) Now() time.Time {
	if c.NowFunc != nil {
		return c.NowFunc()
	}
	return time.Now()
}

// Since returns the time elapsed since t.
func (c Clock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

// Until returns the duration until t.
func (c Clock) Until(t time.Time) time.Duration { return t.Sub(c.Now()) }

// Int64N returns a uniform value in [0, n); 0 when n <= 0.
func (c Clock) Int64N(n int64) int64 {
	if n <= 0 {
		return 0
	}
	if c.Int64NFunc != nil {
		return c.Int64NFunc(n)
	}
	return rand.Int64N(n)
}

// Float64 returns a uniform value in [0, 1).
func (c Clock) Float64() float64 {
	const unit = 1 << 53
	return float64(c.Int64N(unit)) / unit
}
