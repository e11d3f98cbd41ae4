package consume

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/internal/batch"
	"github.com/tempqueues/tempqueues/internal/wire"
	"github.com/tempqueues/tempqueues/sqsapi"
)

// Delivery states: a running delivery either finishes (its handler decides
// its fate) or is abandoned at a stop deadline (it was released already).
const (
	stateRunning int32 = iota
	stateFinished
	stateAbandoned
)

// Delivery is a message being handled.
type Delivery struct {
	Message    types.Message
	ReceivedAt time.Time

	handle string
	key    string
	cancel context.CancelCauseFunc
	state  atomic.Int32
	keep   atomic.Bool // KeepWhenAbandoned

	afterDelete func() // AfterDelete's

	// Owned by the extender, under ext.mu.
	lease     string    // a lease the extender renews (SetLease)
	deadline  time.Time // when the message becomes visible again
	extending bool      // an extension call is in flight
	capped    bool      // the last extension reached the 12-hour cap
	limitHit  bool      // the handler was cancelled for the cap
	lost      bool      // SQS no longer knows the receipt handle: stop extending
	removed   bool      // handling ended
	// A release made while an extension was unanswered, sent once the
	// extension has its answer. Sent at once, it could go out in the same
	// batch call as an extension still waiting for a call, or beside it,
	// and SQS could apply it first: the extension would then hide the
	// message for a whole visibility timeout instead of releasing it.
	afterExtension func()

	ext *extender // nil for a delivery outside a run (NewDelivery)
}

// NewDelivery is a delivery of m outside any run, as responder.Process
// handles one: nothing extends it or renews its lease.
func NewDelivery(m types.Message, receivedAt time.Time) *Delivery {
	return &Delivery{Message: m, ReceivedAt: receivedAt, handle: aws.ToString(m.ReceiptHandle)}
}

// AfterDelete sets f to run once the message is deleted from its queue,
// on a goroutine of its own (counted by Config.AfterDeletes); call it
// before the handler returns. A
// delivery outside a run (NewDelivery) runs it when its caller calls
// Deleted.
func (d *Delivery) AfterDelete(f func()) { d.afterDelete = f }

// Deleted runs AfterDelete's function, if any, before it returns: for a
// delivery whose caller deletes the message (responder.Process), and
// which may not outlive the call (a Lambda function's).
func (d *Delivery) Deleted() {
	if f := d.afterDelete; f != nil {
		f()
	}
}

// Abandoned reports whether the delivery was abandoned at a stop deadline:
// its message was released and may be handled elsewhere.
func (d *Delivery) Abandoned() bool { return d.state.Load() == stateAbandoned }

// KeepWhenAbandoned says that d's work cannot be taken up by another
// consumer (a session, whose caller's later messages its handler read):
// at a stop deadline its handler is cancelled but its message is not
// released, and the handler's decision still counts (it tells its caller
// and deletes the message). A handler that ignores its cancellation
// leaves the message to its visibility timeout.
func (d *Delivery) KeepWhenAbandoned() { d.keep.Store(true) }

// Running reports whether the delivery is still being handled.
func (d *Delivery) Running() bool { return d.state.Load() == stateRunning }

// Finish marks the handling done; false means it was abandoned first, and
// its result must not be used.
func (d *Delivery) Finish() bool { return d.state.CompareAndSwap(stateRunning, stateFinished) }

// SetLease records a lease that Config.Renew renews after each extension.
func (d *Delivery) SetLease(lease string) {
	if d.ext == nil {
		return
	}
	d.ext.mu.Lock()
	d.lease = lease
	d.ext.mu.Unlock()
}

// handleOne runs the handler of one received message and carries out its
// decision.
func (c *consumer) handleOne(m types.Message, receivedAt time.Time) {
	defer c.handlers.Done()
	ctx, cancel := context.WithCancelCause(c.base)
	d := c.begin(m, receivedAt, cancel)
	out := c.end(d, c.h(ctx, d))
	cancel(nil)
	c.releaseSlots(1)
	c.carryOut(d, out)
}

// handleBatch runs the batch handler of one receive's messages, which hold
// the slots their receive asked for, and carries out its decisions.
func (c *consumer) handleBatch(msgs []types.Message, receivedAt time.Time, slots int) {
	defer c.handlers.Done()
	ctx, cancel := context.WithCancelCause(c.base)
	ds := make([]*Delivery, len(msgs))
	for i, m := range msgs {
		ds[i] = c.begin(m, receivedAt, cancel)
	}
	outs := c.batch(ctx, ds)
	for i, d := range ds {
		var out Outcome
		if i < len(outs) {
			out = outs[i]
		}
		c.carryOut(d, c.end(d, out))
	}
	cancel(nil)
	c.releaseSlots(slots)
}

// begin starts the handling of m: the extender extends its visibility from now on.
func (c *consumer) begin(m types.Message, receivedAt time.Time, cancel context.CancelCauseFunc) *Delivery {
	c.cfg.Counters.InFlight.Add(1)
	d := NewDelivery(m, receivedAt)
	d.cancel = cancel
	d.deadline = receivedAt.Add(c.cfg.VisibilityTimeout)
	if c.cfg.Key != nil {
		d.key = c.cfg.Key(m)
	}
	if !c.ext.add(d) {
		// The stop deadline passed between its receive and now.
		c.abandon(d)
	}
	return d
}

// end ends the handling of d and returns what is to be done with it.
func (c *consumer) end(d *Delivery, out Outcome) Outcome {
	if !d.Finish() && d.Abandoned() && !d.keep.Load() {
		// Released at a stop deadline, and perhaps being handled
		// elsewhere: whatever the handler decided is too late.
		out = Outcome{}
	}
	c.ext.remove(d)
	c.cfg.Counters.InFlight.Add(-1)
	return out
}

// carryOut carries out a handler's decision on d.
func (c *consumer) carryOut(d *Delivery, out Outcome) {
	n := c.cfg.Counters
	switch out.Action {
	case Delete:
		// Nobody waits for the delete: it may wait for company for a tenth
		// of the visibility the message has left (batch.DeleteWithin), so
		// that even one message at a time shares delete calls.
		c.ext.mu.Lock()
		left := c.cfg.Clock.Until(d.deadline)
		c.ext.mu.Unlock()
		within := batch.DeleteWithin(left)
		if wire.IsFIFOURL(c.cfg.QueueURL) {
			// A FIFO queue keeps the message's group locked until the
			// delete: the group's next message must not wait for company.
			within = batch.DeleteLinger
		}
		c.cfg.Deletes.SubmitWithin(c.cfg.QueueURL, d.handle, within, func(_ struct{}, err error) {
			if err != nil {
				n.DeleteErrors.Add(1)
				c.cfg.Log.Warn(c.cfg.Name+": deleting message failed; it will be redelivered",
					slog.String("queue_url", c.cfg.QueueURL), slog.String("request_id", d.key), slog.Any("error", err))
				return
			}
			n.Deleted.Add(1)
			if d.afterDelete != nil {
				if wg := c.cfg.AfterDeletes; wg != nil {
					wg.Add(1)
					go func() {
						defer wg.Done()
						d.Deleted()
					}()
				} else {
					go d.Deleted()
				}
			}
		})
	case Release:
		c.release(d, out.Delay, out.Reason)
	case Hold:
		c.heldMu.Lock()
		c.held = append(c.held, d)
		c.heldMu.Unlock()
	}
}

// releaseHeld releases the held messages, once no receive of the run is
// left to take them before they are hidden again, and returns how many.
func (c *consumer) releaseHeld() int {
	c.heldMu.Lock()
	held := c.held
	c.held = nil
	c.heldMu.Unlock()
	for _, d := range held {
		c.release(d, 0, reasonHeld)
	}
	return len(held)
}

// release makes d's message visible again after delay (capped by the time
// left under the 12-hour limit), and tells Config.OnRelease why once done.
func (c *consumer) release(d *Delivery, delay time.Duration, reason string) {
	// A receive this run cancelled may still be parked on the server.
	delay = max(delay, c.loop.ReleaseDelay())
	left := c.cfg.MaxVisibility - c.cfg.Clock.Since(d.ReceivedAt)
	secs := int32(min(delay, left).Round(time.Second) / time.Second)
	submit := func() {
		c.cfg.Visibility.Submit(c.cfg.QueueURL, batch.Visibility{ReceiptHandle: d.handle, Timeout: max(secs, 0)}, func(_ struct{}, err error) {
			if err != nil {
				c.cfg.Log.Warn(c.cfg.Name+": releasing message failed; it reappears after its visibility timeout",
					slog.String("queue_url", c.cfg.QueueURL), slog.String("request_id", d.key), slog.Any("error", err))
				return
			}
			if c.cfg.OnRelease != nil { // first: whoever waits for the count sees the event
				c.cfg.OnRelease(d.Message, time.Duration(max(secs, 0))*time.Second, reason)
			}
			c.cfg.Counters.Released.Add(1)
		})
	}
	c.ext.mu.Lock()
	if d.extending {
		d.afterExtension = submit
		c.ext.mu.Unlock()
		return
	}
	c.ext.mu.Unlock()
	submit()
}

// abandonAll cancels the running handlers and releases their messages for
// another consumer to pick up: as soon as no receive this run aborted can
// still take them.
func (c *consumer) abandonAll() {
	for _, d := range c.ext.abandonLive() {
		c.abandon(d)
	}
}

// abandon cancels d's handler and releases its message.
func (c *consumer) abandon(d *Delivery) {
	if d.state.CompareAndSwap(stateRunning, stateAbandoned) {
		c.cfg.Counters.Abandoned.Add(1)
		d.cancel(sqsapi.ErrClosed)
		if d.keep.Load() {
			c.cfg.Log.Warn(c.cfg.Name+": stop deadline reached; cancelling handler, which settles its message",
				slog.String("queue_url", c.cfg.QueueURL), slog.String("request_id", d.key))
			return
		}
		c.cfg.Log.Warn(c.cfg.Name+": stop deadline reached; cancelling handler and releasing its message",
			slog.String("queue_url", c.cfg.QueueURL), slog.String("request_id", d.key))
		c.release(d, 0, ReasonStopping)
	}
}
