// Package callbound holds the one bound every SQS call the library makes
// runs under, so that a hung connection stalls nothing for longer than it:
// a batch call holding one of its queue's call slots, a poller, a
// heartbeat, a sweep.
package callbound

import (
	"context"
	"time"
)

// Timeout bounds one SQS call the library makes, the SDK's own retries
// of it included, besides a long poll's wait. A call its caller bounds
// sooner (a context with an earlier deadline) ends then; SQS answers
// within tens of milliseconds, and 20 s leaves the SDK's retryer room
// for its three attempts and their backoff.
const Timeout = 20 * time.Second

// Context returns ctx bounded by Timeout past wait (a long poll's wait
// time; 0 for any other call), or by ctx's own deadline when that is
// sooner.
func Context(ctx context.Context, wait time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, max(wait, 0)+Timeout)
}

// Ended reports whether ctx is done or its deadline has come: work timed
// for the deadline (a retry's backoff, a call's bound) may end before
// ctx's own timer has ended it, and must count as ended then too.
func Ended(ctx context.Context) bool {
	if ctx.Err() != nil {
		return true
	}
	dl, ok := ctx.Deadline()
	return ok && !time.Now().Before(dl)
}
