package responder

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/tempqueues/tempqueues/internal/consume"
)

// Stats is a snapshot of a Responder's counters since New: what an
// operator watches. Counters only grow, so a scaler computes rates from
// the difference of two snapshots; Options.Observer tells each event
// behind them.
//
// For autoscaling: backlog per worker = ApproximateNumberOfMessages (from
// GetQueueAttributes) / (workers x MaxConcurrency), and a worker keeps up
// while that backlog stays below acceptable latency / AverageProcessingTime.
type Stats struct {
	Received int64 // requests received
	Handled  int64 // handler runs that succeeded
	// Failed counts requests that failed in the responder's hands: the
	// handler returned an error or panicked, or the reply can never be
	// sent (it breaks SQS's limits, or names a malformed queue URL). Each
	// goes the way of Options.BackoffBase.
	Failed int64
	// Dropped counts requests deleted without their handler run or their
	// reply sent: expired, refused, the reply queue gone, or a duplicate
	// answered from the Store (Options.Observer says which).
	Dropped  int64
	Released int64 // requests made visible again early (BackoffBase, in progress elsewhere, a stop)
	// Errors counts SQS and Store calls that failed: receives, deletes,
	// visibility extensions, reply sends, Store calls. Each is logged.
	Errors int64

	InFlight int64 // requests being processed now
	Pollers  int64 // receive loops running now (1 per idle Serve, more under backlog)
	// AverageProcessingTime is an exponentially weighted moving average of
	// handler time (each run weighs 1/8), which follows recent load.
	AverageProcessingTime time.Duration
}

type counters struct {
	consume.Counters // the engine's: receives, deletes, releases, extensions, pollers

	handled, failed, dropped, errors atomic.Int64

	mu   sync.Mutex
	ewma float64 // nanoseconds
}

const ewmaWeight = 1.0 / 8

func (c *counters) observe(d time.Duration) {
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
		Received: c.Received.Load(), Handled: c.handled.Load(), Failed: c.failed.Load(),
		Dropped: c.dropped.Load(), Released: c.Released.Load(),
		Errors:   c.errors.Load() + c.ReceiveErrors.Load() + c.DeleteErrors.Load() + c.ExtendErrors.Load(),
		InFlight: c.InFlight.Load(), Pollers: c.Pollers.Load(), AverageProcessingTime: avg,
	}
}
