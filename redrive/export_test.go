package redrive

import "github.com/tempqueues/tempqueues/internal/clock"

// WithClock is an option, for the external tests, that replaces the
// Redriver's clock: the time of due dates and the jitter's random source.
func WithClock(c clock.Clock) func(*Options) { return func(o *Options) { o.clock = c } }
