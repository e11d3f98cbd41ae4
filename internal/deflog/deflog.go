// Package deflog is the logger of a component given none: operational
// failures (Warn and above) through slog.Default(), each message at most
// once a minute, so that a failure is never silent and never floods. A
// component's Options.Logger replaces it; slog.New(slog.DiscardHandler)
// silences it.
package deflog

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// Interval is how often one message may be logged.
const Interval = time.Minute

// Or returns l, or the default logger when l is nil.
func Or(l *slog.Logger) *slog.Logger {
	if l != nil {
		return l
	}
	return slog.New(&handler{state: &state{last: map[string]entry{}}, now: time.Now})
}

// state is shared by a handler and those WithAttrs and WithGroup derive
// from it.
type state struct {
	mu   sync.Mutex
	last map[string]entry // by message
}

type entry struct {
	at         time.Time
	suppressed int
}

// handler passes Warn and above to slog.Default()'s handler, as it is
// when the record is logged (a program may set it after making the
// component), and drops a message logged again within Interval, counting
// it in the next one's "suppressed" attribute.
type handler struct {
	state *state
	now   func() time.Time
	ops   []func(slog.Handler) slog.Handler // WithAttrs and WithGroup, in order
}

func (h *handler) inner() slog.Handler {
	inner := slog.Default().Handler()
	for _, op := range h.ops {
		inner = op(inner)
	}
	return inner
}

func (h *handler) Enabled(ctx context.Context, level slog.Level) bool {
	return level >= slog.LevelWarn && slog.Default().Handler().Enabled(ctx, level)
}

func (h *handler) Handle(ctx context.Context, r slog.Record) error {
	if r.Level < slog.LevelWarn {
		return nil
	}
	now := h.now()
	h.state.mu.Lock()
	e, seen := h.state.last[r.Message]
	if seen && now.Sub(e.at) < Interval {
		e.suppressed++
		h.state.last[r.Message] = e
		h.state.mu.Unlock()
		return nil
	}
	h.state.last[r.Message] = entry{at: now}
	if len(h.state.last) > 1024 { // messages are constants; bound it anyway
		for m, old := range h.state.last {
			if now.Sub(old.at) >= Interval {
				delete(h.state.last, m)
			}
		}
	}
	h.state.mu.Unlock()
	if e.suppressed > 0 {
		r = r.Clone()
		r.AddAttrs(slog.Int("suppressed", e.suppressed))
	}
	return h.inner().Handle(ctx, r)
}

func (h *handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return h.with(func(in slog.Handler) slog.Handler { return in.WithAttrs(attrs) })
}

func (h *handler) WithGroup(name string) slog.Handler {
	return h.with(func(in slog.Handler) slog.Handler { return in.WithGroup(name) })
}

func (h *handler) with(op func(slog.Handler) slog.Handler) slog.Handler {
	ops := append(append([]func(slog.Handler) slog.Handler(nil), h.ops...), op)
	return &handler{state: h.state, now: h.now, ops: ops}
}
