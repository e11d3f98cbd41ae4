// Package bench measures tempqueues against the ways Go code does RPC over
// SQS without it, on one server in one run: the harness behind
// `tempq bench` and BENCHMARKS.md.
//
// Five contenders answer the same echo requests:
//
//   - tempqueues: requester.Requester and responder.Responder.Serve;
//   - queue-per-request: CreateQueue for each request's reply queue, wait for
//     the reply, DeleteQueue;
//   - static-reply-queue: one real reply queue per requester process,
//     correlation ids, reply pollers that follow demand (one per ten
//     waiting callers, at most four), deletes in DeleteMessageBatch calls;
//   - parked-receivers: what popular messaging libraries do (Watermill's
//     SQS request-reply among them): one real reply queue per requester
//     process, correlation ids, one ReceiveMessage (one message, 20 s wait)
//     parked per caller on the reply queue and one per worker
//     (ServerConcurrency of them) on the request queue, every send, receive
//     and delete a call of its own: no batching anywhere;
//   - floor: the four sequential calls of one round trip made by hand (send
//     the request, receive it, send the reply, receive it); its two deletes
//     follow off the clock.
//
// Runs with payloads (Config.Payloads) add two: tempqueues-no-compression
// (DisableCompression on both sides) and extended-client (the static reply
// queue doing what AWS's SQS Extended Client Libraries do by default: a
// message over 256 KiB through S3, no compression). tempqueues in every
// configuration and extended-client carry what SQS cannot through an
// in-memory S3 (memStore), which counts its calls and waits
// Config.S3Latency per call.
//
// Contenders 2 and 3 are served by a hand-written worker as a careful Go
// programmer writes one: a few long-poll loops that hand each message to a
// handler goroutine (at most ServerConcurrency at a time) and receive again
// at once; a handler replies with one SendMessage, and the deletes go out
// in DeleteMessageBatch calls (ten at a time, or after waiting up to a
// second for company). Contender 4 serves itself, as its libraries do.
//
// Each contender runs closed-loop at each concurrency (callers that send a
// request, wait for its reply, and repeat) for Config.Duration, after an
// unmeasured Config.WarmUp if set, and the run
// repeats this in Config.Rounds rounds, every round visiting every
// contender in turn (the contender order rotates from round to round, so
// that machine drift hits all of them alike) and every concurrency in
// turn within the contender's visit. A contender is set up at the start of
// its visit with a new SDK client and closed at its end, so that no
// goroutine of one contender runs while another is measured. Every
// contender has its own callcount.Counter; the API calls of a window are
// those its counter saw during the window, empty receives included, with
// the requests SQS bills for them (one per started 64 KiB of message
// payload a call sends or receives) and the bytes of their HTTP bodies.
//
// Every RPC sends a body and checks that the reply is the same, byte for
// byte: by default a tiny one ("ping N"), or, with Config.Payloads, one
// of each payload in turn (JSON text or random bytes in base64, of a given
// size; sent and echoed, or only in the reply to the tiny body) within
// every contender's visit. A body SQS cannot carry is reported refused,
// not measured: one over SQS's maximum message size for every contender
// without a payload store, and one that a contender's first call (off the
// clock) finds refused for its size with the attributes that contender
// adds.
//
// The CPU figure of a window is the user plus system CPU time of this
// process over the window (getrusage), from a garbage collection just
// before it, which clears what came before, to one just after it, which
// bills the window for the garbage it made. A server in a child process
// (the default of tempq bench) is not in it; a server in this process is
// (Config.ServerInProcess, Report.CPUIncludesServer).
//
// Beside the contenders the run measures the idle cost of a requester and
// a responder (IdleConfig), how fast idle clients with default options
// stop against the lifecycle contract's one second (StopConfig), and the
// heap per idle virtual queue.
//
// RunSweep runs the contenders under several settings of added latency
// (Setting, SweepConfig), one server per setting, and Front judges where
// tempqueues stands against the best of the others at each setting and
// concurrency (`tempq bench --sweep`).
package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/google/uuid"

	"github.com/tempqueues/tempqueues/internal/batch"
	"github.com/tempqueues/tempqueues/internal/callcount"
	"github.com/tempqueues/tempqueues/sqsapi"
)

// Contender names, in the order of the table.
const (
	TempQueues       = "tempqueues"
	QueuePerRequest  = "queue-per-request"
	StaticReplyQueue = "static-reply-queue"
	ParkedReceivers  = "parked-receivers"
	Floor            = "floor"
	// TempQueuesFewerCalls is tempqueues with PreferFewerCalls on both
	// sides: the option for cost over latency, so that the sweep's plots
	// show the trade-off. The front judges the default, never this.
	TempQueuesFewerCalls = "tempqueues-fewer-calls"
	// TempQueuesNoCompression is tempqueues with DisableCompression on
	// both sides: what a body cost before compression, for --payload runs.
	TempQueuesNoCompression = "tempqueues-no-compression"
	// TempQueuesSimpleBatching is tempqueues with the simplest sound send
	// policy on both sides: a send goes at once when no call of its
	// queue is in flight, else with the next call (internal/batch's
	// Simple). What the adaptive policy buys is measured against it.
	TempQueuesSimpleBatching = "tempqueues-simple-batching"
	// TempQueuesNoGather, TempQueuesNoAnnounce and TempQueuesNoOvertake
	// are tempqueues with one piece of the adaptive send policy off on
	// both sides (internal/batch's Adaptive): sends do not wait for the
	// rest of a burst; announced sends are not waited for; pending sends
	// always wait for a call in flight.
	TempQueuesNoGather   = "tempqueues-no-gather"
	TempQueuesNoAnnounce = "tempqueues-no-announce"
	TempQueuesNoOvertake = "tempqueues-no-overtake"
	// ExtendedClient is the static reply queue configured as AWS's SQS
	// Extended Client Libraries are by default: a message over 256 KiB
	// (body and attributes) goes through S3, nothing is compressed.
	ExtendedClient = "extended-client"
)

// Contenders lists the contenders a run measures by default.
var Contenders = []string{TempQueues, QueuePerRequest, StaticReplyQueue, ParkedReceivers, Floor}

// AllContenders lists every contender name: Contenders,
// TempQueuesFewerCalls, which the sweep runs, the two that --payload runs
// compare large bodies with, and the send policies (PolicyContenders).
var AllContenders = append(append(slices.Clone(Contenders), TempQueuesFewerCalls, TempQueuesNoCompression, ExtendedClient), PolicyContenders...)

// PolicyContenders are tempqueues under other send policies than its own,
// to measure what the adaptive policy and each of its pieces buy.
var PolicyContenders = []string{TempQueuesSimpleBatching, TempQueuesNoGather, TempQueuesNoAnnounce, TempQueuesNoOvertake}

// ours reports whether name is tempqueues in one of its configurations.
func ours(name string) bool {
	return name == TempQueues || name == TempQueuesFewerCalls || slices.Contains(PolicyContenders, name)
}

// DefaultServerConcurrency is the responders' concurrency unless a run
// has more callers: a service sized for 256 concurrent requests, the
// largest load the sweep puts on it. A responder run at its limit keeps
// fewer requests per receive (its parked polls hold the free slots).
const DefaultServerConcurrency = 256

// Config describes a run.
type Config struct {
	// NewClient returns a new SQS client whose calls counter counts (every
	// contender gets its own).
	NewClient func(counter *callcount.Counter) *sqs.Client
	// Server describes the server, for the report.
	Server string
	// ServerInProcess says that the server runs in this process, so that
	// its CPU time is in the CPU figures.
	ServerInProcess bool
	// Contenders to run; default all, in the order of Contenders.
	Contenders []string
	// Concurrency levels; default 1, 8, 64.
	Concurrency []int
	// Rounds is how many times every contender visits every concurrency;
	// default 3.
	Rounds int
	// Duration is the length of one measurement window; default 5s.
	Duration time.Duration
	// WarmUp is how long the callers of a window run unmeasured before
	// it, so that adaptive policies settle at the new load. Once their
	// last RPC has returned, the window starts as without a warm-up: its
	// callers start together and it ends with their last RPC. Its API
	// calls are counted from the end of the warm-up, whose trailing calls
	// (deletes after the last replies) stand for the window's own, which
	// come after its end. Default 0.
	WarmUp time.Duration
	// CallTimeout bounds one RPC; default 30s.
	CallTimeout time.Duration
	// CreateWait is how long queue-per-request waits after CreateQueue
	// before using the queue. The CreateQueue reference says to wait at
	// least one second before using a new queue; emulators need no wait.
	// Every contender also waits this long after its set-up, off the
	// clock, since its first window uses the queues it created. Default
	// 0; tempq bench passes 1s.
	CreateWait time.Duration
	// ServerPollers is the number of long-poll loops of the hand-written
	// worker, and MaxPollers of the tempqueues responder; default 4.
	ServerPollers int
	// ServerConcurrency is the responder's MaxConcurrency (and the
	// hand-written workers' handlers); default DefaultServerConcurrency,
	// or the largest concurrency when that is larger.
	ServerConcurrency int
	// Idle configures the idle-cost measurement; a zero Window skips it.
	Idle IdleConfig
	// Stop configures the measurement of how fast idle clients stop; a
	// zero Idle skips it. It runs Rounds times.
	Stop StopConfig
	// MemoryQueues is the number of idle virtual queues created to measure
	// their memory; 0 skips it.
	MemoryQueues int
	// S3Latency is how long the contenders' payload store (an in-memory
	// S3) waits before each call answers; default 0. tempq bench passes
	// twice its --latency unless told otherwise.
	S3Latency time.Duration
	// Payloads are the bodies of the RPCs, each measured at every
	// concurrency; default the tiny "ping N". Targets are judged, and
	// Front and the plots drawn, for the first payload only.
	Payloads []Payload
	// Progress receives one line per window; nil discards it.
	Progress io.Writer
	// ProgressPrefix starts every progress line of a window (a sweep
	// names its setting there).
	ProgressPrefix string
}

// IdleConfig configures the measurement of idle cost: a requester that made
// one request and a responder serving an empty queue, left alone for Window
// with every period of the library divided by Scale (reaper period,
// heartbeat interval by way of the retention, long-poll waits), so that
// Window stands for Window x Scale of real time.
type IdleConfig struct {
	Window time.Duration
	Scale  int // default 20: a 300 s retention becomes 15 s, a 20 s poll 1 s
}

func (c *Config) setDefaults() {
	if len(c.Contenders) == 0 {
		c.Contenders = Contenders
	}
	if len(c.Concurrency) == 0 {
		c.Concurrency = []int{1, 8, 64}
	}
	if c.Rounds <= 0 {
		c.Rounds = 3
	}
	if c.Duration <= 0 {
		c.Duration = 5 * time.Second
	}
	if c.CallTimeout <= 0 {
		c.CallTimeout = 30 * time.Second
	}
	if c.ServerPollers <= 0 {
		c.ServerPollers = 4
	}
	if c.ServerConcurrency <= 0 {
		c.ServerConcurrency = max(DefaultServerConcurrency, slices.Max(c.Concurrency))
	}
	if c.Idle.Scale <= 0 {
		c.Idle.Scale = 20
	}
	if c.Stop.Timeout <= 0 {
		c.Stop.Timeout = 10 * time.Second
	}
	if c.Progress == nil {
		c.Progress = io.Discard
	}
}

// Result is one contender at one concurrency with one payload, over all
// rounds.
type Result struct {
	Contender   string `json:"contender"`
	Concurrency int    `json:"concurrency"`
	// Payload is the payload's Label, "" for the default tiny body, and
	// BodyBytes the length of its message body.
	Payload   string `json:"payload,omitempty"`
	BodyBytes int    `json:"body_bytes,omitempty"`
	// Refused says why the contender could not carry the payload (a
	// message over SQS's maximum size); nothing was measured.
	Refused        string  `json:"refused,omitempty"`
	RPCs           int64   `json:"rpcs"`
	Errors         int64   `json:"errors"`
	Seconds        float64 `json:"seconds"`
	RPCPerSecond   float64 `json:"rpc_per_s"`
	P50ms          float64 `json:"p50_ms"`
	P99ms          float64 `json:"p99_ms"`
	APICalls       int64   `json:"api_calls"`
	APICallsPerRPC float64 `json:"api_calls_per_rpc"`
	// CallsByOp breaks APICalls down by operation.
	CallsByOp map[string]int64 `json:"calls_by_op"`
	// BilledRequests is what SQS bills for the API calls: each at least
	// one request, and one per started 64 KiB of message payload a call
	// sends or receives (callcount.Counter); BilledByOp breaks it down.
	BilledRequests int64            `json:"billed_requests"`
	BilledPerRPC   float64          `json:"billed_requests_per_rpc"`
	BilledByOp     map[string]int64 `json:"billed_by_op,omitempty"`
	// WireBytesSent and WireBytesReceived are the HTTP request and
	// response bodies of the API calls; WireBytesPerRPC is both over the
	// RPCs.
	WireBytesSent     int64   `json:"wire_bytes_sent"`
	WireBytesReceived int64   `json:"wire_bytes_received"`
	WireBytesPerRPC   float64 `json:"wire_bytes_per_rpc"`
	// DollarsPerMillionRPC is BilledPerRPC x $0.40 (the SQS standard price
	// per million requests).
	DollarsPerMillionRPC float64 `json:"usd_per_million_rpc"`
	// CPUMicrosPerRPC is the CPU time (user plus system) of the benchmark
	// process over the windows, in microseconds, divided by RPCs; 0 when
	// not measured. It includes the server when Report.CPUIncludesServer.
	CPUMicrosPerRPC float64 `json:"cpu_us_per_rpc,omitempty"`
	// S3Calls are the calls the contender made to its payload store (the
	// benchmark's in-memory S3), S3ByOp by operation (Put, Get, Delete),
	// S3BytesPerRPC the bytes they put and got per RPC, and
	// S3DollarsPerMillionRPC what S3 bills for them (a PUT $5 per million,
	// a GET $0.40, a DELETE nothing); all zero for a contender without a
	// store, or whose bodies all fit in SQS.
	S3Calls                int64            `json:"s3_calls,omitempty"`
	S3CallsPerRPC          float64          `json:"s3_calls_per_rpc,omitempty"`
	S3ByOp                 map[string]int64 `json:"s3_calls_by_op,omitempty"`
	S3BytesPerRPC          float64          `json:"s3_bytes_per_rpc,omitempty"`
	S3DollarsPerMillionRPC float64          `json:"s3_usd_per_million_rpc,omitempty"`
}

// PricePerMillionCalls is the price of a million SQS standard-queue API calls
// in US dollars (us-east-1, first 100 billion a month).
const PricePerMillionCalls = 0.40

// IdleResult is the idle cost of the tempqueues requester and responder.
type IdleResult struct {
	// Window is the real time measured, Scale its time factor.
	Window time.Duration `json:"window_ns"`
	Scale  int           `json:"scale"`
	// Calls made in the window, by operation.
	RequesterCalls map[string]int64 `json:"requester_calls"`
	ResponderCalls map[string]int64 `json:"responder_calls"`
	// Per hour of real time: calls in the window / (Window x Scale).
	RequesterPerHour float64 `json:"requester_calls_per_hour"`
	ResponderPerHour float64 `json:"responder_calls_per_hour"`
}

// Report is the outcome of a run.
type Report struct {
	Server string `json:"server"`
	// Commit is the revision the benchmark was built from, "-dirty" when
	// the tree had uncommitted changes, empty when the binary carries no
	// version control information (go run without -buildvcs=true).
	// GoVersion is runtime.Version(). Both say what a figure measured.
	Commit      string        `json:"commit"`
	GoVersion   string        `json:"go_version"`
	Started     time.Time     `json:"started"`
	Elapsed     time.Duration `json:"elapsed_ns"`
	Rounds      int           `json:"rounds"`
	Window      time.Duration `json:"window_ns"`
	WarmUp      time.Duration `json:"warm_up_ns,omitempty"`
	CreateWait  time.Duration `json:"create_wait_ns"`
	Concurrency []int         `json:"concurrency"`
	// ServerConcurrency is the responders' concurrency: the tempqueues
	// responder's MaxConcurrency, the hand-written worker's handlers, the
	// parked-receivers workers.
	ServerConcurrency int `json:"server_concurrency,omitempty"`
	// Payloads are the bodies measured, in order; none for the default
	// tiny body.
	Payloads []Payload `json:"payloads,omitempty"`
	Results  []Result  `json:"results"`
	// CPUIncludesServer says that the server ran in the benchmark process,
	// so that Result.CPUMicrosPerRPC counts its work too.
	CPUIncludesServer bool        `json:"cpu_includes_server,omitempty"`
	Idle              *IdleResult `json:"idle,omitempty"`
	// StopIdle is how long each client idled before its timed stop, and
	// Stop the stop times of each idle client (StopComponents), in
	// milliseconds; nil when not measured.
	StopIdle time.Duration          `json:"stop_idle_ns,omitempty"`
	Stop     map[string]*StopResult `json:"stop_ms,omitempty"`
	// BytesPerIdleVirtualQueue is the heap per idle virtual queue, 0 when
	// not measured.
	BytesPerIdleVirtualQueue float64 `json:"bytes_per_idle_virtual_queue,omitempty"`
	// Notes are what happened that a reader of the figures must know: a
	// set-up that failed and was tried again, a window that lasted far
	// longer than configured.
	Notes []string `json:"notes,omitempty"`
}

// buildCommit returns the vcs.revision the binary was built from, with
// "-dirty" when vcs.modified says the tree had uncommitted changes, or ""
// when the build recorded no revision.
func buildCommit(bi *debug.BuildInfo, ok bool) string {
	if !ok || bi == nil {
		return ""
	}
	var rev string
	var dirty bool
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev != "" && dirty {
		rev += "-dirty"
	}
	return rev
}

// Find returns the result of contender at concurrency with the run's first
// payload, or nil.
func (r *Report) Find(contender string, concurrency int) *Result {
	return r.FindPayload(contender, r.firstPayload(), concurrency)
}

// FindPayload returns the result of contender at concurrency with the
// payload labelled payload ("" for the default body), or nil.
func (r *Report) FindPayload(contender, payload string, concurrency int) *Result {
	for i := range r.Results {
		res := &r.Results[i]
		if res.Contender == contender && res.Concurrency == concurrency && res.Payload == payload {
			return res
		}
	}
	return nil
}

// firstPayload is the label of the run's first payload: the one Targets,
// Front and the plots consider.
func (r *Report) firstPayload() string {
	if len(r.Payloads) == 0 {
		return ""
	}
	return r.Payloads[0].Label()
}

// contender is one way of doing RPC over SQS. call makes one RPC for
// caller (0 to the concurrency-1) and returns its latency, which is the
// elapsed time except for the floor, whose deletes are off the clock.
type contender interface {
	name() string
	// setup creates the contender's queues and starts its goroutines;
	// close stops every one of them and deletes the queues.
	setup(ctx context.Context) error
	call(ctx context.Context, caller int) (time.Duration, error)
	close(ctx context.Context) error
}

// env is what contenders share.
type env struct {
	cfg    *Config
	prefix string // names every queue of the run
	// bodies holds the payload being measured; nil for the default tiny
	// body. run sets it between windows only, but a responder may still
	// be handling a late duplicate then, so it is read atomically.
	bodies atomic.Pointer[payloadBodies]
	// stores are the contenders' payload stores, by contender name: each
	// counts its own calls over the run.
	stores map[string]*memStore
}

// payloadBodies are the callers' payload bodies, and whether the request is the
// tiny body with only the reply carrying the payload.
type payloadBodies struct {
	of        []string
	replyOnly bool
}

// body returns the payload of caller: what its reply must be.
func (e *env) body(caller int) string {
	b := e.bodies.Load()
	if b == nil {
		return Payload{}.Body(caller)
	}
	return b.of[caller]
}

// request returns the body caller sends: its payload, or the tiny body
// when only the reply carries the payload.
func (e *env) request(caller int) string {
	if b := e.bodies.Load(); b != nil && b.replyOnly {
		return Payload{}.Body(caller)
	}
	return e.body(caller)
}

// reply returns a responder's answer to a request with body req: the body
// itself (an echo), or, when only the reply carries the payload, the
// payload of the caller that the tiny body names.
func (e *env) reply(req string) string {
	b := e.bodies.Load()
	if b == nil || !b.replyOnly {
		return req
	}
	if n, ok := strings.CutPrefix(req, "ping "); ok {
		if i, err := strconv.Atoi(n); err == nil && i >= 0 && i < len(b.of) {
			return b.of[i]
		}
	}
	return req // not a caller's request: the caller's check fails
}

// store returns the payload store of contender name.
func (e *env) store(name string) *memStore { return e.stores[name] }

// usePayload makes p the body of the next windows, for up to callers
// callers.
func (e *env) usePayload(p Payload, callers int) {
	if p.tiny() {
		e.bodies.Store(nil)
		return
	}
	b := &payloadBodies{of: make([]string, callers), replyOnly: p.replyOnly()}
	for i := range b.of {
		b.of[i] = p.Body(i)
	}
	e.bodies.Store(b)
}

// queueName returns a unique queue name within the run.
func (e *env) queueName(kind string) string {
	return e.prefix + kind + "-" + strings.ReplaceAll(uuid.NewString(), "-", "")
}

// tally accumulates the windows of one contender at one concurrency with
// one payload.
type tally struct {
	lat            []time.Duration
	rpcs           int64
	errors         int64
	elapsed        time.Duration
	calls          map[string]int64
	billed         map[string]int64
	sent, received int64
	cpu            time.Duration
	cpuOK          bool   // every window measured its CPU time
	refused        string // why the payload was refused, if it was
	s3             map[string]int64
	s3Bytes        int64
}

// allocated returns the bytes this process has allocated on the heap and
// the garbage collections it has completed so far: the progress line shows
// both per RPC, since on a small heap most of the garbage collector's CPU
// comes from how often it runs, which the bytes allocated per RPC decide.
func allocated() (bytes, gcs uint64) {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}, {Name: "/gc/cycles/total:gc-cycles"}}
	metrics.Read(s)
	return s[0].Value.Uint64(), s[1].Value.Uint64()
}

// microsPerRPC returns d in microseconds per RPC, 0 without RPCs.
func microsPerRPC(d time.Duration, rpcs int64) float64 {
	if rpcs <= 0 {
		return 0
	}
	return float64(d.Nanoseconds()) / 1e3 / float64(rpcs)
}

// result sums up t, the windows of contender with payload p at conc
// callers.
func (t *tally) result(contender string, p Payload, conc int) Result {
	slices.Sort(t.lat)
	res := Result{Contender: contender, Concurrency: conc, Payload: p.Label(), Refused: t.refused,
		RPCs: t.rpcs, Errors: t.errors, Seconds: t.elapsed.Seconds(), CallsByOp: t.calls,
		BilledByOp: t.billed, WireBytesSent: t.sent, WireBytesReceived: t.received}
	if !p.tiny() {
		res.BodyBytes = p.BodyBytes()
	}
	for _, n := range t.calls {
		res.APICalls += n
	}
	for _, n := range t.billed {
		res.BilledRequests += n
	}
	if t.elapsed > 0 {
		res.RPCPerSecond = float64(t.rpcs) / t.elapsed.Seconds()
	}
	if t.rpcs > 0 {
		res.P50ms = ms(sortedPercentile(t.lat, 0.5))
		res.P99ms = ms(sortedPercentile(t.lat, 0.99))
		res.APICallsPerRPC = float64(res.APICalls) / float64(t.rpcs)
		res.BilledPerRPC = float64(res.BilledRequests) / float64(t.rpcs)
		res.WireBytesPerRPC = float64(t.sent+t.received) / float64(t.rpcs)
		res.DollarsPerMillionRPC = res.BilledPerRPC * PricePerMillionCalls
	}
	if t.cpuOK {
		res.CPUMicrosPerRPC = microsPerRPC(t.cpu, t.rpcs)
	}
	if len(t.s3) > 0 {
		res.S3ByOp = t.s3
		for _, n := range t.s3 {
			res.S3Calls += n
		}
		if t.rpcs > 0 {
			res.S3CallsPerRPC = float64(res.S3Calls) / float64(t.rpcs)
			res.S3BytesPerRPC = float64(t.s3Bytes) / float64(t.rpcs)
			res.S3DollarsPerMillionRPC = s3Dollars(t.s3) / float64(t.rpcs)
		}
	}
	return res
}

// carries makes p the body of c's next windows, for up to callers
// callers, and returns why c cannot carry it, if it cannot: a body over
// SQS's maximum message size, or one that c's first call with it (off the
// clock) finds refused for its size, with the attributes c adds. Another
// failure of that call is noted and returned, so that the run ends as on
// a failed window.
func carries(ctx context.Context, cfg *Config, e *env, c contender, p Payload, callers int) (string, error) {
	if p.tiny() {
		e.usePayload(p, callers)
		return "", nil
	}
	if o, ok := c.(offloader); (!ok || !o.offloads()) && p.BodyBytes() > sqsapi.MaxMessageSize {
		n := p.BodyBytes()
		return fmt.Sprintf("a body of %d bytes is over SQS's maximum message size, %d bytes", n, sqsapi.MaxMessageSize), nil
	}
	e.usePayload(p, callers)
	cctx, cancel := context.WithTimeout(ctx, cfg.CallTimeout)
	defer cancel()
	if _, err := c.call(cctx, 0); err != nil {
		if refusedForSize(err) {
			return brief(err.Error(), 300), nil
		}
		if ctx.Err() == nil {
			return "", fmt.Errorf("first call with the %s payload: %w", p.Label(), err)
		}
		return "", ctx.Err()
	}
	return "", nil
}

// Run runs the benchmark and returns its report.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	return run(ctx, cfg, newContender)
}

// run is Run with the contenders made by newC, which tests replace.
func run(ctx context.Context, cfg Config, newC func(name string, e *env, client *sqs.Client) contender) (*Report, error) {
	cfg.setDefaults()
	if cfg.NewClient == nil {
		return nil, errors.New("bench: Config.NewClient is nil")
	}
	for _, n := range cfg.Contenders {
		if !slices.Contains(AllContenders, n) {
			return nil, fmt.Errorf("bench: unknown contender %q (have %s)", n, strings.Join(AllContenders, ", "))
		}
	}
	start := time.Now()
	e := &env{cfg: &cfg, prefix: "tqbench-" + uuid.NewString()[:8] + "-", stores: make(map[string]*memStore)}
	rep := &Report{Server: cfg.Server, Commit: buildCommit(debug.ReadBuildInfo()), GoVersion: runtime.Version(), Started: start, Rounds: cfg.Rounds, Window: cfg.Duration,
		WarmUp: cfg.WarmUp, CreateWait: cfg.CreateWait, Concurrency: cfg.Concurrency, ServerConcurrency: cfg.ServerConcurrency, CPUIncludesServer: cfg.ServerInProcess}

	payloads := cfg.Payloads
	if len(payloads) == 0 {
		payloads = []Payload{{}}
	} else {
		rep.Payloads = payloads
	}
	for _, p := range payloads {
		if !p.tiny() && (p.Bytes < MinPayloadBytes || p.Bytes > MaxPayloadBytes || !slices.Contains(PayloadKinds, p.Kind)) {
			return nil, fmt.Errorf("bench: payload %+v: want a kind of %s and %d to %d bytes", p, strings.Join(PayloadKinds, ", "), MinPayloadBytes, MaxPayloadBytes)
		}
	}
	counters := make(map[string]*callcount.Counter)
	tallies := make(map[string][]map[int]*tally) // by contender, payload, concurrency
	for _, n := range cfg.Contenders {
		counters[n] = new(callcount.Counter)
		e.stores[n] = newMemStore(cfg.S3Latency)
		tallies[n] = make([]map[int]*tally, len(payloads))
		for pi := range payloads {
			tallies[n][pi] = make(map[int]*tally)
			for _, conc := range cfg.Concurrency {
				tallies[n][pi][conc] = &tally{calls: make(map[string]int64), billed: make(map[string]int64), s3: make(map[string]int64), cpuOK: true}
			}
		}
	}
	total := cfg.Rounds * len(cfg.Concurrency) * len(cfg.Contenders) * len(payloads)
	done := 0
	callers := slices.Max(cfg.Concurrency)
	for round := range cfg.Rounds {
		for i := range cfg.Contenders {
			// Rotate the order so no contender always runs first.
			name := cfg.Contenders[(i+round)%len(cfg.Contenders)]
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			e.usePayload(Payload{}, 0) // set-ups send the tiny body
			c := newC(name, e, cfg.NewClient(counters[name]))
			err := setUp(ctx, &cfg, c)
			if err != nil && ctx.Err() == nil {
				// One failed set-up (a stall of the shared machine, say)
				// does not end a long run: say so, and try once more.
				rep.note(cfg.Progress, "%s, round %d: %v; set up once more", name, round+1, err)
				closeVisit(ctx, &cfg, c)
				c = newC(name, e, cfg.NewClient(counters[name]))
				err = setUp(ctx, &cfg, c)
			}
			for pi, p := range payloads {
				if err != nil {
					break
				}
				pt := tallies[name][pi]
				label := func() string {
					done++
					return fmt.Sprintf("%s[%d/%d] round %d", cfg.ProgressPrefix, done, total, round+1)
				}
				if pt[cfg.Concurrency[0]].refused == "" {
					pt[cfg.Concurrency[0]].refused, err = carries(ctx, &cfg, e, c, p, callers)
				}
				if why := pt[cfg.Concurrency[0]].refused; why != "" {
					for _, conc := range cfg.Concurrency {
						pt[conc].refused = why
						fmt.Fprintf(cfg.Progress, "%s  %-18s c=%-3d %s  %s: %s\n", label(), name, conc, p.Label(), overMax, why)
					}
					continue
				}
				for _, conc := range cfg.Concurrency {
					if err != nil {
						break
					}
					err = measure(ctx, &cfg, rep, c, p, counters[name], e.stores[name], pt[conc], conc, round, label())
				}
			}
			e.usePayload(Payload{}, 0) // let the bodies go
			closeVisit(ctx, &cfg, c)
			if n := e.stores[name].drop(); n > 0 {
				rep.note(cfg.Progress, "%s, round %d: %d objects left in the payload store after its close", name, round+1, n)
			}
			if err != nil {
				return nil, fmt.Errorf("bench: %s: %w", name, err)
			}
		}
	}
	for _, name := range cfg.Contenders {
		for pi, p := range payloads {
			for _, conc := range cfg.Concurrency {
				rep.Results = append(rep.Results, tallies[name][pi][conc].result(name, p, conc))
			}
		}
	}
	if cfg.Idle.Window > 0 {
		fmt.Fprintf(cfg.Progress, "measuring idle cost over %v (x%d: stands for %v)\n", cfg.Idle.Window, cfg.Idle.Scale, cfg.Idle.Window*time.Duration(cfg.Idle.Scale))
		idle, err := measureIdle(ctx, e)
		if err != nil {
			return nil, fmt.Errorf("bench: idle: %w", err)
		}
		rep.Idle = idle
	}
	if cfg.Stop.Idle > 0 {
		fmt.Fprintf(cfg.Progress, "measuring how fast idle clients stop (idle %v before each stop, %d rounds)\n", cfg.Stop.Idle, cfg.Rounds)
		stops, err := measureStops(ctx, e)
		if err != nil {
			return nil, fmt.Errorf("bench: stopping: %w", err)
		}
		rep.StopIdle, rep.Stop = cfg.Stop.Idle, stops
	}
	if cfg.MemoryQueues > 0 {
		fmt.Fprintf(cfg.Progress, "measuring memory of %d idle virtual queues\n", cfg.MemoryQueues)
		b, err := bytesPerIdleQueue(cfg.MemoryQueues)
		if err != nil {
			return nil, fmt.Errorf("bench: memory: %w", err)
		}
		rep.BytesPerIdleVirtualQueue = b
	}
	rep.Elapsed = time.Since(start)
	return rep, nil
}

// setUp sets c up for its visit.
func setUp(ctx context.Context, cfg *Config, c contender) error {
	if err := c.setup(ctx); err != nil {
		return fmt.Errorf("setting up: %w", err)
	}
	// New queues may need a moment before use (CreateWait); keep it out
	// of the windows.
	return sleep(ctx, cfg.CreateWait)
}

// closeVisit closes c at the end of its visit, within a minute.
func closeVisit(ctx context.Context, cfg *Config, c contender) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	if err := c.close(cctx); err != nil {
		fmt.Fprintf(cfg.Progress, "closing %s: %v\n", c.name(), err)
	}
}

// note records something a reader of the report must know, and prints it
// on progress.
func (r *Report) note(progress io.Writer, format string, args ...any) {
	n := fmt.Sprintf(format, args...)
	r.Notes = append(r.Notes, n)
	fmt.Fprintln(progress, "note:", n)
}

// stallSlack is how much longer than its configured length a window may
// last before the report notes it: beyond the last RPCs, only a stall of
// the machine or an RPC that hangs makes it longer.
const stallSlack = 5 * time.Second

func newContender(name string, e *env, client *sqs.Client) contender {
	switch name {
	case TempQueues:
		return &tempQueues{env: e, client: client}
	case TempQueuesFewerCalls:
		return &tempQueues{env: e, client: client, fewerCalls: true}
	case TempQueuesNoCompression:
		return &tempQueues{env: e, client: client, noCompression: true}
	case TempQueuesSimpleBatching:
		return &tempQueues{env: e, client: client, policy: policyOf{name, batch.Simple}}
	case TempQueuesNoGather:
		return &tempQueues{env: e, client: client, policy: policyOf{name, batch.Adaptive{NoGather: true}.New}}
	case TempQueuesNoAnnounce:
		return &tempQueues{env: e, client: client, policy: policyOf{name, batch.Adaptive{NoAnnounce: true}.New}}
	case TempQueuesNoOvertake:
		return &tempQueues{env: e, client: client, policy: policyOf{name, batch.Adaptive{NoOvertake: true}.New}}
	case ExtendedClient:
		return &staticReply{env: e, client: client, extended: true}
	case QueuePerRequest:
		return &queuePerRequest{env: e, client: client}
	case StaticReplyQueue:
		return &staticReply{env: e, client: client}
	case ParkedReceivers:
		return &parkedReceivers{env: e, client: client}
	default:
		return &floor{env: e, client: client}
	}
}

// measure runs one window of c at conc callers, adds it to t, and prints
// a progress line that starts with label. Only a context error is returned:
// failed RPCs are counted, not fatal.
func measure(ctx context.Context, cfg *Config, rep *Report, c contender, p Payload, counter *callcount.Counter, store *memStore, t *tally, conc, round int, label string) error {
	var before *callcount.Tally
	var storeBefore storeTally
	if cfg.WarmUp > 0 {
		// The callers run unmeasured first, so that adaptive policies
		// settle at this load; then, once their last RPC has returned,
		// the window starts as it would without a warm-up. Its calls are
		// counted from the warm-up's end: the calls that trail the
		// warm-up's last RPCs (deletes, a poll) stand for those that
		// trail the window's, which its count misses.
		warm := window(ctx, c, conc, cfg.WarmUp, cfg.CallTimeout)
		b := counter.Tally()
		before = &b
		storeBefore = store.tally()
		if warm.firstErr != nil {
			fmt.Fprintf(cfg.Progress, "%s  %-18s c=%-3d warm-up: %d errors, first: %v\n", label, c.name(), conc, warm.errors, warm.firstErr)
		}
	}
	// Collect what came before the window (the set-up, the previous
	// window, the warm-up) so that this window does not pay for it.
	runtime.GC()
	alloc0, gcs0 := allocated()
	cpu0, ok0 := processCPU()
	if before == nil {
		b := counter.Tally()
		before = &b
		storeBefore = store.tally()
	}
	w := window(ctx, c, conc, cfg.Duration, cfg.CallTimeout)
	counted := counter.Tally().Since(*before)
	stored := store.tally().since(storeBefore)
	alloc1, gcs1 := allocated()
	// And collect the window's own garbage on its bill.
	runtime.GC()
	cpu1, ok1 := processCPU()
	if err := ctx.Err(); err != nil {
		return err
	}
	if w.elapsed > cfg.Duration+stallSlack {
		rep.note(cfg.Progress, "%s at %d callers, round %d: the window lasted %v instead of %v (a stall of the machine, or an RPC that hung)",
			c.name(), conc, round+1, w.elapsed.Round(time.Millisecond), cfg.Duration)
	}
	t.lat = append(t.lat, w.lat...)
	t.rpcs += int64(len(w.lat))
	t.errors += w.errors
	t.elapsed += w.elapsed
	t.cpu += cpu1 - cpu0
	t.cpuOK = t.cpuOK && ok0 && ok1
	var calls, billed int64
	for op, n := range counted.Calls {
		t.calls[op] += n
		calls += n
	}
	for op, n := range counted.Billed {
		t.billed[op] += n
		billed += n
	}
	t.sent += counted.SentBytes
	t.received += counted.ReceivedBytes
	var s3 int64
	for op, n := range stored.calls {
		t.s3[op] += n
		s3 += n
	}
	t.s3Bytes += stored.bytes
	cpu := "n/a"
	if ok0 && ok1 {
		cpu = fmt.Sprintf("%.0f", microsPerRPC(cpu1-cpu0, int64(len(w.lat))))
	}
	rpcs := float64(max(len(w.lat), 1))
	payload := ""
	if !p.tiny() {
		payload = " " + p.Label()
	}
	fmt.Fprintf(cfg.Progress, "%s  %-18s c=%-3d%s %7.0f rpc/s  p50 %7.2f ms  %5.2f calls/rpc  %5.2f billed/rpc  %4.2f S3/rpc  %7.1f wire KiB/rpc  %5s µs CPU/rpc  %5.1f KB alloc/rpc  %4.0f rpc/gc  %d errors\n",
		label, c.name(), conc, payload, float64(len(w.lat))/w.elapsed.Seconds(),
		ms(percentile(w.lat, 0.5)), float64(calls)/rpcs, float64(billed)/rpcs, float64(s3)/rpcs, float64(counted.SentBytes+counted.ReceivedBytes)/1024/rpcs, cpu,
		float64(alloc1-alloc0)/1024/rpcs, rpcs/float64(max(gcs1-gcs0, 1)), w.errors)
	if w.firstErr != nil {
		fmt.Fprintf(cfg.Progress, "    first error: %v\n", w.firstErr)
	}
	return nil
}

type windowResult struct {
	lat      []time.Duration
	errors   int64
	elapsed  time.Duration
	firstErr error
}

// window runs conc closed-loop callers for d: each makes RPCs back to back
// until d has passed; the window ends when the last RPC has returned.
func window(ctx context.Context, c contender, conc int, d, timeout time.Duration) windowResult {
	start := time.Now()
	deadline := start.Add(d)
	var (
		mu  sync.Mutex
		res windowResult
		wg  sync.WaitGroup
	)
	for i := range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var lat []time.Duration
			var errs int64
			var first error
			for time.Now().Before(deadline) && ctx.Err() == nil {
				cctx, cancel := context.WithTimeout(ctx, timeout)
				l, err := c.call(cctx, i)
				cancel()
				if err != nil {
					errs++
					if first == nil {
						first = err
					}
					continue
				}
				lat = append(lat, l)
			}
			mu.Lock()
			res.lat = append(res.lat, lat...)
			res.errors += errs
			if res.firstErr == nil {
				res.firstErr = first
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	res.elapsed = time.Since(start)
	return res
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func percentile(lat []time.Duration, p float64) time.Duration {
	s := slices.Clone(lat)
	slices.Sort(s)
	return sortedPercentile(s, p)
}

// sortedPercentile returns the nearest-rank percentile of sorted values.
func sortedPercentile(s []time.Duration, p float64) time.Duration {
	if len(s) == 0 {
		return 0
	}
	i := int(float64(len(s))*p+0.999999) - 1
	return s[min(max(i, 0), len(s)-1)]
}
