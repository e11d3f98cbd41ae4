package reaper

import (
	"log/slog"
	"time"

	"github.com/tempqueues/tempqueues/internal/clock"
	"github.com/tempqueues/tempqueues/internal/deflog"
	"github.com/tempqueues/tempqueues/internal/wire"
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
	callTimeout = 20 * time.Second
	// coordinationSuffix is appended to the prefix to name the FIFO queue
	// that holds the sweeper lease token. It differs from the Java
	// client's sweeper queue, named exactly the prefix, so both can share a
	// fleet.
	coordinationSuffix = "sweeper.fifo"
)

// Options configure a Reaper or a Sweeper; each uses the fields that
// concern it. Zero values mean the documented defaults. Constructors take
// functions that set the fields they need:
//
//	r, err := reaper.New(client, func(o *reaper.Options) {
//		o.Logger = slog.Default()
//	})
type Options struct {
	// Prefix selects the queues swept: those whose name starts with it.
	// The lease lives in the queue Prefix+"sweeper.fifo". Default ("")
	// sqsapi.DefaultQueuePrefix: an empty prefix is never used as such,
	// since it would sweep every queue of the account. Every process of a
	// fleet must use the same.
	Prefix string

	// Period is how often the fleet sweeps, and how often each process
	// checks the lease (one ReceiveMessage). Default (0) 5 minutes, as in
	// the Java client; between 2 seconds and 12 hours. Every process of a
	// fleet should use the same.
	Period time.Duration

	// DisableSweeping makes a Reaper only heartbeat its own queues: it
	// neither takes part in the lease nor sweeps. Use it for processes that
	// should not need the IAM actions of sweeping.
	DisableSweeping bool

	// DryRun makes sweeps inspect queues and report the idle ones in
	// Report.Deleted without deleting anything.
	DryRun bool

	// Logger receives warnings (throttling, vanished queues, lease changes)
	// and debug records; nil logs operational failures (Warn and above) through
	// slog.Default(), each message at most once a minute;
	// slog.New(slog.DiscardHandler) silences it.
	Logger *slog.Logger

	// OnQueueGone, if set, is called from the heartbeat goroutine when a
	// queue added to a Reaper turns out to be deleted (QueueDoesNotExist).
	// The queue is no longer heartbeated; the owner may recreate it and Add
	// it again. err matches *types.QueueDoesNotExist with errors.As. It
	// must not block for long: heartbeats of other queues wait for it.
	OnQueueGone func(queueURL string, err error)

	// OnSweep, if set, is called after each sweep this process ran under
	// the lease, with its report. It must not block for long.
	OnSweep func(Report)

	// timeScale, when above zero, multiplies every rate of calls the
	// reaper budgets itself to: simulations that run timeScale simulated
	// seconds per real second set it (export_test.go).
	timeScale float64

	// clock is the time of heartbeats, of the idle rule and of the lease
	// windows, and the lease's randomness; tests replace it (export_test.go).
	clock clock.Clock
}

// buildOptions applies optFns to the defaults and validates the result. op
// names the constructor in errors.
func buildOptions(op string, optFns []func(*Options)) (Options, error) {
	var o Options
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
	if len(o.Prefix)+len(coordinationSuffix) > sqsapi.MaxQueueNameLength || !sqsapi.ValidQueueName(o.Prefix+coordinationSuffix) {
		return o, wire.Invalid(op, "Prefix", "%q must be letters, digits, '-' or '_', at most %d characters", o.Prefix, sqsapi.MaxQueueNameLength-len(coordinationSuffix))
	}
	if o.Period < minPeriod || o.Period > maxPeriod {
		return o, wire.Invalid(op, "Period", "%v is outside [%v, %v]", o.Period, minPeriod, maxPeriod)
	}
	o.Logger = deflog.Or(o.Logger)
	return o, nil
}

// ErrClosed is returned by Add after Close; it is sqsapi.ErrClosed.
var ErrClosed = sqsapi.ErrClosed
