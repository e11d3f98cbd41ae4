package reap

import "github.com/tempqueues/tempqueues/internal/clock"

// Hooks for the external tests (package reap_test).

// WithClock is an option that replaces the Reaper's or Sweeper's clock.
func WithClock(c clock.Clock) func(*Config) { return func(o *Config) { o.Clock = c } }

// CoordinationQueueSuffix names the lease queue: prefix + suffix.
const CoordinationQueueSuffix = coordinationSuffix

// LeaseCounts are the lease's internal counters.
type LeaseCounts struct{ Checks, Won, Created, Duplicates int64 }

// LeaseCountsOf returns r's lease counters (zero when sweeping is disabled).
func LeaseCountsOf(r *Reaper) LeaseCounts {
	l := r.lease
	if l == nil {
		return LeaseCounts{}
	}
	return LeaseCounts{Checks: l.checks.Load(), Won: l.won.Load(), Created: l.created.Load(), Duplicates: l.duplicates.Load()}
}
