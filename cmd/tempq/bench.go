package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
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
	"github.com/tempqueues/tempqueues/internal/child"
	"github.com/tempqueues/tempqueues/internal/sqsenv"
	"github.com/tempqueues/tempqueues/sqsapi"
	"github.com/tempqueues/tempqueues/sqstest"
)

// benchIdleConns keeps enough connections open for 64 callers plus the
// background calls, for every contender alike, so that no contender pays
// for TCP set-ups the SDK's default pool of 10 would cause.
const benchIdleConns = 256

func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("bench", "[--duration 5s] [--rounds 3] [--idle-window 30s] [--stop-idle 2s] [--json] [--svg-dir DIR] [--endpoint-url URL | --aws]", stdout)
	var env sqsenv.Flags
	env.Register(fs)
	duration := fs.Duration("duration", 5*time.Second, "length of one measurement window (per contender, concurrency and round)")
	rounds := fs.Int("rounds", 3, "rounds; each visits every contender once, in rotating order, and every concurrency within the visit")
	concurrency := fs.String("concurrency", "1,8,64", "comma-separated numbers of concurrent callers")
	contenders := fs.String("contenders", strings.Join(bench.Contenders, ","), "comma-separated contenders")
	idleWindow := fs.Duration("idle-window", 30*time.Second, "idle-cost window (0 skips); stands for window x idle-scale of real time")
	idleScale := fs.Int("idle-scale", 20, fmt.Sprintf("divide the library's periods by this for the idle measurement (1 to %d)", bench.MaxIdleScale))
	stopIdle := fs.Duration("stop-idle", 2*time.Second, "how long an idle requester, virtualqueue client, tempqueue client and responder (default options: 20 s long polls) are left alone before their Close, Shutdown or cancelled Serve is timed, once per round (0 skips); target: each stops within 1s, without error")
	memQueues := fs.Int("memory-queues", 200_000, "idle virtual queues created to measure their memory (0 skips)")
	createWait := fs.Duration("create-wait", time.Second, "queue-per-request: wait after CreateQueue before using the queue (AWS documents at least 1s; emulators need none); every contender also waits this long, off the clock, after its set-up")
	latency := fs.Duration("latency", 0, "sqstest only: added to every call, to stand for a network round trip")
	inProcess := fs.Bool("in-process", false, "run sqstest inside the benchmark's own process instead of a child process (client and server then share one Go scheduler, and the CPU figures include the server: see BENCHMARKS.md)")
	jsonOut := fs.Bool("json", false, "print the report as JSON instead of tables")
	jsonFile := fs.String("json-file", "", "also write the JSON report to this file")
	fromJSON := fs.String("from-json", "", "do not run: print (and plot) the report saved in this JSON file")
	svgDir := fs.String("svg-dir", "", "write latency.svg, calls.svg, throughput.svg and cpu.svg to this directory")
	verbose := fs.Bool("v", false, "log at debug level to stderr how the client was configured (--endpoint-url, AWS_ENDPOINT_URL_SQS, --aws)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError("unexpected arguments %v", fs.Args())
	}
	levels, err := parseInts(*concurrency)
	if err != nil {
		return usageError("--concurrency: %v", err)
	}
	names := strings.Split(*contenders, ",")
	for _, n := range names {
		if !slices.Contains(bench.Contenders, n) {
			return usageError("--contenders: unknown %q (have %s)", n, strings.Join(bench.Contenders, ", "))
		}
	}
	if *idleScale < 1 || *idleScale > bench.MaxIdleScale {
		return usageError("--idle-scale %d: want 1 to %d", *idleScale, bench.MaxIdleScale)
	}
	if *duration <= 0 || *rounds <= 0 {
		return usageError("--duration and --rounds must be positive")
	}
	if *stopIdle < 0 || *idleWindow < 0 {
		return usageError("--stop-idle and --idle-window must not be negative")
	}

	if *fromJSON != "" {
		b, err := os.ReadFile(*fromJSON)
		if err != nil {
			return err
		}
		var rep bench.Report
		if err := json.Unmarshal(b, &rep); err != nil {
			return fmt.Errorf("%s: %w", *fromJSON, err)
		}
		return output(&rep, stdout, stderr, *svgDir, "", *jsonOut)
	}

	httpClient := awshttp.NewBuildableClient().WithTransportOptions(func(t *http.Transport) {
		t.MaxIdleConns = benchIdleConns
		t.MaxIdleConnsPerHost = benchIdleConns
	})
	var base sqs.Options
	var where string
	if env.Embedded() {
		var url string
		if *inProcess {
			srv := sqstest.NewServer()
			defer srv.Close(context.WithoutCancel(ctx))
			if *latency > 0 {
				srv.InjectFault(sqstest.Latency("", *latency))
			}
			url, where = srv.URL(), "sqstest embedded in the benchmark process, over TCP at "+srv.URL()
		} else {
			em, err := startEmulator(*latency, stderr)
			if err != nil {
				return err
			}
			defer em.stop()
			url, where = em.url, "sqstest in its own process, over TCP at "+em.url
		}
		region := env.Region
		if region == "" {
			region = "us-east-1"
		}
		base = sqs.Options{Region: region, BaseEndpoint: aws.String(url),
			Credentials: credentials.NewStaticCredentialsProvider("tempq", "tempq", "")}
		if *latency > 0 {
			where += fmt.Sprintf(", %v added to every call", *latency)
		}
	} else {
		if *latency > 0 || *inProcess {
			return usageError("--latency and --in-process apply to sqstest only, not to --endpoint-url or --aws")
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
	cfg := bench.Config{
		NewClient: func(counter *callcount.Counter) *sqs.Client {
			return sqs.New(base, func(o *sqs.Options) {
				o.HTTPClient = httpClient
				sqsapi.BufferRequestBodies(o)
				o.APIOptions = append(slices.Clone(o.APIOptions), counter.Register)
			})
		},
		Server:          where,
		ServerInProcess: env.Embedded() && *inProcess,
		Contenders:      names,
		Concurrency:     levels,
		Rounds:          *rounds,
		Duration:        *duration,
		CreateWait:      *createWait,
		Idle:            bench.IdleConfig{Window: *idleWindow, Scale: *idleScale},
		Stop:            bench.StopConfig{Idle: *stopIdle},
		MemoryQueues:    *memQueues,
		Progress:        stderr,
	}
	rep, err := bench.Run(ctx, cfg)
	if err != nil {
		return err
	}
	return output(rep, stdout, stderr, *svgDir, *jsonFile, *jsonOut)
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
func startEmulator(latency time.Duration, stderr io.Writer) (*emulator, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("bench: finding this executable to run its emulator: %w", err)
	}
	args := []string{"emulator", "--addr", "127.0.0.1:0", "--until-stdin-eof"}
	if latency > 0 {
		args = append(args, "--latency", latency.String())
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
