package backlog

import (
	"log/slog"
	"time"

	"github.com/tempqueues/tempqueues/internal/deflog"
	"github.com/tempqueues/tempqueues/internal/wire"
	"github.com/tempqueues/tempqueues/observe"
)

// Options configure Compute, Measure and a Monitor; each uses the fields
// that concern it. Zero values mean the documented defaults.
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

	// Monitor only.

	// Period is how often a Monitor measures, at least 1 s. Default 30 s
	// (120 GetQueueAttributes calls an hour).
	Period time.Duration
	// ProcessingTimeFunc, if set, is read at each measurement in place of
	// ProcessingTime, for example from a responder:
	//
	//	o.ProcessingTimeFunc = func() time.Duration { return r.Stats().AverageProcessingTime }
	ProcessingTimeFunc func() time.Duration
	// WorkersFunc, if set, is read at each measurement in place of Workers.
	WorkersFunc func() int
	// Observer, if set, is told of each measurement of a Monitor, on its
	// goroutine: an observe.Measured event whose Queue is the queue, Detail
	// the Figures (zero when Err is set) and Err a failed measurement's
	// error. It must not block.
	Observer observe.Observer
	// Logger receives failed measurements at Warn; nil logs operational failures (Warn and above) through
	// slog.Default(), each message at most once a minute;
	// slog.New(slog.DiscardHandler) silences it.
	Logger *slog.Logger
}

const defaultPeriod = 30 * time.Second

func buildOptions(op string, optFns []func(*Options)) (Options, error) {
	var o Options
	for _, fn := range optFns {
		if fn != nil {
			fn(&o)
		}
	}
	if o.MaxConcurrency == 0 {
		o.MaxConcurrency = 1
	}
	if o.Period == 0 {
		o.Period = defaultPeriod
	}
	o.Logger = deflog.Or(o.Logger)
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
	case o.Period < time.Second:
		return o, wire.Invalid(op, "Period", "%v is below 1s", o.Period)
	}
	return o, nil
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
