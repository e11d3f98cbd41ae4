package responder

import (
	"sync"
	"sync/atomic"
	"time"
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
	receives, emptyReceives, receiveErrors                                       atomic.Int64
	received, handled, failed, panics, replied, replyErrors, repliesDropped      atomic.Int64
	repliesRefused                                                               atomic.Int64
	deleted, deleteErrors, deduplicated, deferred, storeErrors, expired          atomic.Int64
	extended, extendErrors, visibilityLimits, released, inFlight, processingNano atomic.Int64
	pollers                                                                      atomic.Int64

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
		Receives: c.receives.Load(), EmptyReceives: c.emptyReceives.Load(), ReceiveErrors: c.receiveErrors.Load(),
		Received: c.received.Load(), Handled: c.handled.Load(), Failed: c.failed.Load(), Panics: c.panics.Load(),
		Replied: c.replied.Load(), ReplyErrors: c.replyErrors.Load(), RepliesDropped: c.repliesDropped.Load(),
		RepliesRefused: c.repliesRefused.Load(), Deleted: c.deleted.Load(), DeleteErrors: c.deleteErrors.Load(), Expired: c.expired.Load(),
		Deduplicated: c.deduplicated.Load(), Deferred: c.deferred.Load(), StoreErrors: c.storeErrors.Load(),
		Extended: c.extended.Load(), ExtendErrors: c.extendErrors.Load(), VisibilityLimits: c.visibilityLimits.Load(),
		Released: c.released.Load(), InFlight: c.inFlight.Load(), Pollers: c.pollers.Load(),
		ProcessingTime: time.Duration(c.processingNano.Load()), AverageProcessingTime: avg,
	}
}
