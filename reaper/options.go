package reaper

import (
	"errors"
	"log/slog"
	"time"

	"github.com/tempqueues/tempqueues/sqsapi"
)

// Defaults and limits of Options.
const (
	// DefaultPeriod is the default sweep period of a fleet, the same as the
	// Java client's.
	DefaultPeriod = 5 * time.Minute
	// MinPeriod is the shortest accepted Period. The lease hides its token
	// for whole seconds and needs at least a one-second window.
	MinPeriod = 2 * time.Second
	// MaxPeriod is the longest accepted Period: SQS cannot hide a message
	// for longer than 12 hours.
	MaxPeriod = 12 * time.Hour
	// DefaultHeartbeatFraction is the default share of a queue's retention
	// after which its heartbeat tag is refreshed: at the default 300 s
	// retention, one TagQueue every 100 s, 36 per hour.
	DefaultHeartbeatFraction = 1.0 / 3
	// MaxHeartbeatFraction is the largest accepted HeartbeatFraction. Above
	// it too little of the retention is left for retries after throttling
	// and for clock skew between the heartbeating and the sweeping process.
	MaxHeartbeatFraction = 0.5
	// DefaultSweepConcurrency is the default number of queues a sweep
	// inspects at once.
	DefaultSweepConcurrency = 4
	// DefaultCallTimeout bounds every API call the reaper makes, so a hung
	// connection cannot stall heartbeats for longer than a retry.
	DefaultCallTimeout = 20 * time.Second

	// CoordinationQueueSuffix is appended to the prefix to name the FIFO
	// queue that holds the sweeper lease token. It differs from the Java
	// client's sweeper queue, named exactly the prefix, so both can share a
	// fleet.
	CoordinationQueueSuffix = "sweeper.fifo"
)

// Options configure a Reaper, a Heartbeater or a Sweeper; each uses the
// fields that concern it. Constructors take functions that modify a copy of
// the defaults:
//
//	r, err := reaper.New(client, func(o *reaper.Options) {
//		o.Period = time.Minute
//		o.Logger = slog.Default()
//	})
type Options struct {
	// Prefix selects the queues swept: those whose name starts with it.
	// The lease lives in the queue Prefix+"sweeper.fifo". Default
	// sqsapi.DefaultQueuePrefix. Every process of a fleet must use the same.
	Prefix string

	// Period is how often the fleet sweeps, and how often each process
	// checks the lease (one ReceiveMessage). Default DefaultPeriod; between
	// MinPeriod and MaxPeriod. Every process of a fleet should use the same.
	Period time.Duration

	// HeartbeatFraction is the share of a queue's retention after which its
	// heartbeat tag is refreshed. Default DefaultHeartbeatFraction; greater
	// than 0 and at most MaxHeartbeatFraction.
	HeartbeatFraction float64

	// DisableSweeping makes a Reaper only heartbeat its own queues: it
	// neither takes part in the lease nor sweeps. Use it for processes that
	// should not need the IAM actions of sweeping.
	DisableSweeping bool

	// SweepConcurrency is how many queues a sweep inspects at once. Default
	// DefaultSweepConcurrency. SQS limits the rate of tag operations per
	// account, so more is not always faster.
	SweepConcurrency int

	// DryRun makes sweeps inspect queues and report the idle ones in
	// Report.Deleted without deleting anything.
	DryRun bool

	// CallTimeout bounds each API call. Default DefaultCallTimeout.
	CallTimeout time.Duration

	// Now is the clock. Heartbeat timestamps, the idle rule and the lease
	// windows read it. Default time.Now; tests inject their own.
	Now func() time.Time

	// Logger receives warnings (throttling, vanished queues, lease changes)
	// and debug records. Nil means silent.
	Logger *slog.Logger

	// OnQueueGone, if set, is called from the heartbeat goroutine when a
	// registered queue turns out to be deleted (QueueDoesNotExist). The
	// queue has been dropped from the heartbeater; the owner may recreate it
	// and Add it again. err matches *types.QueueDoesNotExist with errors.As.
	// It must not block for long: heartbeats of other queues wait for it.
	OnQueueGone func(queueURL string, err error)

	// OnSweep, if set, is called after each sweep this process ran, with
	// its report. It must not block for long.
	OnSweep func(Report)
}

// defaultOptions returns Options with every default filled in.
func defaultOptions() Options {
	return Options{
		Prefix:            sqsapi.DefaultQueuePrefix,
		Period:            DefaultPeriod,
		HeartbeatFraction: DefaultHeartbeatFraction,
		SweepConcurrency:  DefaultSweepConcurrency,
		CallTimeout:       DefaultCallTimeout,
		Now:               time.Now,
	}
}

// buildOptions applies optFns to the defaults and validates the result. op
// names the constructor in errors.
func buildOptions(op string, optFns []func(*Options)) (Options, error) {
	o := defaultOptions()
	for _, fn := range optFns {
		if fn != nil {
			fn(&o)
		}
	}
	if o.Prefix == "" {
		return o, sqsapi.Invalid(op, "Prefix", "must not be empty: an empty prefix would sweep every queue of the account")
	}
	if len(o.Prefix)+len(CoordinationQueueSuffix) > sqsapi.MaxQueueNameLength || !sqsapi.ValidQueueName(o.Prefix+CoordinationQueueSuffix) {
		return o, sqsapi.Invalid(op, "Prefix", "%q must be letters, digits, '-' or '_', at most %d characters", o.Prefix, sqsapi.MaxQueueNameLength-len(CoordinationQueueSuffix))
	}
	if o.Period < MinPeriod || o.Period > MaxPeriod {
		return o, sqsapi.Invalid(op, "Period", "%v is outside [%v, %v]", o.Period, MinPeriod, MaxPeriod)
	}
	if !(o.HeartbeatFraction > 0 && o.HeartbeatFraction <= MaxHeartbeatFraction) {
		return o, sqsapi.Invalid(op, "HeartbeatFraction", "%v is outside (0, %v]", o.HeartbeatFraction, MaxHeartbeatFraction)
	}
	if o.SweepConcurrency < 1 {
		return o, sqsapi.Invalid(op, "SweepConcurrency", "%d must be at least 1", o.SweepConcurrency)
	}
	if o.CallTimeout <= 0 {
		return o, sqsapi.Invalid(op, "CallTimeout", "%v must be positive", o.CallTimeout)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o, nil
}

// Errors returned by Run, Start, Add and AddTagged.
var (
	// ErrClosed is returned after Close.
	ErrClosed = sqsapi.ErrClosed
	// ErrRunning is returned by Run or Start while a previous Run is active.
	ErrRunning = errors.New("reaper: already running")
)
