package responder

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"

	"github.com/tempqueues/tempqueues/internal/batch"
)

// heartbeat is the watchdog of one Serve call: a single goroutine that,
// every quarter of the visibility timeout, extends the visibility of each
// in-flight request with less than half of it left. The extensions of one
// tick go through the visibility coalescer together, so N slow handlers
// cost about N/10 ChangeMessageVisibilityBatch calls per extension round.
// A request leaves the heartbeat when its processing ends; if the process
// dies, nothing extends it and it reappears within one visibility timeout.
type heartbeat struct {
	s        *server
	interval time.Duration

	mu        sync.Mutex
	live      map[*inflight]struct{}
	abandoned bool // the stop deadline passed: requests added now are abandoned at once

	stop     chan struct{}
	done     chan struct{}
	renewing sync.WaitGroup // lease renewals started by ticks
	renewMu  sync.Mutex     // one renewal round at a time
}

func (h *heartbeat) init(s *server) {
	h.s = s
	h.interval = min(max(s.r.opts.VisibilityTimeout/4, 50*time.Millisecond), 10*time.Second)
	h.live = make(map[*inflight]struct{})
	h.stop = make(chan struct{})
	h.done = make(chan struct{})
}

// add starts extending f. It reports false when the stop deadline has
// passed (abandonAll ran): the caller must abandon f itself.
func (h *heartbeat) add(f *inflight) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.live[f] = struct{}{}
	return !h.abandoned
}

// abandonLive marks the heartbeat abandoned and returns the requests live
// now; requests added later learn it from add.
func (h *heartbeat) abandonLive() []*inflight {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.abandoned = true
	out := make([]*inflight, 0, len(h.live))
	for f := range h.live {
		out = append(out, f)
	}
	return out
}

func (h *heartbeat) remove(f *inflight) {
	h.mu.Lock()
	delete(h.live, f)
	f.removed = true
	h.mu.Unlock()
}

// setToken records f's Store lease token, read by ticks.
func (h *heartbeat) setToken(f *inflight, token string) {
	h.mu.Lock()
	f.token = token
	h.mu.Unlock()
}

func (h *heartbeat) run() {
	defer close(h.done)
	t := time.NewTicker(h.interval)
	defer t.Stop()
	for {
		select {
		case now := <-t.C:
			h.tick(now)
		case <-h.stop:
			h.renewing.Wait()
			return
		}
	}
}

// close stops the heartbeat goroutine and waits for it.
func (h *heartbeat) close() {
	close(h.stop)
	<-h.done
}

type extension struct {
	f     *inflight
	ext   time.Duration
	token string
}

func (h *heartbeat) tick(now time.Time) {
	r := h.s.r
	vt := r.opts.VisibilityTimeout
	// The receipt time is taken after the receive returned, so it is a bit
	// late; stay a tick and a second clear of SQS's limit.
	limitAge := r.maxVisibility - h.interval - time.Second
	var (
		exts   []extension
		cancel []*inflight
	)
	h.mu.Lock()
	for f := range h.live {
		if f.state.Load() == stateAbandoned || f.extending || f.lost {
			continue
		}
		if f.capped {
			if !f.limitHit && now.Add(h.interval).After(f.deadline) {
				f.limitHit = true
				cancel = append(cancel, f)
			}
			continue
		}
		if f.deadline.Sub(now) > vt/2 {
			continue
		}
		ext := vt
		if limit := f.req.ReceivedAt.Add(limitAge); now.Add(ext).After(limit) {
			ext = limit.Sub(now).Truncate(time.Second)
			f.capped = true
			r.stats.visibilityLimits.Add(1)
			r.log.LogAttrs(context.Background(), slog.LevelWarn, "responder: request reached the SQS 12-hour visibility limit; its handler will be cancelled when the last extension ends",
				slog.String("queue_url", h.s.queueURL), slog.String("request_id", f.req.ID), slog.Duration("age", now.Sub(f.req.ReceivedAt)))
			if ext < time.Second {
				f.limitHit = true
				cancel = append(cancel, f)
				continue
			}
		}
		f.extending = true
		exts = append(exts, extension{f, ext, f.token})
	}
	h.mu.Unlock()

	for _, f := range cancel {
		f.cancel(ErrVisibilityLimit)
	}
	var leased []extension
	for _, e := range exts {
		h.extend(now, e.f, e.ext)
		if e.token != "" {
			leased = append(leased, e)
		}
	}
	if len(leased) > 0 {
		h.renew(leased)
	}
}

func (h *heartbeat) extend(now time.Time, f *inflight, ext time.Duration) {
	r := h.s.r
	r.vis.Submit(h.s.queueURL, batch.Visibility{ReceiptHandle: f.handle, Timeout: int32(ext / time.Second)}, func(_ struct{}, err error) {
		lost := err != nil && receiptLost(err)
		h.mu.Lock()
		f.extending = false
		removed := f.removed
		if err == nil {
			// Measured from before the call: never later than SQS's clock.
			f.deadline = now.Add(ext)
		}
		f.lost = f.lost || lost
		release := f.afterExtension
		f.afterExtension = nil
		h.mu.Unlock()
		if release != nil {
			release()
		}
		switch {
		case err == nil:
			r.stats.extended.Add(1)
		case removed:
			// The request finished (and was perhaps deleted) while this
			// extension waited for its batch: nothing is wrong.
		case lost:
			r.stats.extendErrors.Add(1)
			r.log.Warn("responder: request visibility expired before it could be extended; another consumer may receive it",
				slog.String("queue_url", h.s.queueURL), slog.String("request_id", f.req.ID), slog.Any("error", err))
		default:
			r.stats.extendErrors.Add(1)
			if !errors.Is(err, batch.ErrClosed) {
				r.log.Warn("responder: extending request visibility failed; retrying next tick",
					slog.String("queue_url", h.s.queueURL), slog.String("request_id", f.req.ID), slog.Any("error", err))
			}
		}
	})
}

// receiptLost reports whether err says the receipt handle no longer
// designates an in-flight message: its visibility ended (it may be received
// by another consumer) or it was deleted. Retrying cannot help.
func receiptLost(err error) bool {
	var apiErr smithy.APIError
	if !errors.As(err, &apiErr) {
		return false
	}
	switch apiErr.ErrorCode() {
	case (&types.ReceiptHandleIsInvalid{}).ErrorCode(), (&types.MessageNotInflight{}).ErrorCode():
		return true
	}
	return false
}

// renew extends the Store leases of requests whose visibility was just
// extended, in one goroutine per tick so a slow store never delays the
// visibility heartbeat; a round still running skips the next.
func (h *heartbeat) renew(es []extension) {
	if !h.renewMu.TryLock() {
		return
	}
	h.renewing.Add(1)
	go func() {
		defer h.renewing.Done()
		defer h.renewMu.Unlock()
		r := h.s.r
		for _, e := range es {
			if e.f.state.Load() != stateRunning {
				continue // finished: Complete or Release drops the lease
			}
			ctx, cancel := context.WithTimeout(h.s.base, h.interval*2)
			err := r.opts.Store.Renew(ctx, e.f.req.ID, e.token, r.opts.VisibilityTimeout)
			cancel()
			if err != nil && (!errors.Is(err, ErrLeaseLost) || e.f.state.Load() == stateRunning) {
				r.stats.storeErrors.Add(1)
				r.log.Warn("responder: renewing idempotency lease failed",
					slog.String("request_id", e.f.req.ID), slog.Any("error", err))
			}
		}
	}()
}
