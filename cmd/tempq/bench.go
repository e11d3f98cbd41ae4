package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/tempqueues/tempqueues/cmd/tempq/internal/bench"
	"github.com/tempqueues/tempqueues/internal/callcount"
	"github.com/tempqueues/tempqueues/internal/testkit/child"
	"github.com/tempqueues/tempqueues/internal/testkit/sqsenv"
	"github.com/tempqueues/tempqueues/sqsclient"
	"github.com/tempqueues/tempqueues/sqstest"
)

// benchIdleConns keeps enough connections open for 64 callers plus the
// background calls, for every contender alike, so that no contender pays
// for TCP set-ups the SDK's default pool of 10 would cause. A run with
// more callers keeps benchConnsPerCaller per caller or responder worker
// (parked-receivers parks a receive per caller and one per worker, while
// its callers send).
const (
	benchIdleConns      = 256
	benchConnsPerCaller = 4
)

func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("bench", "[--sweep [--settings 0,10ms,10ms/40ms]] [--duration 5s] [--rounds 3] [--payload 1KiB,64KiB [--payload-kind json|binary] [--payload-shape echo|reply]] [--idle-window 30s] [--stop-idle 2s] [--json] [--svg-dir DIR] [--endpoint-url URL | --aws]", stdout)
	var env sqsenv.Flags
	env.Register(fs)
	duration := fs.Duration("duration", 5*time.Second, fmt.Sprintf("length of one measurement window (per contender, concurrency and round); --sweep: %v", bench.SweepWindow))
	rounds := fs.Int("rounds", 3, fmt.Sprintf("rounds; each visits every contender once, in rotating order, and every concurrency within the visit; --sweep: %d", bench.SweepRounds))
	concurrency := fs.String("concurrency", "1,8,64", fmt.Sprintf("comma-separated numbers of concurrent callers; --sweep: %s", joinInts(bench.SweepConcurrency)))
	contenders := fs.String("contenders", strings.Join(bench.Contenders, ","), fmt.Sprintf("comma-separated contenders, of %s (tempqueues-simple-batching and tempqueues-no-*: tempqueues under the simplest send policy, and with one piece of its adaptive one off; BENCHMARKS.md); --sweep: %s", strings.Join(bench.AllContenders, ","), strings.Join(bench.SweepContenders, ",")))
	serverConcurrency := fs.Int("server-concurrency", 0, fmt.Sprintf("the responders' concurrency (the tempqueues responder's MaxConcurrency, the hand-written worker's handlers, parked-receivers' workers); 0: %d or the largest --concurrency when larger; --sweep: %d, the largest of the whole sweep, so that a narrowed sweep measures the same points", bench.DefaultServerConcurrency, slices.Max(bench.SweepConcurrency)))
	warmUp := fs.Duration("warm-up", 0, fmt.Sprintf("run the callers this long, unmeasured, before each window, so that adaptive policies settle at the new load; --sweep: %v", bench.SweepWarmUp))
	idleWindow := fs.Duration("idle-window", 30*time.Second, "idle-cost window (0 skips); stands for window x idle-scale of real time")
	idleScale := fs.Int("idle-scale", 20, fmt.Sprintf("divide the library's periods by this for the idle measurement (1 to %d)", bench.MaxIdleScale))
	stopIdle := fs.Duration("stop-idle", 2*time.Second, "how long an idle requester, virtualqueue client, tempqueue client and responder (default options: 20 s long polls) are left alone before their Close, Shutdown or cancelled Serve is timed, once per round (0 skips); target: each stops within 1s, without error")
	memQueues := fs.Int("memory-queues", 200_000, "idle virtual queues created to measure their memory (0 skips)")
	createWait := fs.Duration("create-wait", time.Second, "queue-per-request: wait after CreateQueue before using the queue (AWS documents at least 1s; emulators need none); every contender also waits this long, off the clock, after its set-up; --sweep: 0 (sqstest needs none)")
	latency := fs.Duration("latency", 0, "sqstest only: added to every call, to stand for a network round trip")
	latencyP99 := fs.Duration("latency-p99", 0, "sqstest only: make --latency the median of a random wait per call with this 99th percentile (lognormal; must be above --latency)")
	sweep := fs.Bool("sweep", false, "run the front sweep: every --settings x --concurrency x --contenders, each setting on an sqstest child process of its own; skips the idle, stopping and memory measurements; prints the front and per-setting tables (BENCHMARKS.md)")
	settings := fs.String("settings", joinSettings(bench.SweepSettings), "--sweep: comma-separated latencies added to every call, each a duration or MEDIAN/P99 for a lognormal one")
	inProcess := fs.Bool("in-process", false, "run sqstest inside the benchmark's own process instead of a child process (client and server then share one Go scheduler, and the CPU figures include the server: see BENCHMARKS.md)")
	payload := fs.String("payload", "", fmt.Sprintf("comma-separated payload sizes every RPC sends and gets back, byte-exact, each measured at every concurrency: bytes, or with B, KiB or MiB (1KiB,64KiB,256KiB,1MiB,4MiB,16MiB; %d B to %s); a body over SQS's 1 MiB (4MiB, 16MiB, or a binary 1MiB in base64) goes through the payload store for tempqueues and extended-client, and is reported refused, not measured, for the others; default: the tiny body \"ping N\"", bench.MinPayloadBytes, bench.FormatSize(bench.MaxPayloadBytes)))
	payloadKind := fs.String("payload-kind", bench.PayloadJSON, "with --payload: json (JSON text, generated from a seed) or binary (random bytes, sent base64-encoded in the body); both, comma-separated, measures each size in each kind")
	payloadShape := fs.String("payload-shape", bench.ShapeEcho, "with --payload: echo (the request carries the payload and the reply echoes it) or reply (the request is the tiny body and only the reply carries the payload, as a list endpoint's); both, comma-separated, measures each")
	s3Latency := fs.Duration("s3-latency", 0, "with --payload: how long the payload store (an in-memory S3 that the contenders with one use for what does not fit in SQS) waits before each call answers; 0: twice --latency, since S3 answers more slowly than SQS")
	jsonOut := fs.Bool("json", false, "print the report as JSON instead of tables")
	jsonFile := fs.String("json-file", "", "also write the JSON report to this file (--sweep: rewritten after each setting)")
	fromJSON := fs.String("from-json", "", "do not run: print (and plot) the report or sweep saved in this JSON file")
	svgDir := fs.String("svg-dir", "", "write latency.svg, calls.svg, throughput.svg and cpu.svg to this directory (--sweep: front-<setting>.svg per setting, API calls per RPC against p50)")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the benchmark process over the whole run to this file (for go tool pprof); run one contender (--contenders) to see where its CPU goes")
	memProfile := fs.String("memprofile", "", "write the benchmark process's allocation profile (every allocation of the run, sampled) to this file at the end of the run (for go tool pprof -sample_index=alloc_space)")
	verbose := fs.Bool("v", false, "log at debug level to stderr how the client was configured (--endpoint-url, AWS_ENDPOINT_URL_SQS, --aws)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError("unexpected arguments %v", fs.Args())
	}
	if err := checkServerChoice(env); err != nil {
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if *sweep {
		// The sweep's own defaults, where the command line says nothing.
		if !set["duration"] {
			*duration = bench.SweepWindow
		}
		if !set["rounds"] {
			*rounds = bench.SweepRounds
		}
		if !set["concurrency"] {
			*concurrency = joinInts(bench.SweepConcurrency)
		}
		if !set["contenders"] {
			*contenders = strings.Join(bench.SweepContenders, ",")
		}
		if !set["warm-up"] {
			*warmUp = bench.SweepWarmUp
		}
		if !set["create-wait"] {
			*createWait = 0
		}
		if !set["server-concurrency"] {
			*serverConcurrency = slices.Max(bench.SweepConcurrency)
		}
	} else if set["settings"] {
		return usageError("--settings applies to --sweep only")
	}
	var payloads []bench.Payload
	if set["payload"] {
		if *sweep {
			return usageError("--payload: the sweep measures the default body; run --payload without --sweep")
		}
		kinds, err := bench.ParseKinds(*payloadKind)
		if err != nil {
			return usageError("--payload-kind: %v", err)
		}
		shapes, err := bench.ParseShapes(*payloadShape)
		if err != nil {
			return usageError("--payload-shape: %v", err)
		}
		if payloads, err = bench.ParsePayloads(*payload, kinds, shapes...); err != nil {
			return usageError("--payload: %v", err)
		}
	} else {
		for _, f := range []string{"payload-kind", "payload-shape", "s3-latency"} {
			if set[f] {
				return usageError("--%s applies with --payload only", f)
			}
		}
	}
	if *s3Latency < 0 {
		return usageError("--s3-latency must not be negative")
	}
	if *s3Latency == 0 {
		*s3Latency = 2 * *latency
	}
	levels, err := parseInts(*concurrency)
	if err != nil {
		return usageError("--concurrency: %v", err)
	}
	names := strings.Split(*contenders, ",")
	for _, n := range names {
		if !slices.Contains(bench.AllContenders, n) {
			return usageError("--contenders: unknown %q (have %s)", n, strings.Join(bench.AllContenders, ", "))
		}
	}
	if *idleScale < 1 || *idleScale > bench.MaxIdleScale {
		return usageError("--idle-scale %d: want 1 to %d", *idleScale, bench.MaxIdleScale)
	}
	if *duration <= 0 || *rounds <= 0 {
		return usageError("--duration and --rounds must be positive")
	}
	if *serverConcurrency < 0 {
		return usageError("--server-concurrency must not be negative")
	}
	if *stopIdle < 0 || *idleWindow < 0 || *warmUp < 0 || *latency < 0 {
		return usageError("--stop-idle, --idle-window, --warm-up and --latency must not be negative")
	}
	if err := checkLatencyP99(*latency, *latencyP99); err != nil {
		return err
	}
	var sweepSettings []bench.Setting
	if *sweep {
		if set["latency"] || set["latency-p99"] {
			return usageError("--sweep sets the latency of each setting: use --settings, not --latency")
		}
		for _, v := range strings.Split(*settings, ",") {
			st, err := bench.ParseSetting(v)
			if err != nil {
				return usageError("--settings: %v", err)
			}
			sweepSettings = append(sweepSettings, st)
		}
	}

	if *fromJSON != "" {
		return outputSaved(*fromJSON, stdout, stderr, *svgDir, *jsonOut)
	}

	conns := max(benchIdleConns, benchConnsPerCaller*max(slices.Max(levels), *serverConcurrency))
	httpClient := awshttp.NewBuildableClient().WithTransportOptions(func(t *http.Transport) {
		t.MaxIdleConns = conns
		t.MaxIdleConnsPerHost = conns
	})
	clients := func(base sqs.Options) func(counter *callcount.Counter) *sqs.Client {
		return func(counter *callcount.Counter) *sqs.Client {
			return sqs.New(base, func(o *sqs.Options) {
				o.HTTPClient = httpClient
				sqsclient.BufferRequestBodies(o)
				o.APIOptions = append(slices.Clone(o.APIOptions), counter.Register)
			})
		}
	}
	region := env.Region
	if region == "" {
		region = "us-east-1"
	}
	// sqstestOptions are the client options of an sqstest server at url.
	sqstestOptions := func(url string) sqs.Options {
		return sqs.Options{Region: region, BaseEndpoint: aws.String(url),
			Credentials: credentials.NewStaticCredentialsProvider("tempq", "tempq", "")}
	}
	cfg := bench.Config{
		Contenders:        names,
		Concurrency:       levels,
		Rounds:            *rounds,
		Duration:          *duration,
		WarmUp:            *warmUp,
		ServerConcurrency: *serverConcurrency,
		CreateWait:        *createWait,
		Idle:              bench.IdleConfig{Window: *idleWindow, Scale: *idleScale},
		Stop:              bench.StopConfig{Idle: *stopIdle},
		MemoryQueues:      *memQueues,
		Payloads:          payloads,
		S3Latency:         *s3Latency,
		Progress:          stderr,
	}

	if *sweep {
		if !env.Embedded() {
			return usageError("--sweep runs sqstest with each setting's latency: not with --endpoint-url or --aws")
		}
		sc := bench.SweepConfig{Config: cfg, Settings: sweepSettings,
			Open: func(ctx context.Context, st bench.Setting) (*bench.SweepServer, error) {
				if *inProcess {
					srv := sqstest.NewServer()
					if st.Latency > 0 {
						srv.InjectFault(sqstest.Latency("", st.Latency, st.LatencyP99))
					}
					return &bench.SweepServer{NewClient: clients(sqstestOptions(srv.URL())), InProcess: true,
						Server: "sqstest embedded in the benchmark process, over TCP at " + srv.URL() + ", " + st.Describe(),
						Stop:   func() { _ = srv.Close(context.WithoutCancel(ctx)) }}, nil
				}
				em, err := startEmulator(st.Latency, st.LatencyP99, stderr)
				if err != nil {
					return nil, err
				}
				return &bench.SweepServer{NewClient: clients(sqstestOptions(em.url)),
					Server: "sqstest in its own process, over TCP at " + em.url + ", " + st.Describe(), Stop: em.stop}, nil
			},
		}
		if *jsonFile != "" {
			sc.Done = func(r *bench.SweepReport) error {
				return writeFile(*jsonFile, func(w io.Writer) error { return writeSweepJSON(w, r) })
			}
		}
		fmt.Fprintf(stderr, "tempq bench --sweep: %d settings x %d concurrency levels x %d contenders x %d rounds of %v windows after a %v warm-up: about %v\n",
			len(sweepSettings), len(levels), len(names), *rounds, *duration, *warmUp, roughly(bench.EstimateSweep(sc)))
		stop, err := startProfiles(*cpuProfile)
		if err != nil {
			return err
		}
		rep, err := bench.RunSweep(ctx, sc)
		stop()
		if err != nil {
			return err
		}
		if err := writeMemProfile(*memProfile); err != nil {
			return err
		}
		return outputSweep(rep, stdout, stderr, *svgDir, *jsonFile, *jsonOut)
	}

	var base sqs.Options
	var where string
	if env.Embedded() {
		var url string
		if *inProcess {
			srv := sqstest.NewServer()
			defer srv.Close(context.WithoutCancel(ctx))
			if *latency > 0 {
				srv.InjectFault(sqstest.Latency("", *latency, *latencyP99))
			}
			url, where = srv.URL(), "sqstest embedded in the benchmark process, over TCP at "+srv.URL()
		} else {
			em, err := startEmulator(*latency, *latencyP99, stderr)
			if err != nil {
				return err
			}
			defer em.stop()
			url, where = em.url, "sqstest in its own process, over TCP at "+em.url
		}
		base = sqstestOptions(url)
		if *latency > 0 {
			where += ", " + bench.Setting{Latency: *latency, LatencyP99: *latencyP99}.Describe()
		}
	} else {
		if *latency > 0 || *latencyP99 > 0 || *inProcess {
			return usageError("--latency, --latency-p99 and --in-process apply to sqstest only, not to --endpoint-url or --aws")
		}
		var log *slog.Logger
		if *verbose {
			log = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
		}
		e, err := sqsenv.Open(ctx, env, func(o *sqsenv.Options) { o.Logger = log })
		if err != nil {
			return err
		}
		defer e.Close()
		if err := checkServer(ctx, e); err != nil {
			return err
		}
		base, where = e.Client.Options(), e.Where
	}
	fmt.Fprintln(stderr, "tempq bench:", where)
	cfg.NewClient = clients(base)
	cfg.Server = where
	cfg.ServerInProcess = env.Embedded() && *inProcess
	stop, err := startProfiles(*cpuProfile)
	if err != nil {
		return err
	}
	rep, err := bench.Run(ctx, cfg)
	stop()
	if err != nil {
		return err
	}
	if err := writeMemProfile(*memProfile); err != nil {
		return err
	}
	return output(rep, stdout, stderr, *svgDir, *jsonFile, *jsonOut)
}

// startProfiles starts the CPU profile if path is set; stop ends it.
func startProfiles(path string) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	return startCPUProfile(path)
}

// writeMemProfile writes the allocation profile if path is set.
func writeMemProfile(path string) error {
	if path == "" {
		return nil
	}
	return writeAllocProfile(path)
}

// outputSaved renders the report or sweep saved in path: a sweep's JSON
// has settings.
func outputSaved(path string, stdout, stderr io.Writer, svgDir string, jsonOut bool) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var probe struct {
		Settings json.RawMessage `json:"settings"`
	}
	if err := json.Unmarshal(b, &probe); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if probe.Settings != nil {
		var sw bench.SweepReport
		if err := json.Unmarshal(b, &sw); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		for _, s := range sw.Settings {
			if s.Report == nil {
				return fmt.Errorf("%s: setting %s has no report", path, s.Name)
			}
		}
		sw.Judge() // from the results, whatever the file says
		return outputSweep(&sw, stdout, stderr, svgDir, "", jsonOut)
	}
	var rep bench.Report
	if err := json.Unmarshal(b, &rep); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return output(&rep, stdout, stderr, svgDir, "", jsonOut)
}

// outputSweep writes a sweep's plots and JSON file if asked, then the
// sweep to stdout as JSON or Markdown.
func outputSweep(rep *bench.SweepReport, stdout, stderr io.Writer, svgDir, jsonFile string, jsonOut bool) error {
	if svgDir != "" {
		if err := os.MkdirAll(svgDir, 0o755); err != nil {
			return err
		}
		for _, s := range rep.Settings {
			err := writeFile(filepath.Join(svgDir, "front-"+s.Setting.Slug()+".svg"), func(w io.Writer) error {
				return bench.WriteFrontSVG(w, s.Setting.Describe(), s.Report)
			})
			if err != nil {
				return err
			}
		}
		fmt.Fprintln(stderr, "tempq bench: plots written to", svgDir)
	}
	if jsonFile != "" {
		if err := writeFile(jsonFile, func(w io.Writer) error { return writeSweepJSON(w, rep) }); err != nil {
			return err
		}
	}
	if jsonOut {
		return writeSweepJSON(stdout, rep)
	}
	return bench.WriteSweepTable(stdout, rep)
}

// writeSweepJSON writes a sweep, its front judged.
func writeSweepJSON(w io.Writer, rep *bench.SweepReport) error {
	rep.Judge()
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}

// writeFile creates path and writes it with write.
func writeFile(path string, write func(io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	err = write(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// roughly rounds an estimate to the minute, or to the second below one.
func roughly(d time.Duration) time.Duration {
	if d < time.Minute {
		return d.Round(time.Second)
	}
	return d.Round(time.Minute)
}

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ",")
}

func joinSettings(v []bench.Setting) string {
	s := make([]string, len(v))
	for i, st := range v {
		s[i] = st.String()
	}
	return strings.Join(s, ",")
}

// output writes the plots and the JSON file if asked, then the report to
// stdout as JSON or tables.
func output(rep *bench.Report, stdout, stderr io.Writer, svgDir, jsonFile string, jsonOut bool) error {
	if svgDir != "" {
		if err := writeSVGs(svgDir, rep); err != nil {
			return err
		}
		fmt.Fprintln(stderr, "tempq bench: plots written to", svgDir)
	}
	if jsonFile != "" {
		f, err := os.Create(jsonFile)
		if err != nil {
			return err
		}
		err = writeReportJSON(f, rep)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
	if jsonOut {
		return writeReportJSON(stdout, rep)
	}
	return bench.WriteTable(stdout, rep)
}

// startCPUProfile starts profiling this process's CPU into path; stop
// ends the profile and closes the file.
func startCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		_ = f.Close()
	}, nil
}

// writeAllocProfile writes the allocations of the run so far to path.
func writeAllocProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	err = pprof.Lookup("allocs").WriteTo(f, 0)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// writeReportJSON writes the report with its targets.
func writeReportJSON(w io.Writer, rep *bench.Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(struct {
		*bench.Report
		Targets []bench.Target `json:"targets"`
	}{rep, bench.Targets(rep)})
}

func writeSVGs(dir string, rep *bench.Report) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for name, write := range map[string]func(io.Writer, *bench.Report) error{
		"latency.svg":    bench.WriteLatencySVG,
		"calls.svg":      bench.WriteCallsSVG,
		"throughput.svg": bench.WriteThroughputSVG,
		"cpu.svg":        bench.WriteCPUSVG,
	} {
		f, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			return err
		}
		err = write(f, rep)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func parseInts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q is not a positive number", f)
		}
		out = append(out, n)
	}
	return out, nil
}

// emulator is sqstest running in a child process: `tempq emulator` started
// from this executable.
type emulator struct {
	url   string
	cmd   *exec.Cmd
	stdin io.Closer
}

// startEmulator starts the benchmark's default server. It runs in a process
// of its own, as every real SQS server does: inside the benchmark's process
// it would share the contenders' Go scheduler and garbage collector, and
// its goroutines would queue behind theirs for the same two Ps (BENCHMARKS.md
// measures both). The child stops when its standard input closes, which
// happens when stop is called or when this process ends in any way.
func startEmulator(latency, latencyP99 time.Duration, stderr io.Writer) (*emulator, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("bench: finding this executable to run its emulator: %w", err)
	}
	args := []string{"emulator", "--addr", "127.0.0.1:0", "--until-stdin-eof", "--no-console"}
	if latency > 0 {
		args = append(args, "--latency", latency.String())
		if latencyP99 > latency {
			args = append(args, "--latency-p99", latencyP99.String())
		}
	}
	cmd := exec.Command(exe, args...)
	cmd.Stderr = stderr
	url, stdin, err := child.Start(cmd, "sqstest listening on ", 30*time.Second)
	if err != nil {
		return nil, fmt.Errorf("bench: running the emulator: %w", err)
	}
	return &emulator{url: url, cmd: cmd, stdin: stdin}, nil
}

// stop closes the child's standard input and waits for it to exit, killing
// it if it has not within five seconds.
func (e *emulator) stop() {
	_ = e.stdin.Close()
	done := make(chan struct{})
	go func() {
		_ = e.cmd.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		_ = e.cmd.Process.Kill()
		<-done
	}
}
