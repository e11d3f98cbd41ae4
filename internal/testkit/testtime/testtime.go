// Package testtime holds the two ways the repository's tests wait for
// time: Advance, which moves the clock of a testing/synctest bubble, and
// Eventually, the one poll-until helper, for tests that wait on something
// outside their control (a real server, a child process).
//
// Tests whose subject is time (batching windows, heartbeats, leases,
// sweeps, visibility extensions, backoff, deadlines, shutdown phases) run
// in a bubble (synctest.Test), where time.Now, timers, tickers and
// time.After use a fake clock that moves only when every goroutine of the
// bubble is durably blocked: they wait with synctest.Wait and Advance, not
// with real sleeps. docs/testing.md tells the rest.
package testtime

import (
	"testing"
	"testing/synctest"
	"time"
)

// Advance moves the clock of the calling goroutine's synctest bubble by d:
// it waits until every other goroutine of the bubble is blocked, sleeps d
// on the bubble's clock (which runs, in time order, every timer that falls
// due), and waits again until the goroutines those timers woke are blocked.
// It panics outside a bubble (synctest.Wait does), so it can never become a
// real sleep.
func Advance(d time.Duration) {
	synctest.Wait()
	time.Sleep(d)
	synctest.Wait()
}

// Pause stands for d of work or waiting in a goroutine of a synctest
// bubble (a handler's work, a client's pace): it sleeps on the bubble's
// clock, which costs no real time. Use it only in a bubble; outside one
// it would be a real sleep (no API tells a bubble's goroutine from
// another). A real sleep, where a test waits on a real outside process,
// is written time.Sleep, with a comment saying why.
func Pause(d time.Duration) { time.Sleep(d) }

// Eventually calls cond every poll interval (10 ms) until it reports true,
// and fails the test when within passes first, naming what it waited for.
// In a bubble the wait costs no real time.
func Eventually(tb testing.TB, within time.Duration, what string, cond func() bool) {
	tb.Helper()
	if !Until(within, cond) {
		tb.Fatalf("timed out after %v waiting for %s", within, what)
	}
}

// Until calls cond every poll interval (10 ms) until it reports true, and
// reports whether it did before within passed: Eventually for a caller
// that says itself what went wrong.
func Until(within time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(pollInterval)
	}
	return true
}

// pollInterval is how often Eventually and Until check their condition.
const pollInterval = 10 * time.Millisecond
