package consume

import (
	"fmt"
	"log/slog"
	"runtime"
	"time"

	"github.com/tempqueues/tempqueues/internal/awserr"
	"github.com/tempqueues/tempqueues/internal/poll"
	"github.com/tempqueues/tempqueues/internal/wire"
)

func (c *consumer) addPoller() {
	for {
		n := c.nPollers.Load()
		if n >= int32(c.cfg.MaxPollers) || c.loop.Stopped() {
			return
		}
		if c.nPollers.CompareAndSwap(n, n+1) {
			c.cfg.Counters.Pollers.Add(1)
			c.pollers.Add(1)
			c.pool.Go(c.poll)
			return
		}
	}
}

// retirePoller lets a poller stop unless it is the last one.
func (c *consumer) retirePoller() bool {
	for {
		n := c.nPollers.Load()
		if n <= 1 {
			return false
		}
		if c.nPollers.CompareAndSwap(n, n-1) {
			c.cfg.Counters.Pollers.Add(-1)
			return true
		}
	}
}

// pollerExit accounts for a poller that stops without retiring.
func (c *consumer) pollerExit() {
	c.nPollers.Add(-1)
	c.cfg.Counters.Pollers.Add(-1)
}

func (c *consumer) releaseSlots(n int) {
	for range n {
		<-c.slots
	}
}

// poll runs a poller.
func (c *consumer) poll() {
	defer c.pollers.Done()
	c.loop.Run(poller{c})
}

// poller is the poll.Consumer of a run's pollers: a receive asks for as
// many messages as there are free handler slots (at most 10).
type poller struct{ c *consumer }

// Want waits for a free handler slot and takes up to 10, then for
// Config.Pace; it returns 0 when receiving stops. A batch poller waits for
// all the slots it may fill (10, or MaxConcurrency if fewer): taking only
// those free at once could catch a finished batch half way through giving
// its slots back, and the slots still to come would then let the next
// receive go while the new batch runs.
func (p poller) Want() int {
	c := p.c
	// Checked first: select picks at random among ready cases, and a free
	// slot must not win over a stop.
	if c.stopBegun() {
		c.pollerExit()
		return 0
	}
	need := 1
	if c.batch != nil {
		need = min(wire.MaxReceiveMessages, cap(c.slots))
		c.gather <- struct{}{}
	}
	n, stopped := 0, false
	for n < need && !stopped {
		select {
		case c.slots <- struct{}{}:
			n++
		case <-c.loop.Stopping():
			stopped = true
		}
	}
	if c.batch != nil {
		<-c.gather
	}
	if stopped {
		c.releaseSlots(n)
		c.pollerExit()
		return 0
	}
more:
	for n < wire.MaxReceiveMessages {
		select {
		case c.slots <- struct{}{}:
			n++
		default:
			break more
		}
	}
	if c.stopBegun() || c.cfg.Pace != nil && c.cfg.Pace(c.paceCtx) != nil {
		c.releaseSlots(n)
		c.pollerExit()
		return 0
	}
	return n
}

// stopBegun reports whether the stop has begun, or was asked for (ctx's
// end, Stopping, an empty receive) and the run has not seen it yet: then
// no receive may start, and what one returns is handed back.
func (c *consumer) stopBegun() bool {
	if c.loop.Stopped() || c.ctx.Err() != nil {
		return true
	}
	select {
	case <-c.cfg.Stopping:
		return true
	case <-c.empty:
		return true
	default:
		return false
	}
}

// Handle starts a handler per received message (a batch handler per
// receive), hands back what a stopped receive returned, and decides
// whether the poller goes on.
func (p poller) Handle(res poll.Result) bool {
	c := p.c
	n := c.cfg.Counters
	got := len(res.Messages)
	stopped := res.Stopped || c.stopBegun()
	if c.batch == nil || got == 0 || stopped {
		// A message holds its slot; a batch holds them all (below).
		c.releaseSlots(res.Asked - got)
	}
	if stopped {
		// Stopping: hand these back untouched rather than start work.
		for _, m := range res.Messages {
			c.release(NewDelivery(m, res.At), 0, ReasonStopping)
		}
		c.releaseSlots(got)
		c.pollerExit()
		return false
	}
	if res.Err != nil {
		gone := awserr.IsQueueDoesNotExist(res.Err)
		if gone || c.cfg.GiveUp != nil && c.cfg.GiveUp(res.Err, res.Transient, res.Failures) {
			if gone {
				c.cfg.Log.Error(c.cfg.Name+": queue does not exist; stopping", slog.String("queue_url", c.cfg.QueueURL), slog.Any("error", res.Err))
			}
			c.setFatal(fmt.Errorf("%s: receiving from %s: %w", c.cfg.Name, c.cfg.QueueURL, res.Err))
			c.pollerExit()
			return false
		}
		n.ReceiveErrors.Add(1)
		if c.retirePoller() {
			// Fewer pollers under errors: only the last one retries.
			return false
		}
		c.cfg.Log.Warn(c.cfg.Name+": receive failed; backing off", slog.String("queue_url", c.cfg.QueueURL),
			slog.Bool("transient", res.Transient), slog.Duration("delay", res.Delay), slog.Any("error", res.Err))
		return true
	}
	n.Receives.Add(1)
	if got == 0 {
		n.EmptyReceives.Add(1)
		if c.cfg.StopWhenEmpty {
			c.setEmpty()
			c.pollerExit()
			return false
		}
		return !c.retirePoller()
	}
	n.Received.Add(int64(got))
	if c.cfg.OnReceive != nil && got > 1 {
		c.cfg.OnReceive(res.Messages)
	}
	if c.batch != nil {
		c.handlers.Add(1)
		c.pool.Go(func() { c.handleBatch(res.Messages, res.At, res.Asked) })
	} else {
		for _, m := range res.Messages {
			c.handlers.Add(1)
			c.pool.Go(func() { c.handleOne(m, res.At) })
		}
	}
	c.sizer.Note(res.At, got)
	var lat time.Duration
	if c.cfg.Latency != nil {
		lat = c.cfg.Latency()
	}
	switch want := c.sizer.Want(res.At, lat); {
	case got == res.Asked && len(c.slots) < cap(c.slots), int(c.nPollers.Load()) < want:
		// A full receive with slots still free: there is a backlog that
		// one poller's round trips cannot drain fast enough. Or messages
		// come faster than a round trip, and one more poller keeps one
		// parked for the next, which then waits for no round trip.
		c.addPoller()
	case int(c.nPollers.Load()) > want+1 && c.retirePoller():
		// Messages slowed down: fewer pollers keep one parked.
		return false
	}
	// The handlers just started are runnable: let them go first rather than
	// after this poller has built and signed its next receive. On an idle
	// consumer this is most of a lone message's wait.
	runtime.Gosched()
	return true
}
