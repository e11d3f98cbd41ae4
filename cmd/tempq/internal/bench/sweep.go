package bench

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/tempqueues/tempqueues/internal/callcount"
)

// Setting is the latency the server adds to every call in one part of a
// sweep: Latency, or with LatencyP99 above it a random wait, lognormal
// with median Latency and 99th percentile LatencyP99 (sqstest.Latency
// with a p99).
type Setting struct {
	Latency    time.Duration `json:"latency_ns"`
	LatencyP99 time.Duration `json:"latency_p99_ns,omitempty"`
}

// Jittered says whether the setting's wait is random.
func (s Setting) Jittered() bool { return s.Latency > 0 && s.LatencyP99 > s.Latency }

// String names the setting as --settings takes it: "0", "10ms", or
// "10ms/40ms" for a median of 10ms and a p99 of 40ms.
func (s Setting) String() string {
	if s.Jittered() {
		return s.Latency.String() + "/" + s.LatencyP99.String()
	}
	if s.Latency == 0 {
		return "0"
	}
	return s.Latency.String()
}

// Describe says in words what the setting adds to every call.
func (s Setting) Describe() string {
	switch {
	case s.Jittered():
		return fmt.Sprintf("lognormal latency per call, median %v, p99 %v", s.Latency, s.LatencyP99)
	case s.Latency > 0:
		return fmt.Sprintf("%v added to every call", s.Latency)
	default:
		return "no latency added"
	}
}

// Slug names the setting in file names: latency-0, latency-10ms,
// latency-10ms-p99-40ms.
func (s Setting) Slug() string {
	if s.Jittered() {
		return "latency-" + s.Latency.String() + "-p99-" + s.LatencyP99.String()
	}
	return "latency-" + s.String()
}

// ParseSetting parses what Setting.String prints: a duration ("0", "2ms")
// or MEDIAN/P99 ("10ms/40ms") with the p99 above a positive median.
func ParseSetting(v string) (Setting, error) {
	med, p99, jittered := strings.Cut(strings.TrimSpace(v), "/")
	var s Setting
	var err error
	if s.Latency, err = time.ParseDuration(med); err != nil || s.Latency < 0 {
		return Setting{}, fmt.Errorf("%q: want a latency (10ms) or MEDIAN/P99 (10ms/40ms)", v)
	}
	if jittered {
		if s.LatencyP99, err = time.ParseDuration(p99); err != nil || !s.Jittered() {
			return Setting{}, fmt.Errorf("%q: want MEDIAN/P99 with the p99 above a positive median, e.g. 10ms/40ms", v)
		}
	}
	return s, nil
}

// The sweep of issue 23 (BENCHMARKS.md, "Reproduce"): every contender
// but queue-per-request (which waits a second per request for its new
// queue, a thousand times any other's latency) at every concurrency
// under every setting.
var (
	SweepSettings = []Setting{
		{},
		{Latency: 2 * time.Millisecond},
		{Latency: 10 * time.Millisecond},
		{Latency: 25 * time.Millisecond},
		{Latency: 10 * time.Millisecond, LatencyP99: 40 * time.Millisecond},
	}
	SweepConcurrency = []int{1, 2, 4, 8, 16, 32, 64, 128, 256}
	SweepContenders  = []string{TempQueues, TempQueuesFewerCalls, StaticReplyQueue, ParkedReceivers, Floor}
)

// The sweep's default rounds, windows and warm-up: about 23 minutes on
// two cores for the whole of it (EstimateSweep).
const (
	SweepRounds = 2
	SweepWindow = 2500 * time.Millisecond
	SweepWarmUp = 500 * time.Millisecond
)

// SweepServer is the server of one setting, started by SweepConfig.Open.
type SweepServer struct {
	// NewClient, Server and InProcess become the setting's
	// Config.NewClient, Config.Server and Config.ServerInProcess.
	NewClient func(counter *callcount.Counter) *sqs.Client
	Server    string
	InProcess bool
	// Stop stops the server.
	Stop func()
}

// SweepConfig describes a sweep: one run of Config per setting, each on a
// server of its own that adds the setting's latency to every call. The
// idle, stopping and memory measurements are not part of it.
type SweepConfig struct {
	// Config is the run of every setting; its NewClient, Server,
	// ServerInProcess, Idle, Stop and MemoryQueues are ignored, and
	// ProgressPrefix is set to name the setting.
	Config
	Settings []Setting
	// Open starts the server of a setting.
	Open func(ctx context.Context, s Setting) (*SweepServer, error)
	// Done, if set, is given the report so far after each setting (to
	// save it, so that a sweep cut short keeps what it measured); an
	// error stops the sweep.
	Done func(*SweepReport) error
}

// SweepReport is the outcome of a sweep.
type SweepReport struct {
	Commit            string          `json:"commit"`
	GoVersion         string          `json:"go_version"`
	Started           time.Time       `json:"started"`
	Elapsed           time.Duration   `json:"elapsed_ns"`
	Rounds            int             `json:"rounds"`
	Window            time.Duration   `json:"window_ns"`
	WarmUp            time.Duration   `json:"warm_up_ns"`
	Concurrency       []int           `json:"concurrency"`
	Contenders        []string        `json:"contenders"`
	ServerConcurrency int             `json:"server_concurrency"`
	Settings          []SettingReport `json:"settings"`
}

// SettingReport is the run of one setting, with where tempqueues stands
// against the others at each concurrency (Front, filled by Judge).
type SettingReport struct {
	Setting Setting      `json:"setting"`
	Name    string       `json:"name"`
	Report  *Report      `json:"report"`
	Front   []FrontPoint `json:"front"`
}

// Judge fills every setting's Front from its results.
func (r *SweepReport) Judge() {
	for i := range r.Settings {
		r.Settings[i].Front = Front(r.Settings[i].Report)
	}
}

// The time a window and a contender's visit take beyond their
// configured length, measured on two cores: the garbage collections
// around a window and its last RPCs (a few milliseconds at one caller,
// 0.4 s at 256 callers and 25 ms per call); a visit's set-up and close
// (the tempqueues responder's Shutdown, the floor's queues).
const (
	windowOverhead = 200 * time.Millisecond
	visitOverhead  = time.Second
	serverStart    = 500 * time.Millisecond
)

// EstimateSweep returns about how long sc takes.
func EstimateSweep(sc SweepConfig) time.Duration {
	cfg := sc.Config
	cfg.setDefaults()
	visits := time.Duration(len(sc.Settings) * cfg.Rounds * len(cfg.Contenders))
	perVisit := visitOverhead + cfg.CreateWait + time.Duration(len(cfg.Concurrency))*(cfg.WarmUp+cfg.Duration+windowOverhead)
	return time.Duration(len(sc.Settings))*serverStart + visits*perVisit
}

// RunSweep runs the sweep and returns its report, judged.
func RunSweep(ctx context.Context, sc SweepConfig) (*SweepReport, error) {
	return runSweep(ctx, sc, newContender)
}

func runSweep(ctx context.Context, sc SweepConfig, newC func(name string, e *env, client *sqs.Client) contender) (*SweepReport, error) {
	if sc.Open == nil {
		return nil, errors.New("bench: SweepConfig.Open is nil")
	}
	if len(sc.Settings) == 0 {
		return nil, errors.New("bench: a sweep without settings")
	}
	base := sc.Config
	base.setDefaults()
	base.Idle, base.Stop, base.MemoryQueues = IdleConfig{}, StopConfig{}, 0
	start := time.Now()
	rep := &SweepReport{Commit: buildCommit(debug.ReadBuildInfo()), GoVersion: runtime.Version(), Started: start,
		Rounds: base.Rounds, Window: base.Duration, WarmUp: base.WarmUp, Concurrency: base.Concurrency,
		Contenders: base.Contenders, ServerConcurrency: base.ServerConcurrency}
	for i, s := range sc.Settings {
		srv, err := sc.Open(ctx, s)
		if err != nil {
			return nil, fmt.Errorf("bench: starting the server of setting %s: %w", s, err)
		}
		cfg := base
		cfg.NewClient, cfg.Server, cfg.ServerInProcess = srv.NewClient, srv.Server, srv.InProcess
		cfg.ProgressPrefix = fmt.Sprintf("[setting %d/%d: %s] ", i+1, len(sc.Settings), s)
		fmt.Fprintf(cfg.Progress, "setting %d/%d (%s): %s\n", i+1, len(sc.Settings), s, srv.Server)
		r, err := run(ctx, cfg, newC)
		if srv.Stop != nil {
			srv.Stop()
		}
		if err != nil {
			return nil, fmt.Errorf("setting %s: %w", s, err)
		}
		rep.Settings = append(rep.Settings, SettingReport{Setting: s, Name: s.String(), Report: r, Front: Front(r)})
		rep.Elapsed = time.Since(start)
		if sc.Done != nil {
			if err := sc.Done(rep); err != nil {
				return nil, err
			}
		}
	}
	return rep, nil
}
