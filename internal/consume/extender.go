package consume

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

// extender runs the visibility extensions of one run: a single goroutine
// that, every quarter of the visibility timeout, extends the visibility of
// each delivery with less than half of it left. The extensions of one
// tick go through the visibility coalescer together, so N slow handlers
// cost about N/10 ChangeMessageVisibilityBatch calls per extension round.
// A delivery leaves the extender when its handling ends; if the process
// dies, nothing extends it and it reappears within one visibility timeout.
type extender struct {
	c        *consumer
	interval time.Duration

	mu        sync.Mutex
	live      map[*Delivery]struct{}
	abandoned bool // the stop deadline passed: requests added now are abandoned at once

	stop     chan struct{}
	done     chan struct{}
	renewing sync.WaitGroup // lease renewals started by ticks
	renewMu  sync.Mutex     // one renewal round at a time
}

func (h *extender) init(c *consumer) {
	h.c = c
	h.interval = min(max(c.cfg.VisibilityTimeout/4, 50*time.Millisecond), 10*time.Second)
	h.live = make(map[*Delivery]struct{})
	h.stop = make(chan struct{})
	h.done = make(chan struct{})
}

// add starts extending d. It reports false when the stop deadline has
// passed (abandonAll ran): the caller must abandon d itself.
func (h *extender) add(d *Delivery) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	d.ext = h
	h.live[d] = struct{}{}
	return !h.abandoned
}

// abandonLive marks the extender abandoned and returns the deliveries
// live now; deliveries added later learn it from add.
func (h *extender) abandonLive() []*Delivery {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.abandoned = true
	out := make([]*Delivery, 0, len(h.live))
	for f := range h.live {
		out = append(out, f)
	}
	return out
}

func (h *extender) remove(f *Delivery) {
	h.mu.Lock()
	delete(h.live, f)
	f.removed = true
	h.mu.Unlock()
}

func (h *extender) run() {
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

// close stops the extender goroutine and waits for it.
func (h *extender) close() {
	close(h.stop)
	<-h.done
}

type extension struct {
	f     *Delivery
	ext   time.Duration
	lease string
}

func (h *extender) tick(now time.Time) {
	cfg := &h.c.cfg
	vt := cfg.VisibilityTimeout
	// The receipt time is taken after the receive returned, so it is a bit
	// late; stay a tick and a second clear of SQS's limit.
	limitAge := cfg.MaxVisibility - h.interval - time.Second
	var (
		exts   []extension
		cancel []*Delivery
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
		if limit := f.ReceivedAt.Add(limitAge); now.Add(ext).After(limit) {
			ext = limit.Sub(now).Truncate(time.Second)
			f.capped = true
			cfg.Counters.VisibilityLimits.Add(1)
			cfg.Log.LogAttrs(context.Background(), slog.LevelWarn, cfg.Name+": request reached the SQS 12-hour visibility limit; its handler will be cancelled when the last extension ends",
				slog.String("queue_url", cfg.QueueURL), slog.String("request_id", f.key), slog.Duration("age", now.Sub(f.ReceivedAt)))
			if ext < time.Second {
				f.limitHit = true
				cancel = append(cancel, f)
				continue
			}
		}
		f.extending = true
		exts = append(exts, extension{f, ext, f.lease})
	}
	h.mu.Unlock()

	for _, f := range cancel {
		f.cancel(ErrVisibilityLimit)
	}
	var leased []extension
	for _, e := range exts {
		h.extend(now, e.f, e.ext)
		if e.lease != "" && cfg.Renew != nil {
			leased = append(leased, e)
		}
	}
	if len(leased) > 0 {
		h.renew(leased)
	}
}

func (h *extender) extend(now time.Time, f *Delivery, ext time.Duration) {
	cfg := &h.c.cfg
	cfg.Visibility.Submit(cfg.QueueURL, batch.Visibility{ReceiptHandle: f.handle, Timeout: int32(ext / time.Second)}, func(_ struct{}, err error) {
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
			cfg.Counters.Extended.Add(1)
		case removed:
			// The request finished (and was perhaps deleted) while this
			// extension waited for its batch: nothing is wrong.
		case lost:
			cfg.Counters.ExtendErrors.Add(1)
			cfg.Log.Warn(cfg.Name+": request visibility expired before it could be extended; another consumer may receive it",
				slog.String("queue_url", cfg.QueueURL), slog.String("request_id", f.key), slog.Any("error", err))
		default:
			cfg.Counters.ExtendErrors.Add(1)
			if !errors.Is(err, batch.ErrClosed) {
				cfg.Log.Warn(cfg.Name+": extending request visibility failed; retrying next tick",
					slog.String("queue_url", cfg.QueueURL), slog.String("request_id", f.key), slog.Any("error", err))
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

// renew renews the leases of deliveries whose visibility was just
// extended (Config.Renew), in one goroutine per tick so a slow lease store
// never delays the visibility extensions; a round still running skips the
// next.
func (h *extender) renew(es []extension) {
	if !h.renewMu.TryLock() {
		return
	}
	h.renewing.Add(1)
	go func() {
		defer h.renewing.Done()
		defer h.renewMu.Unlock()
		for _, e := range es {
			if e.f.state.Load() != stateRunning {
				continue // finished: its owner dropped the lease
			}
			ctx, cancel := context.WithTimeout(h.c.base, h.interval*2)
			h.c.cfg.Renew(ctx, e.f, e.lease)
			cancel()
		}
	}()
}
