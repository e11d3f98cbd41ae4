package backlog

import (
	"log/slog"
	"time"

	"github.com/tempqueues/tempqueues/internal/deflog"
	"github.com/tempqueues/tempqueues/internal/wire"
	"github.com/tempqueues/tempqueues/observe"
)

// Options configure the figures of Compute and Measure, and of each of a
// Monitor's measurements (MonitorOptions.Inputs). Zero values mean the
// documented defaults.
type Options struct {
	// IncludeInFlight adds the messages received and not yet deleted to the
	// backlog (KEDA's default); IncludeDelayed adds the delayed ones. By
	// default the backlog is the visible messages only, as in the AWS
	// target-tracking recipe.
	IncludeInFlight, IncludeDelayed bool

	// Workers is the number of running workers (instances, tasks, pods).
	Workers int
	// MaxConcurrency is how many messages one worker processes at once, as
	// a responder's option of that name. Default 1.
	MaxConcurrency int
	// AcceptableLatency is the longest a message should wait before a
	// worker takes it.
	AcceptableLatency time.Duration
	// ProcessingTime is the average time a worker spends on a message.
	ProcessingTime time.Duration
	// MinWorkers and MaxWorkers clamp DesiredWorkers; MaxWorkers 0 means
	// no upper bound.
	MinWorkers, MaxWorkers int
}

// MonitorOptions configure a Monitor. Zero values mean the documented
// defaults.
type MonitorOptions struct {
	// Inputs, if set, gives the Options of each measurement, called on
	// the Monitor's goroutine before it, so that what changes (the running
	// Workers, the measured ProcessingTime) is read each time; nil measures
	// with the zero Options. NewMonitor calls it once to check it.
	//
	//	o.Inputs = func() backlog.Options {
	//		return backlog.Options{Workers: 4, AcceptableLatency: 2 * time.Second,
	//			ProcessingTime: r.Stats().AverageProcessingTime}
	//	}
	Inputs func() Options
	// Period is how often the Monitor measures, at least 1 s. Default 30 s
	// (120 GetQueueAttributes calls an hour).
	Period time.Duration
	// Observer, if set, is told of each measurement, on the Monitor's
	// goroutine: an observe.Measured event whose Queue is the queue,
	// Detail the Figures (zero when Err is set) and Err a failed
	// measurement's error. It must not block.
	Observer observe.Observer
	// Logger receives failed measurements at Warn; nil means
	// slog.Default(), as docs/architecture.md#conventions says.
	Logger *slog.Logger
}

const defaultPeriod = 30 * time.Second

// buildOptions applies optFns to the zero Options, fills in the defaults
// and validates the result.
func buildOptions(op string, optFns []func(*Options)) (Options, error) {
	var o Options
	for _, fn := range optFns {
		if fn != nil {
			fn(&o)
		}
	}
	return o.check(op)
}

func (o Options) check(op string) (Options, error) {
	if o.MaxConcurrency == 0 {
		o.MaxConcurrency = 1
	}
	switch {
	case o.Workers < 0:
		return o, wire.Invalid(op, "Workers", "%d is negative", o.Workers)
	case o.MaxConcurrency < 0:
		return o, wire.Invalid(op, "MaxConcurrency", "%d is negative", o.MaxConcurrency)
	case o.AcceptableLatency < 0 || o.ProcessingTime < 0:
		return o, wire.Invalid(op, "AcceptableLatency/ProcessingTime", "must not be negative")
	case o.MinWorkers < 0 || o.MaxWorkers < 0:
		return o, wire.Invalid(op, "MinWorkers/MaxWorkers", "must not be negative")
	case o.MaxWorkers > 0 && o.MinWorkers > o.MaxWorkers:
		return o, wire.Invalid(op, "MinWorkers", "%d exceeds MaxWorkers %d", o.MinWorkers, o.MaxWorkers)
	}
	return o, nil
}

// buildMonitorOptions is buildOptions for a Monitor.
func buildMonitorOptions(op string, optFns []func(*MonitorOptions)) (MonitorOptions, error) {
	var o MonitorOptions
	for _, fn := range optFns {
		if fn != nil {
			fn(&o)
		}
	}
	if o.Period == 0 {
		o.Period = defaultPeriod
	}
	o.Logger = deflog.Or(o.Logger)
	if o.Period < time.Second {
		return o, wire.Invalid(op, "Period", "%v is below 1s", o.Period)
	}
	if o.Inputs == nil {
		o.Inputs = func() Options { return Options{} }
	}
	_, err := o.Inputs().check(op)
	return o, err
}

// counted names the counts the backlog is made of: "visible",
// "visible+in-flight", ...
func counted(o Options) string {
	s := "visible"
	if o.IncludeInFlight {
		s += "+in-flight"
	}
	if o.IncludeDelayed {
		s += "+delayed"
	}
	return s
}
