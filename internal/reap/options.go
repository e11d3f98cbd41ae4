package reap

import (
	"log/slog"
	"time"

	"github.com/tempqueues/tempqueues/internal/callbound"
	"github.com/tempqueues/tempqueues/internal/clock"
	"github.com/tempqueues/tempqueues/internal/deflog"
	"github.com/tempqueues/tempqueues/internal/wire"
	"github.com/tempqueues/tempqueues/observe"
	"github.com/tempqueues/tempqueues/sqsapi"
)

// Defaults and limits that users have no reason to change.
const (
	// defaultPeriod is the default sweep period of a fleet, the same as
	// the Java client's.
	defaultPeriod = 5 * time.Minute
	// minPeriod is the shortest accepted Period: the lease hides its token
	// for whole seconds and needs at least a one-second window.
	minPeriod = 2 * time.Second
	// maxPeriod is the longest accepted Period: SQS cannot hide a message
	// for longer than 12 hours.
	maxPeriod = 12 * time.Hour
	// sweepConcurrency is the number of queues a sweep inspects at once.
	// SQS limits the rate of tag operations per account, so more is not
	// always faster.
	sweepConcurrency = 4
	// callTimeout bounds every API call, so a hung connection cannot stall
	// heartbeats or the lease for longer than a retry.
	callTimeout = callbound.Timeout
	// coordinationSuffix is appended to the prefix to name the FIFO queue
	// that holds the sweeper lease token. It differs from the Java
	// client's sweeper queue, named exactly the prefix, so both can share a
	// fleet.
	coordinationSuffix = "sweeper.fifo"
)

// Config is the implementation's settings: those of the public reaper's
// Options and SweeperOptions, which document them (zero values mean the
// defaults), and what the library and its tests set beside them.
type Config struct {
	Prefix          string
	Period          time.Duration
	DisableSweeping bool
	DryRun          bool
	Logger          *slog.Logger
	Observer        observe.Observer
	// Detail, if set, makes the Detail of Swept events of a Tally (the
	// face's reaper.Report); without it the Detail is the Tally.
	Detail func(Tally) any
	// Clock is the time of heartbeats, of the idle rule and of the lease
	// windows, and the lease's randomness; the zero Clock is the real one.
	Clock clock.Clock
}

// buildOptions applies optFns to the defaults and validates the result. op
// names the constructor in errors.
func buildOptions(op string, optFns []func(*Config)) (Config, error) {
	var o Config
	for _, fn := range optFns {
		if fn != nil {
			fn(&o)
		}
	}
	// Zero values mean the defaults. An empty prefix is never used as
	// such: it would sweep every queue of the account.
	if o.Prefix == "" {
		o.Prefix = sqsapi.DefaultQueuePrefix
	}
	if o.Period == 0 {
		o.Period = defaultPeriod
	}
	if len(o.Prefix)+len(coordinationSuffix) > wire.MaxQueueNameLength || !wire.ValidQueueName(o.Prefix+coordinationSuffix) {
		return o, wire.Invalid(op, "Prefix", "%q must be letters, digits, '-' or '_', at most %d characters", o.Prefix, wire.MaxQueueNameLength-len(coordinationSuffix))
	}
	if o.Period < minPeriod || o.Period > maxPeriod {
		return o, wire.Invalid(op, "Period", "%v is outside [%v, %v]", o.Period, minPeriod, maxPeriod)
	}
	o.Logger = deflog.Or(o.Logger)
	return o, nil
}

// ErrClosed is returned by Add after Close; it is sqsapi.ErrClosed.
var ErrClosed = sqsapi.ErrClosed
