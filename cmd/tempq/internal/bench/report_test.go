package bench

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"runtime/debug"
	"slices"
	"strings"
	"testing"
	"time"
)

func sampleReport() *Report {
	r := &Report{Server: "test", Commit: "0123abc-dirty", GoVersion: "go1.99.1", Rounds: 1, Concurrency: []int{1, 64}}
	add := func(name string, conc int, rps, p50, calls, cpu float64) {
		r.Results = append(r.Results, Result{Contender: name, Concurrency: conc, RPCs: 100, RPCPerSecond: rps, P50ms: p50, P99ms: 2 * p50, APICallsPerRPC: calls, CPUMicrosPerRPC: cpu})
	}
	add(TempQueues, 1, 1000, 1.1, 6.0000001, 700)
	add(TempQueues, 64, 5000, 8, 0.7, 400)
	// Billed requests and bytes measured (a report saved before they
	// were has neither: n/a).
	r.Results[1].BilledPerRPC, r.Results[1].DollarsPerMillionRPC, r.Results[1].WireBytesPerRPC = 0.75, 0.30, 2048
	add(Floor, 1, 1000, 1, 6, 0) // CPU not measured
	add(Floor, 64, 2000, 20, 6, 900)
	add(QueuePerRequest, 64, 60, 1000, 6.4, 2500)
	add(StaticReplyQueue, 64, 4000, 20, 4.2, 1280)
	r.Idle = &IdleResult{RequesterPerHour: 72}
	r.BytesPerIdleVirtualQueue = 155
	r.StopIdle = 2 * time.Second
	r.Stop = map[string]*StopResult{
		StopRequester:         {Samples: []float64{0.5, 0.9, 0.7}, Max: 0.9, Median: 0.7, Calls: map[string]int64{"DeleteQueue": 3}},
		StopVirtualQueue:      {Samples: []float64{0.2}, Max: 0.2, Median: 0.2},
		StopTempQueue:         {Samples: []float64{0.8}, Max: 0.8, Median: 0.8, Errors: 1, FirstError: "DeleteQueue: access denied"},
		StopResponderShutdown: {Samples: []float64{500, 1000.004}, Max: 1000.004, Median: 500},
		StopResponderCancel:   {Samples: []float64{500, 1000.2}, Max: 1000.2, Median: 500},
	}
	return r
}

func TestTargets(t *testing.T) {
	met := map[string]bool{}
	for _, tg := range Targets(sampleReport()) {
		met[tg.Name] = tg.Met
	}
	want := map[string]bool{
		"API calls per RPC at 64 callers":                                         true,
		"API calls per RPC one at a time":                                         true, // 6.0000001 prints and counts as 6.00
		"p50 latency one at a time, x the floor":                                  true,
		"throughput at 64 callers, x queue-per-request":                           true,
		"throughput at 64 callers, x static reply queue":                          false, // 1.25x
		"CPU per RPC at 64 callers, x static reply queue":                         false, // 400/1280 = 0.31x
		"idle requester API calls per hour":                                       true,
		"bytes per idle virtual queue":                                            true,
		"idle requester: Close stops, slowest of 3, no error":                     true,
		"idle virtualqueue.Client: Close stops, slowest of 1, no error":           true,
		"idle tempqueue.Client: Close stops, slowest of 1, no error":              false, // fast, but an error
		"idle responder: Shutdown stops, slowest of 2, no error":                  true,  // 1000.004 ms is 1000.00
		"idle responder: Serve's context cancelled stops, slowest of 2, no error": false, // 1000.2 ms
	}
	for name, w := range want {
		got, ok := met[name]
		if !ok || got != w {
			t.Errorf("%s: met %v (present %v), want %v", name, got, ok, w)
		}
	}
	if len(met) != len(want) {
		t.Errorf("targets %v", met)
	}

	r := sampleReport()
	r.Find(TempQueues, 64).CPUMicrosPerRPC = 320
	if tg := findTarget(Targets(r), "CPU per RPC at 64 callers, x static reply queue"); tg == nil || !tg.Met || tg.Measured != 0.25 {
		t.Errorf("320 µs against 1280 µs: %+v, want met at 0.25x", tg)
	}
	r.CPUIncludesServer = true
	if tg := findTarget(Targets(r), "CPU per RPC at 64 callers, x static reply queue"); tg != nil {
		t.Errorf("CPU target checked on figures that include the server: %+v", tg)
	}
	r = sampleReport()
	r.Find(StaticReplyQueue, 64).CPUMicrosPerRPC = 0
	if tg := findTarget(Targets(r), "CPU per RPC at 64 callers, x static reply queue"); tg != nil {
		t.Errorf("CPU target checked without the static reply queue's figure: %+v", tg)
	}
}

func findTarget(ts []Target, name string) *Target {
	for i := range ts {
		if ts[i].Name == name {
			return &ts[i]
		}
	}
	return nil
}

func TestMicrosPerRPC(t *testing.T) {
	for _, tc := range []struct {
		cpu  time.Duration
		rpcs int64
		want float64
	}{
		{time.Second, 2500, 400},
		{1280 * time.Millisecond, 1000, 1280},
		{1500 * time.Nanosecond, 3, 0.5},
		{time.Second, 0, 0},
	} {
		if got := microsPerRPC(tc.cpu, tc.rpcs); got != tc.want {
			t.Errorf("microsPerRPC(%v, %d) = %v, want %v", tc.cpu, tc.rpcs, got, tc.want)
		}
	}
}

func TestReportOutputs(t *testing.T) {
	r := sampleReport()
	var b bytes.Buffer
	if err := WriteTable(&b, r); err != nil {
		t.Fatal(err)
	}
	table := b.String()
	for _, want := range []string{
		"server: test; commit 0123abc-dirty; go1.99.1; 1 rounds", "| tempqueues | 64 | 5000 |", "**no**",
		"| API calls/RPC | billed requests/RPC | $ per million RPCs | wire KiB/RPC | CPU µs/RPC | errors |",
		"| 0.70 | 0.75 | 0.30 | 2.0 | 400 | 0 |",                                 // tempqueues at 64 callers
		"| floor | 1 | 1000 | 1.00 | 2.00 | 6.00 | n/a | 0.00 | n/a | n/a | 0 |", // not measured
		"| CPU per RPC at 64 callers, x static reply queue | 0.31 x | <= 0.25 | **no** |",
		"the server's is not in it",
		"each left alone 2s before its stop, limit 1s",
		"| requester | Close | 3 | 0.90 | 0.70 | 0 | DeleteQueue 1 |",
		"| virtualqueue | Close, until a waiting ReceiveMessage returns | 1 | 0.20 | 0.20 | 0 | none |",
		"| responder-cancel | cancel Serve's context, until Serve returns | 2 | 1000.20 | 500.00 | 0 | none |",
		"first error of tempqueue: DeleteQueue: access denied",
		"| idle tempqueue.Client: Close stops, slowest of 1, no error | 0.80 ms, 1 errors | <= 1000.00 | **no** |",
		"| idle requester: Close stops, slowest of 3, no error | 0.90 ms | <= 1000.00 | yes |",
	} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q:\n%s", want, table)
		}
	}
	r.CPUIncludesServer = true
	b.Reset()
	if err := WriteTable(&b, r); err != nil {
		t.Fatal(err)
	}
	if table := b.String(); !strings.Contains(table, "| CPU µs/RPC, server included | errors |") || !strings.Contains(table, "includes the embedded server") {
		t.Errorf("table of an in-process run does not say the CPU figure includes the server:\n%s", table)
	}
	r.CPUIncludesServer = false

	type svgDoc struct {
		XMLName  xml.Name `xml:"svg"`
		Polyline []struct {
			Stroke string `xml:"stroke,attr"`
			Points string `xml:"points,attr"`
		} `xml:"polyline"`
		Circle []struct {
			Title string `xml:"title"`
		} `xml:"circle"`
	}
	for name, write := range map[string]func(io.Writer, *Report) error{
		"latency": WriteLatencySVG, "calls": WriteCallsSVG, "throughput": WriteThroughputSVG, "cpu": WriteCPUSVG,
	} {
		b.Reset()
		if err := write(&b, r); err != nil {
			t.Fatal(err)
		}
		var doc svgDoc
		if err := xml.Unmarshal(b.Bytes(), &doc); err != nil {
			t.Errorf("%s: not SVG: %v", name, err)
		}
		if name != "cpu" {
			continue
		}
		var points []string
		for _, c := range doc.Circle {
			points = append(points, c.Title)
		}
		// One point per measured figure: the floor at one caller has none.
		want := []string{"tempqueues, 1 callers: 700", "tempqueues, 64 callers: 400", "queue-per-request, 64 callers: 2500",
			"static-reply-queue, 64 callers: 1280", "floor, 64 callers: 900"}
		slices.Sort(points)
		slices.Sort(want)
		if !slices.Equal(points, want) {
			t.Errorf("cpu.svg points %q, want %q", points, want)
		}
		if len(doc.Polyline) != 1 || doc.Polyline[0].Stroke != colours[TempQueues] {
			t.Errorf("cpu.svg lines %+v, want tempqueues' only (the others have one point each)", doc.Polyline)
		}
	}
}

func TestBuildStamp(t *testing.T) {
	settings := func(kv ...string) *debug.BuildInfo {
		bi := &debug.BuildInfo{}
		for i := 0; i < len(kv); i += 2 {
			bi.Settings = append(bi.Settings, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
		}
		return bi
	}
	for _, c := range []struct {
		bi   *debug.BuildInfo
		ok   bool
		want string
	}{
		{settings("vcs", "git", "vcs.revision", "abc123", "vcs.modified", "false"), true, "abc123"},
		{settings("vcs.modified", "true", "vcs.revision", "abc123"), true, "abc123-dirty"},
		{settings("-buildmode", "exe"), true, ""},       // go run: no VCS information
		{settings("vcs.modified", "true"), true, ""},    // no revision to mark
		{settings("vcs.revision", "abc123"), false, ""}, // no build information at all
		{nil, false, ""},
	} {
		if got := buildCommit(c.bi, c.ok); got != c.want {
			t.Errorf("buildCommit(%v, %v) = %q, want %q", c.bi, c.ok, got, c.want)
		}
	}

	// The JSON report carries both stamps, and the table says when they
	// are unknown (a report saved before stamping, or a build without VCS
	// information).
	j, err := json.Marshal(&Report{Commit: "abc123", GoVersion: "go1.99.1"})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"commit":"abc123"`, `"go_version":"go1.99.1"`} {
		if !strings.Contains(string(j), want) {
			t.Errorf("JSON report lacks %s: %s", want, j)
		}
	}
	var b bytes.Buffer
	if err := WriteTable(&b, &Report{Server: "s"}); err != nil {
		t.Fatal(err)
	}
	if first, _, _ := strings.Cut(b.String(), "\n"); !strings.HasPrefix(first, "server: s; commit unknown; Go version unknown; ") {
		t.Errorf("header of an unstamped report = %q", first)
	}
}

func TestStopResult(t *testing.T) {
	boom := errors.New("boom")
	res := stopResult([]stopSample{
		{took: 3 * time.Millisecond, calls: map[string]int64{"DeleteQueue": 1}},
		{took: 1500 * time.Microsecond, err: boom, calls: map[string]int64{"DeleteQueue": 1, "ReceiveMessage": 1}},
		{took: 700 * time.Millisecond},
		{took: 2 * time.Millisecond, err: errors.New("later")},
	})
	if !slices.Equal(res.Samples, []float64{3, 1.5, 700, 2}) {
		t.Errorf("samples %v, want them in order, in ms", res.Samples)
	}
	// Nearest rank: the second of four.
	if res.Max != 700 || res.Median != 2 {
		t.Errorf("max %v, median %v; want 700 and 2", res.Max, res.Median)
	}
	if res.Errors != 2 || res.FirstError != "boom" {
		t.Errorf("errors %d, first %q; want 2, boom", res.Errors, res.FirstError)
	}
	if fmt.Sprint(res.Calls) != "map[DeleteQueue:2 ReceiveMessage:1]" {
		t.Errorf("calls %v", res.Calls)
	}
	if got := opsPer(res.Calls, 4); got != "DeleteQueue 0.5, ReceiveMessage 0.25" {
		t.Errorf("calls per stop %q", got)
	}
	if res := stopResult(nil); res.Max != 0 || res.Median != 0 || res.Errors != 0 {
		t.Errorf("no samples: %+v", res)
	}
}

func TestPercentile(t *testing.T) {
	s := []int64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	var d = make([]time.Duration, len(s))
	for i, v := range s {
		d[i] = time.Duration(v)
	}
	if got := sortedPercentile(d, 0.5); got != 5 {
		t.Errorf("p50 %v, want 5", got)
	}
	if got := sortedPercentile(d, 0.99); got != 10 {
		t.Errorf("p99 %v, want 10", got)
	}
	if got := sortedPercentile(nil, 0.5); got != 0 {
		t.Errorf("p50 of nothing %v", got)
	}
}
