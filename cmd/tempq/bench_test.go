package main

import (
	"encoding/json"
	"encoding/xml"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBenchSmoke runs a miniature benchmark (every contender, two
// concurrency levels, one round of short windows, a short idle window, one
// round of stops after a short idle time and a small memory sample) so
// that the harness cannot rot: it checks the JSON shape, that every RPC and
// every stop succeeded, and that the figures are sane.
func TestBenchSmoke(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	stdout, stderr, code := tempq(t, nil, "bench", "--json", "--duration", "300ms", "--rounds", "1",
		"--concurrency", "1,8", "--create-wait", "0", "--idle-window", "2s", "--stop-idle", "300ms", "--memory-queues", "2000", "--svg-dir", dir)
	if code != 0 {
		t.Fatalf("exit code %d\nstderr:\n%s", code, stderr)
	}
	if !strings.Contains(stderr, "[10/10]") {
		t.Errorf("no progress on stderr:\n%s", stderr)
	}
	var rep struct {
		Server  string           `json:"server"`
		Results []map[string]any `json:"results"`
		Idle    *struct {
			Requester float64 `json:"requester_calls_per_hour"`
			Responder float64 `json:"responder_calls_per_hour"`
		} `json:"idle"`
		Bytes    float64 `json:"bytes_per_idle_virtual_queue"`
		StopIdle int64   `json:"stop_idle_ns"`
		Stop     map[string]struct {
			Samples    []float64 `json:"samples"`
			Max        float64   `json:"max"`
			Median     float64   `json:"median"`
			Errors     int       `json:"errors"`
			FirstError string    `json:"first_error"`
		} `json:"stop_ms"`
		Targets []map[string]any `json:"targets"`
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("stdout is not the JSON report: %v\n%s", err, stdout)
	}
	// Every idle client stopped once, without error, and before its 10 s
	// deadline (whether within the 1 s of the contract is the benchmark's
	// figure, which a test on a shared machine does not judge).
	if len(rep.Stop) != 5 || rep.StopIdle != 300e6 {
		t.Errorf("stop figures for %d clients after %d ns idle, want 5 after 300ms: %+v", len(rep.Stop), rep.StopIdle, rep.Stop)
	}
	for name, s := range rep.Stop {
		if len(s.Samples) != 1 || s.Errors != 0 || s.Max <= 0 || s.Max >= 10_000 || s.Median != s.Max {
			t.Errorf("%s: %+v, want one stop without error, above 0 and below 10 s", name, s)
		}
	}
	if !strings.Contains(rep.Server, "sqstest in its own process, over TCP") {
		t.Errorf("server %q, want sqstest in a child process", rep.Server)
	}
	if len(rep.Results) != 10 {
		t.Fatalf("%d results, want 5 contenders x 2 concurrency levels", len(rep.Results))
	}
	num := func(r map[string]any, k string) float64 {
		v, ok := r[k].(float64)
		if !ok {
			t.Fatalf("result %v has no number %q", r, k)
		}
		return v
	}
	for _, r := range rep.Results {
		name := r["contender"]
		rps, p50, p99, calls := num(r, "rpc_per_s"), num(r, "p50_ms"), num(r, "p99_ms"), num(r, "api_calls_per_rpc")
		if num(r, "errors") != 0 || num(r, "rpcs") < 1 {
			t.Errorf("%v: %v RPCs, %v errors", name, r["rpcs"], r["errors"])
		}
		if rps <= 0 || p50 <= 0 || p99 < p50 || p50 > 5000 {
			t.Errorf("%v at %v: rpc/s %v, p50 %v ms, p99 %v ms", name, r["concurrency"], rps, p50, p99)
		}
		// Whatever the batching, an RPC takes between a fraction of a
		// call and a dozen; the floor is exactly its six calls. Parked
		// receivers are the exception above: their polls end by time, not
		// by RPCs, so a machine slowed by other work makes them many
		// empty receives for each of the few RPCs a short window holds.
		if calls < 0.1 || calls > 12 && name != "parked-receivers" {
			t.Errorf("%v at %v: %v API calls per RPC", name, r["concurrency"], calls)
		}
		if name == "floor" && calls != 6 {
			t.Errorf("floor: %v API calls per RPC, want 6", calls)
		}
		// The tiny body is billed one request per call; its bytes cross
		// the wire.
		if billed := num(r, "billed_requests_per_rpc"); billed != calls || num(r, "wire_bytes_per_rpc") < 100 {
			t.Errorf("%v at %v: %v billed requests and %v bytes on the wire per RPC for %v calls", name, r["concurrency"], billed, r["wire_bytes_per_rpc"], calls)
		}
		// The benchmark process's CPU per RPC, the server's (a child
		// process) not in it: more than a microsecond, less than the
		// 300 ms window's worth of both cores over one RPC.
		if cpu := num(r, "cpu_us_per_rpc"); cpu < 1 || cpu > 600_000 {
			t.Errorf("%v at %v: %v µs CPU per RPC", name, r["concurrency"], cpu)
		}
	}
	// The idle responder's 1 s long polls (20 s scaled by 20) end at least
	// once in a 2 s window.
	if rep.Idle == nil || rep.Idle.Requester < 0 || rep.Idle.Responder <= 0 {
		t.Errorf("idle figures %+v", rep.Idle)
	}
	if rep.Bytes <= 0 || rep.Bytes > 4096 {
		t.Errorf("%v bytes per idle virtual queue", rep.Bytes)
	}
	if len(rep.Targets) < 5 {
		t.Errorf("%d targets checked, want at least 5: %v", len(rep.Targets), rep.Targets)
	}
	// The saved report renders again without a run.
	saved := filepath.Join(dir, "report.json")
	if err := os.WriteFile(saved, []byte(stdout), 0o644); err != nil {
		t.Fatal(err)
	}
	table, stderr, code := tempq(t, nil, "bench", "--from-json", saved)
	if code != 0 || !strings.Contains(table, "| tempqueues | 8 |") || !strings.Contains(table, "| target |") ||
		!strings.Contains(table, "| CPU µs/RPC | errors |") || !strings.Contains(table, "CPU per RPC at 8 callers, x static reply queue") ||
		!strings.Contains(table, "| responder-cancel | cancel Serve's context, until Serve returns | 1 |") ||
		!strings.Contains(table, "| idle requester: Close stops, slowest of 1, no error |") {
		t.Errorf("--from-json: code %d, stdout:\n%s\nstderr:\n%s", code, table, stderr)
	}
	for _, name := range []string{"latency.svg", "calls.svg", "throughput.svg", "cpu.svg"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			XMLName  xml.Name `xml:"svg"`
			Polyline []struct {
				Points string `xml:"points,attr"`
			} `xml:"polyline"`
		}
		if err := xml.Unmarshal(b, &doc); err != nil {
			t.Fatalf("%s is not SVG: %v", name, err)
		}
		if len(doc.Polyline) < 4 {
			t.Errorf("%s: %d lines, want one per contender at least", name, len(doc.Polyline))
		}
	}
}

// TestBenchInProcess runs the smallest benchmark against sqstest embedded
// in the benchmark's own process, with latency added to every call.
func TestBenchInProcess(t *testing.T) {
	t.Parallel()
	stdout, stderr, code := tempq(t, nil, "bench", "--json", "--in-process", "--latency", "1ms", "--duration", "300ms", "--rounds", "1",
		"--concurrency", "1", "--contenders", "tempqueues,floor", "--idle-window", "0", "--stop-idle", "0", "--memory-queues", "0")
	if code != 0 {
		t.Fatalf("exit code %d\nstderr:\n%s", code, stderr)
	}
	var rep struct {
		Server            string `json:"server"`
		CPUIncludesServer bool   `json:"cpu_includes_server"`
		Stop              any    `json:"stop_ms"`
		Results           []struct {
			Contender string  `json:"contender"`
			RPCs      int     `json:"rpcs"`
			Errors    int     `json:"errors"`
			P50       float64 `json:"p50_ms"`
			CPU       float64 `json:"cpu_us_per_rpc"`
		} `json:"results"`
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("stdout is not the JSON report: %v\n%s", err, stdout)
	}
	if !strings.Contains(rep.Server, "sqstest embedded in the benchmark process") || !strings.Contains(rep.Server, "1ms added") {
		t.Errorf("server %q, want the embedded sqstest with 1ms added", rep.Server)
	}
	if rep.Stop != nil {
		t.Errorf("stop figures %v with --stop-idle 0", rep.Stop)
	}
	if !rep.CPUIncludesServer {
		t.Error("the report of an in-process run does not say that its CPU figures include the server")
	}
	if len(rep.Results) != 2 {
		t.Fatalf("results %+v, want tempqueues and floor", rep.Results)
	}
	for _, r := range rep.Results {
		// Every call waits 1 ms: the floor's four calls take at least 4 ms,
		// a tempqueues round trip at least the 2 ms of its two sends.
		min := 2.0
		if r.Contender == "floor" {
			min = 4
		}
		if r.RPCs < 1 || r.Errors != 0 || r.P50 < min || r.CPU <= 0 {
			t.Errorf("%+v: want RPCs, no errors, p50 >= %v ms and a CPU figure", r, min)
		}
	}
}

func TestBenchFlags(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"bench", "--contenders", "carrier-pigeon"},
		{"bench", "--concurrency", "0"},
		{"bench", "--idle-scale", "100"},
		{"bench", "--stop-idle", "-1s"},
		{"bench", "extra"},
		{"bench", "--in-process", "--endpoint-url", "http://127.0.0.1:1"},
		{"bench", "--latency", "1ms", "--endpoint-url", "http://127.0.0.1:1"},
		{"bench", "--latency-p99", "4ms"},
		{"bench", "--latency", "4ms", "--latency-p99", "4ms"},
		{"bench", "--warm-up", "-1s"},
		{"bench", "--server-concurrency", "-1"},
		{"bench", "--settings", "0,10ms"},
		{"bench", "--sweep", "--settings", "0,fast"},
		{"bench", "--sweep", "--settings", "10ms/5ms"},
		{"bench", "--sweep", "--latency", "10ms"},
		{"bench", "--sweep", "--endpoint-url", "http://127.0.0.1:1"},
		{"bench", "--sweep", "--contenders", "carrier-pigeon"},
	} {
		if _, stderr, code := tempq(t, nil, args...); code != 2 {
			t.Errorf("%v: exit code %d, want 2; stderr %q", args, code, stderr)
		}
	}
}

// TestBenchPayloadFlags: a bad size or kind is a usage error that names
// its flag.
func TestBenchPayloadFlags(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args []string
		flag string
	}{
		{[]string{"--payload", "64KB"}, "--payload: "},
		{[]string{"--payload", "1KiB,"}, "--payload: "},
		{[]string{"--payload", "0"}, "--payload: "},
		{[]string{"--payload", "1GiB"}, "--payload: "},
		{[]string{"--payload", "10"}, "--payload: "},
		{[]string{"--payload", "1KiB", "--payload-kind", "xml"}, "--payload-kind: "},
		{[]string{"--payload", "1KiB", "--payload-kind", ""}, "--payload-kind"},
		{[]string{"--payload-kind", "binary"}, "--payload-kind applies with --payload only"},
		{[]string{"--payload", "1KiB", "--payload-shape", "stream"}, "--payload-shape: "},
		{[]string{"--payload-shape", "reply"}, "--payload-shape applies with --payload only"},
		{[]string{"--s3-latency", "20ms"}, "--s3-latency applies with --payload only"},
		{[]string{"--payload", "1KiB", "--s3-latency", "-1ms"}, "--s3-latency must not be negative"},
		{[]string{"--sweep", "--payload", "1KiB"}, "--payload: the sweep measures the default body"},
	} {
		_, stderr, code := tempq(t, nil, append([]string{"bench"}, c.args...)...)
		if code != 2 || !strings.Contains(stderr, c.flag) {
			t.Errorf("%v: exit code %d, want 2 and an error naming %q; stderr %q", c.args, code, c.flag, stderr)
		}
	}
}

// TestBenchPayload runs the smallest benchmark with payloads: every RPC
// sends a JSON or binary body and checks the reply byte for byte (a
// failed check is an error), billed requests and bytes on the wire follow
// the body's size, and a body over SQS's maximum is reported refused.
func TestBenchPayload(t *testing.T) {
	t.Parallel()
	stdout, stderr, code := tempq(t, nil, "bench", "--json", "--payload", "64KiB,2MiB", "--payload-kind", "json,binary",
		"--contenders", "tempqueues,floor", "--duration", "300ms", "--rounds", "1", "--concurrency", "1,2", "--create-wait", "0",
		"--idle-window", "0", "--stop-idle", "0", "--memory-queues", "0")
	if code != 0 {
		t.Fatalf("exit code %d\nstderr:\n%s", code, stderr)
	}
	var rep struct {
		Payloads []struct {
			Kind  string `json:"kind"`
			Bytes int    `json:"bytes"`
		} `json:"payloads"`
		Results []struct {
			Contender   string  `json:"contender"`
			Concurrency int     `json:"concurrency"`
			Payload     string  `json:"payload"`
			BodyBytes   int     `json:"body_bytes"`
			Refused     string  `json:"refused"`
			RPCs        int     `json:"rpcs"`
			Errors      int     `json:"errors"`
			P50         float64 `json:"p50_ms"`
			Calls       float64 `json:"api_calls_per_rpc"`
			Billed      float64 `json:"billed_requests_per_rpc"`
			WireBytes   float64 `json:"wire_bytes_per_rpc"`
			Dollars     float64 `json:"usd_per_million_rpc"`
			CPU         float64 `json:"cpu_us_per_rpc"`
			S3Calls     float64 `json:"s3_calls_per_rpc"`
			S3Bytes     float64 `json:"s3_bytes_per_rpc"`
		} `json:"results"`
		Targets []any `json:"targets"`
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("stdout is not the JSON report: %v\n%s", err, stdout)
	}
	if len(rep.Payloads) != 4 || len(rep.Results) != 16 || len(rep.Targets) != 0 {
		t.Fatalf("%d payloads, %d results, %d targets; want 4, 2 contenders x 4 payloads x 2 levels, none", len(rep.Payloads), len(rep.Results), len(rep.Targets))
	}
	for _, r := range rep.Results {
		switch r.Payload {
		case "2MiB json", "2MiB binary":
			if r.Contender == "floor" {
				if !strings.Contains(r.Refused, "over SQS's maximum message size") || r.RPCs != 0 {
					t.Errorf("%+v: want refused", r)
				}
				continue
			}
			// tempqueues puts what does not fit in its payload store: the
			// request, whole, and the reply unless compressed it fits.
			if r.Refused != "" || r.RPCs < 1 || r.Errors != 0 || r.S3Calls < 2 || r.S3Bytes < 2*float64(r.BodyBytes) {
				t.Errorf("%+v: want RPCs through the payload store", r)
			}
			continue
		case "64KiB json", "64KiB binary":
		default:
			t.Fatalf("payload %q", r.Payload)
		}
		// Every reply was the request's body, byte for byte: a mismatch
		// is an error.
		if r.Refused != "" || r.RPCs < 1 || r.Errors != 0 || r.P50 <= 0 || r.CPU <= 0 {
			t.Errorf("%+v: want RPCs without error", r)
		}
		// The body crosses the wire four times (request and reply, each
		// sent and received), in JSON; tempqueues' reply of JSON travels
		// gzipped (docs/wire.md, "Compression"), so only its request's
		// two crossings carry the body whole.
		crossings := 4.0
		if r.Payload == "64KiB json" && r.Contender == "tempqueues" {
			crossings = 2
		}
		if r.WireBytes < crossings*float64(r.BodyBytes) || r.WireBytes > 4*float64(r.BodyBytes)+64<<10 {
			t.Errorf("%+v: %.0f bytes on the wire per RPC, want about %.0f x %d", r, r.WireBytes, crossings, r.BodyBytes)
		}
		// Each of the four messages of a round trip: one billed request
		// per started 64 KiB. The floor's 64 KiB JSON body alone is one
		// chunk; its base64 binary body (87384 bytes) two. tempqueues
		// adds attributes, so its 64 KiB JSON request takes two chunks
		// too, but its reply, compressed, one; its binary reply shrinks
		// by a quarter only, and still takes two.
		extra := 4.0
		switch {
		case r.Payload == "64KiB json" && r.Contender == "floor":
			extra = 0
		case r.Payload == "64KiB json":
			extra = 2
		}
		if math.Abs(r.Billed-r.Calls-extra) > 1e-9 || math.Abs(r.Dollars-r.Billed*0.40) > 1e-9 {
			t.Errorf("%+v: %.2f billed requests per RPC for %.2f calls, want %.0f more; $%.2f per million", r, r.Billed, r.Calls, extra, r.Dollars)
		}
	}
	table, stderr, code := tempq(t, nil, "bench", "--from-json", writeTemp(t, stdout))
	if code != 0 || !strings.Contains(table, "### payload 64KiB binary: a body of 87384 bytes (65536 random bytes in base64)") ||
		!strings.Contains(table, "| floor | 2 | refused (over 1 MiB) |") || !strings.Contains(table, "| S3 calls/RPC |") {
		t.Errorf("--from-json: code %d, stdout:\n%s\nstderr:\n%s", code, table, stderr)
	}
}

// writeTemp writes s to a file of the test and returns its path.
func writeTemp(t *testing.T, s string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "report.json")
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestBenchSweepSmoke runs a miniature sweep (two settings, one of them
// jittered, each on an emulator of its own; every sweep contender at two
// concurrency levels; one round of short windows after a short warm-up)
// so that the sweep cannot rot: the JSON holds every setting's results and
// front, the plots are SVG, and a saved sweep renders again.
func TestBenchSweepSmoke(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	saved := filepath.Join(dir, "sweep.json")
	stdout, stderr, code := tempq(t, nil, "bench", "--sweep", "--settings", "0,1ms/4ms", "--concurrency", "1,4",
		"--duration", "300ms", "--warm-up", "100ms", "--rounds", "1", "--svg-dir", dir, "--json-file", saved)
	if code != 0 {
		t.Fatalf("exit code %d\nstderr:\n%s", code, stderr)
	}
	for _, want := range []string{"tempq bench --sweep: 2 settings x 2 concurrency levels x 5 contenders x 1 rounds", "[setting 2/2: 1ms/4ms] [10/10] round 1"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	for _, want := range []string{"## The front", "| 1ms/4ms | 4 | ", "## Setting 1ms/4ms: lognormal latency per call, median 1ms, p99 4ms",
		"| parked-receivers | 4 | ", "queue-per-request is not in the sweep", "responders' concurrency 256"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("report lacks %q:\n%s", want, stdout)
		}
	}
	b, err := os.ReadFile(saved)
	if err != nil {
		t.Fatal(err)
	}
	var sw struct {
		Commit    *string `json:"commit"`
		GoVersion string  `json:"go_version"`
		WarmUp    int64   `json:"warm_up_ns"`
		Settings  []struct {
			Name   string `json:"name"`
			Report struct {
				Server  string `json:"server"`
				Results []struct {
					Contender string  `json:"contender"`
					RPCs      int     `json:"rpcs"`
					Errors    int     `json:"errors"`
					P50       float64 `json:"p50_ms"`
					Calls     float64 `json:"api_calls_per_rpc"`
				} `json:"results"`
			} `json:"report"`
			Front []struct {
				Callers int              `json:"callers"`
				Checks  []map[string]any `json:"checks"`
			} `json:"front"`
		} `json:"settings"`
	}
	if err := json.Unmarshal(b, &sw); err != nil {
		t.Fatalf("--json-file is not the sweep's JSON: %v\n%s", err, b)
	}
	if sw.Commit == nil || !strings.HasPrefix(sw.GoVersion, "go") || sw.WarmUp != 100e6 || len(sw.Settings) != 2 {
		t.Fatalf("sweep %+v", sw)
	}
	for i, s := range sw.Settings {
		if want := []string{"0", "1ms/4ms"}[i]; s.Name != want {
			t.Errorf("setting %d is %q, want %q", i, s.Name, want)
		}
		if !strings.Contains(s.Report.Server, "sqstest in its own process") {
			t.Errorf("setting %s ran on %q", s.Name, s.Report.Server)
		}
		if len(s.Report.Results) != 10 || len(s.Front) != 2 {
			t.Fatalf("setting %s: %d results and %d front points, want 5 contenders x 2 levels and 2", s.Name, len(s.Report.Results), len(s.Front))
		}
		for _, r := range s.Report.Results {
			if r.RPCs < 1 || r.Errors != 0 || r.P50 <= 0 || r.Calls < 0.1 || r.Calls > 12 {
				t.Errorf("setting %s: %+v", s.Name, r)
			}
			// Every call of the jittered setting waits 1 ms or so: the two
			// sends of a round trip alone take more than a millisecond.
			if s.Name == "1ms/4ms" && r.P50 < 1 {
				t.Errorf("setting %s: %+v, want a p50 above 1 ms", s.Name, r)
			}
		}
		for _, p := range s.Front {
			if len(p.Checks) < 5 {
				t.Errorf("setting %s at %d callers: checks %v", s.Name, p.Callers, p.Checks)
			}
		}
	}
	for _, name := range []string{"front-latency-0.svg", "front-latency-1ms-p99-4ms.svg"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			XMLName  xml.Name   `xml:"svg"`
			Polyline []struct{} `xml:"polyline"`
		}
		if err := xml.Unmarshal(b, &doc); err != nil || len(doc.Polyline) != 5 { // one per contender of the sweep
			t.Errorf("%s: %v, %d lines, want SVG with a line per contender", name, err, len(doc.Polyline))
		}
	}
	again, stderr, code := tempq(t, nil, "bench", "--from-json", saved)
	if code != 0 || again != stdout {
		t.Errorf("--from-json: code %d, stderr %s\nstdout:\n%s\nwant:\n%s", code, stderr, again, stdout)
	}
}
