package backlog

import (
	"context"
	"expvar"
	"log/slog"
	"sync"
	"time"

	"github.com/tempqueues/tempqueues/internal/callback"
	"github.com/tempqueues/tempqueues/internal/wire"
	"github.com/tempqueues/tempqueues/observe"
)

// Monitor measures a queue's figures periodically, so that a process (a
// worker running a responder, say) can publish its own view for a scaler:
// to MonitorOptions.Observer, through Last, or as an expvar.Var.
type Monitor struct {
	client   AttributesGetter
	queueURL string
	opts     MonitorOptions

	mu      sync.Mutex
	last    Figures
	at      time.Time
	counted string // what last's backlog is made of
	err     error
}

// NewMonitor returns a Monitor of queueURL. It validates the options and
// makes no call; Run measures.
func NewMonitor(client AttributesGetter, queueURL string, optFns ...func(*MonitorOptions)) (*Monitor, error) {
	if err := wire.CheckClient("backlog.NewMonitor", "client", client); err != nil {
		return nil, err
	}
	if queueURL == "" || wire.IsVirtualQueueURL(queueURL) {
		return nil, wire.Invalid("backlog.NewMonitor", "queueURL", "%q is not a queue URL", queueURL)
	}
	o, err := buildMonitorOptions("backlog.NewMonitor", optFns)
	if err != nil {
		return nil, err
	}
	return &Monitor{client: client, queueURL: queueURL, opts: o}, nil
}

// Run measures at once and then every Period until ctx ends, and returns
// nil then. A failed measurement is reported and retried at the next tick.
func (m *Monitor) Run(ctx context.Context) error {
	t := time.NewTicker(m.opts.Period)
	defer t.Stop()
	for {
		m.measure(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// measure takes one measurement now, records it as the last and tells the
// Observer.
func (m *Monitor) measure(ctx context.Context) {
	o, err := m.opts.Inputs().check("backlog.Monitor")
	var f Figures
	var c Counts
	if err == nil {
		c, err = getCounts(ctx, "backlog.Monitor", m.client, m.queueURL)
	}
	if err == nil {
		f = compute(c, o)
	} else if ctx.Err() != nil {
		return // stopping: not a failure worth reporting
	} else {
		m.opts.Logger.Warn("backlog: measurement failed", slog.String("queue_url", m.queueURL), slog.Any("err", err))
	}
	m.mu.Lock()
	if err == nil {
		m.last, m.at, m.counted = f, time.Now(), counted(o)
	}
	m.err = err
	m.mu.Unlock()
	if m.opts.Observer != nil {
		callback.Observe(ctx, m.opts.Logger, m.opts.Observer, observe.Event{Kind: observe.Measured, Queue: m.queueURL, Detail: f, Err: err})
	}
}

// Last returns the last successful measurement and its time (zero before
// the first), and the error of the latest attempt, nil if it succeeded.
func (m *Monitor) Last() (Figures, time.Time, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.last, m.at, m.err
}

// Var returns an expvar.Var whose value is the last figures, as JSON
// (snake_case keys, plus "queue_url", "counted" (the counts the backlog is
// made of: "visible", "visible+in-flight", ...), "measured_at" and
// "error"). Publish it under a name of your choice:
//
//	expvar.Publish("requests_backlog", monitor.Var())
func (m *Monitor) Var() expvar.Var {
	return expvar.Func(func() any {
		f, at, err := m.Last()
		m.mu.Lock()
		what := m.counted
		m.mu.Unlock()
		if what == "" {
			what = counted(m.opts.Inputs())
		}
		v := struct {
			QueueURL string `json:"queue_url"`
			Figures
			Counted    string    `json:"counted"`
			MeasuredAt time.Time `json:"measured_at"`
			Error      string    `json:"error,omitempty"`
		}{QueueURL: m.queueURL, Figures: f, Counted: what, MeasuredAt: at}
		if err != nil {
			v.Error = err.Error()
		}
		return v
	})
}
