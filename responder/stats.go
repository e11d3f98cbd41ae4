package responder

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/tempqueues/tempqueues/internal/consume"
)

// Stats is a snapshot of a Responder's counters since New. Counters only
// grow, so a scaler computes rates from the difference of two snapshots.
//
// For autoscaling: backlog per worker = ApproximateNumberOfMessages (from
// GetQueueAttributes) / (workers x MaxConcurrency), and a worker keeps up
// while that backlog stays below acceptable latency / AverageProcessingTime.
type Stats struct {
	Receives      int64 // ReceiveMessage calls that succeeded
	EmptyReceives int64 // of which returned no message
	ReceiveErrors int64 // ReceiveMessage calls that failed (then backed off)

	Received       int64 // requests received
	Handled        int64 // handler runs that succeeded
	Failed         int64 // handler runs that returned an error or panicked
	Panics         int64 // of which panicked
	Replied        int64 // replies sent
	ReplyErrors    int64 // replies that failed to send (request left for redelivery)
	RepliesDropped int64 // replies dropped because the response queue no longer exists
	RepliesRefused int64 // requests deleted unanswered: their response queue is not allowed (Options.AllowReplyTo)
	Deleted        int64 // requests deleted
	DeleteErrors   int64 // deletes that failed (the request will be redelivered)

	// Expired counts requests deleted without running the handler because
	// their caller's deadline (sqsapi.DeadlineAttribute) had passed.
	Expired int64

	Deduplicated int64 // redeliveries answered from the Store without running the handler
	Deferred     int64 // redeliveries put back because another consumer holds the request
	StoreErrors  int64 // Store calls that failed

	Extended         int64 // visibility extensions made by the heartbeat
	ExtendErrors     int64 // visibility extensions that failed
	VisibilityLimits int64 // requests that reached the 12-hour visibility cap
	Released         int64 // requests made visible again early (failure policy, shutdown)

	InFlight int64 // requests being processed now
	Pollers  int64 // receive loops running now (1 per idle Serve, more under backlog)

	// ProcessingTime is the total handler time of Handled and Failed runs;
	// ProcessingTime / (Handled+Failed) is the mean since New.
	ProcessingTime time.Duration
	// AverageProcessingTime is an exponentially weighted moving average of
	// handler time (each run weighs 1/8), which follows recent load.
	AverageProcessingTime time.Duration
}

type counters struct {
	consume.Counters // the engine's: receives, deletes, releases, extensions, pollers

	handled, failed, panics, replied, replyErrors, repliesDropped, repliesRefused atomic.Int64
	deduplicated, deferred, storeErrors, expired, processingNano                  atomic.Int64

	mu   sync.Mutex
	ewma float64 // nanoseconds
}

const ewmaWeight = 1.0 / 8

func (c *counters) observe(d time.Duration) {
	c.processingNano.Add(int64(d))
	c.mu.Lock()
	if c.ewma == 0 {
		c.ewma = float64(d)
	} else {
		c.ewma += ewmaWeight * (float64(d) - c.ewma)
	}
	c.mu.Unlock()
}

// Stats returns a snapshot of the responder's counters.
func (r *Responder) Stats() Stats {
	c := &r.stats
	c.mu.Lock()
	avg := time.Duration(c.ewma)
	c.mu.Unlock()
	return Stats{
		Receives: c.Receives.Load(), EmptyReceives: c.EmptyReceives.Load(), ReceiveErrors: c.ReceiveErrors.Load(),
		Received: c.Received.Load(), Handled: c.handled.Load(), Failed: c.failed.Load(), Panics: c.panics.Load(),
		Replied: c.replied.Load(), ReplyErrors: c.replyErrors.Load(), RepliesDropped: c.repliesDropped.Load(),
		RepliesRefused: c.repliesRefused.Load(), Deleted: c.Deleted.Load(), DeleteErrors: c.DeleteErrors.Load(), Expired: c.expired.Load(),
		Deduplicated: c.deduplicated.Load(), Deferred: c.deferred.Load(), StoreErrors: c.storeErrors.Load(),
		Extended: c.Extended.Load(), ExtendErrors: c.ExtendErrors.Load(), VisibilityLimits: c.VisibilityLimits.Load(),
		Released: c.Released.Load(), InFlight: c.InFlight.Load(), Pollers: c.Pollers.Load(),
		ProcessingTime: time.Duration(c.processingNano.Load()), AverageProcessingTime: avg,
	}
}
