package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/tempqueues/tempqueues/internal/callcount"
)

func TestSetting(t *testing.T) {
	for _, tc := range []struct {
		in, str, slug, describe string
		want                    Setting
	}{
		{"0", "0", "latency-0", "no latency added", Setting{}},
		{"0s", "0", "latency-0", "no latency added", Setting{}},
		{"2ms", "2ms", "latency-2ms", "2ms added to every call", Setting{Latency: 2 * time.Millisecond}},
		{" 10ms/40ms", "10ms/40ms", "latency-10ms-p99-40ms", "lognormal latency per call, median 10ms, p99 40ms",
			Setting{Latency: 10 * time.Millisecond, LatencyP99: 40 * time.Millisecond}},
	} {
		s, err := ParseSetting(tc.in)
		if err != nil || s != tc.want {
			t.Errorf("ParseSetting(%q) = %+v, %v; want %+v", tc.in, s, err, tc.want)
			continue
		}
		if s.String() != tc.str || s.Slug() != tc.slug || s.Describe() != tc.describe {
			t.Errorf("%q: String %q, Slug %q, Describe %q; want %q, %q, %q", tc.in, s.String(), s.Slug(), s.Describe(), tc.str, tc.slug, tc.describe)
		}
	}
	for _, bad := range []string{"", "fast", "-1ms", "10ms/", "10ms/5ms", "10ms/10ms", "0/40ms", "10ms/40ms/80ms"} {
		if s, err := ParseSetting(bad); err == nil {
			t.Errorf("ParseSetting(%q) = %+v, want an error", bad, s)
		}
	}
	// The sweep's settings print as --settings takes them.
	for _, s := range SweepSettings {
		if back, err := ParseSetting(s.String()); err != nil || back != s {
			t.Errorf("%+v prints as %q, which parses to %+v, %v", s, s.String(), back, err)
		}
	}
}

// TestEstimateSweep: the whole default sweep fits in the half hour the
// issue allows, with room for a slow machine.
func TestEstimateSweep(t *testing.T) {
	sc := SweepConfig{Config: Config{Concurrency: SweepConcurrency, Contenders: SweepContenders, Rounds: SweepRounds,
		Duration: SweepWindow, WarmUp: SweepWarmUp}, Settings: SweepSettings}
	est := EstimateSweep(sc)
	t.Logf("the default sweep: about %v", est)
	if est > 27*time.Minute || est < 15*time.Minute {
		t.Errorf("the default sweep is estimated at %v, want 15 to 27 minutes (the issue's limit is 30)", est)
	}
}

// TestRunSweep runs a sweep of fake contenders: a server per setting,
// started before and stopped after its run, the setting in every progress
// line, the report saved after each setting, and no idle, stopping or
// memory measurement.
func TestRunSweep(t *testing.T) {
	v := new(visits)
	var opened, stopped []Setting
	var saved []int
	var progress bytes.Buffer
	settings := []Setting{{}, {Latency: 10 * time.Millisecond, LatencyP99: 40 * time.Millisecond}}
	sc := SweepConfig{
		Config: Config{Contenders: []string{TempQueues, ParkedReceivers}, Concurrency: []int{1, 2}, Rounds: 1,
			Duration: 30 * time.Millisecond, WarmUp: 10 * time.Millisecond, Progress: &progress,
			// Ignored by a sweep: with a fake server these would fail.
			Idle: IdleConfig{Window: time.Second}, Stop: StopConfig{Idle: time.Second}, MemoryQueues: 10},
		Settings: settings,
		Open: func(_ context.Context, s Setting) (*SweepServer, error) {
			opened = append(opened, s)
			if len(opened) != len(stopped)+1 {
				t.Errorf("setting %s opened before the last one stopped", s)
			}
			return &SweepServer{Server: "fake " + s.String(), NewClient: func(*callcount.Counter) *sqs.Client { return sqs.New(sqs.Options{}) },
				Stop: func() { stopped = append(stopped, s) }}, nil
		},
		Done: func(r *SweepReport) error {
			saved = append(saved, len(r.Settings))
			return nil
		},
	}
	rep, err := runSweep(context.Background(), sc, func(name string, _ *env, _ *sqs.Client) contender {
		return &fake{n: name, v: v, nap: time.Millisecond}
	})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(opened, settings) || !slices.Equal(stopped, settings) || !slices.Equal(saved, []int{1, 2}) {
		t.Errorf("opened %v, stopped %v, saved after %v settings", opened, stopped, saved)
	}
	if len(rep.Settings) != 2 || rep.WarmUp != 10*time.Millisecond || rep.ServerConcurrency != DefaultServerConcurrency || !slices.Equal(rep.Concurrency, []int{1, 2}) {
		t.Fatalf("report %+v", rep)
	}
	for i, s := range rep.Settings {
		r := s.Report
		if s.Setting != settings[i] || s.Name != settings[i].String() || r.Server != "fake "+settings[i].String() {
			t.Errorf("setting %d: %+v on %q", i, s.Setting, r.Server)
		}
		if len(r.Results) != 4 || r.Idle != nil || r.Stop != nil || r.BytesPerIdleVirtualQueue != 0 {
			t.Errorf("setting %s: %d results, idle %v, stop %v, memory %v", s.Name, len(r.Results), r.Idle, r.Stop, r.BytesPerIdleVirtualQueue)
		}
		if len(s.Front) != 2 {
			t.Errorf("setting %s: front %+v, want a point per concurrency", s.Name, s.Front)
		}
		for _, res := range r.Results {
			if res.RPCs == 0 {
				t.Errorf("setting %s: %+v", s.Name, res)
			}
		}
	}
	for _, want := range []string{"[setting 1/2: 0] [4/4] round 1", "[setting 2/2: 10ms/40ms] [1/4] round 1"} {
		if !strings.Contains(progress.String(), want) {
			t.Errorf("progress lacks %q:\n%s", want, progress.String())
		}
	}

	// A server that does not start, or a report that cannot be saved,
	// stops the sweep.
	opened, stopped = nil, nil
	sc.Settings = settings[:1]
	sc.Done = func(*SweepReport) error { return errors.New("disk full") }
	if _, err := runSweep(context.Background(), sc, func(name string, _ *env, _ *sqs.Client) contender {
		return &fake{n: name, v: v, nap: time.Millisecond}
	}); err == nil || !strings.Contains(err.Error(), "disk full") || len(stopped) != 1 {
		t.Errorf("report failing to save: %v, %d servers stopped", err, len(stopped))
	}
	sc.Open = func(context.Context, Setting) (*SweepServer, error) { return nil, errors.New("no port") }
	if _, err := runSweep(context.Background(), sc, nil); err == nil || !strings.Contains(err.Error(), "no port") {
		t.Errorf("server failing to start: %v", err)
	}
}

// TestWarmUp: the RPCs of a warm-up are not the window's; without one,
// every RPC is.
func TestWarmUp(t *testing.T) {
	for _, warm := range []time.Duration{0, 50 * time.Millisecond} {
		c := &counting{}
		cfg := Config{
			NewClient:   func(*callcount.Counter) *sqs.Client { return sqs.New(sqs.Options{}) },
			Contenders:  []string{Floor},
			Concurrency: []int{2},
			Rounds:      1,
			Duration:    50 * time.Millisecond,
			WarmUp:      warm,
		}
		rep, err := run(context.Background(), cfg, func(string, *env, *sqs.Client) contender { return c })
		if err != nil {
			t.Fatal(err)
		}
		res := rep.Find(Floor, 2)
		if rep.WarmUp != warm || res == nil || res.RPCs == 0 || res.Errors != 0 {
			t.Fatalf("warm-up %v: report %+v", warm, rep)
		}
		if calls := c.calls.Load(); (warm == 0) != (res.RPCs == calls) || res.RPCs > calls {
			t.Errorf("warm-up %v: %d RPCs in the window, %d in all", warm, res.RPCs, calls)
		}
	}
}

// counting is a contender that counts its calls, each a millisecond.
type counting struct{ calls atomic.Int64 }

func (c *counting) name() string                { return Floor }
func (c *counting) setup(context.Context) error { return nil }
func (c *counting) close(context.Context) error { return nil }
func (c *counting) call(ctx context.Context, _ int) (time.Duration, error) {
	c.calls.Add(1)
	return time.Millisecond, sleep(ctx, time.Millisecond)
}

func sampleSweep() *SweepReport {
	r := &SweepReport{Commit: "abc123", GoVersion: "go1.99.1", Rounds: 2, Window: 3 * time.Second, WarmUp: 500 * time.Millisecond,
		Concurrency: []int{1, 64}, Contenders: SweepContenders, ServerConcurrency: 64, Elapsed: 20 * time.Minute}
	for _, s := range []Setting{{}, {Latency: 10 * time.Millisecond, LatencyP99: 40 * time.Millisecond}} {
		rep := &Report{Server: "sqstest, " + s.Describe(), Concurrency: r.Concurrency}
		add := func(name string, conc int, rps, p50, calls, cpu float64) {
			rep.Results = append(rep.Results, Result{Contender: name, Concurrency: conc, RPCs: 100, RPCPerSecond: rps, P50ms: p50, P99ms: 2 * p50, APICallsPerRPC: calls, CPUMicrosPerRPC: cpu})
		}
		add(TempQueues, 1, 100, 20, 4.2, 500)
		add(TempQueues, 64, 3000, 21, 0.65, 200)
		add(StaticReplyQueue, 1, 100, 20, 4.2, 600)
		add(StaticReplyQueue, 64, 2500, 25, 2.5, 1000)
		add(ParkedReceivers, 1, 90, 22, 6, 900)
		add(ParkedReceivers, 64, 1000, 64, 6, 1100)
		add(Floor, 1, 50, 40, 6, 800)
		add(Floor, 64, 1600, 40, 6, 900)
		r.Settings = append(r.Settings, SettingReport{Setting: s, Name: s.String(), Report: rep})
	}
	r.Judge()
	return r
}

func TestSweepOutputs(t *testing.T) {
	r := sampleSweep()
	var b bytes.Buffer
	if err := WriteSweepTable(&b, r); err != nil {
		t.Fatal(err)
	}
	table := b.String()
	for _, want := range []string{
		"sweep: commit abc123; go1.99.1; 2 rounds of 3s windows (each after a 500ms warm-up) per setting, contender and concurrency; responders' concurrency 64; took 20m0s",
		"settings (latency added to every call; MEDIAN/P99 is lognormal): 0, 10ms/40ms; callers: 1, 64;",
		"queue-per-request is not in the sweep",
		"| 0 | 1 | 20.00 / 20.00 static-reply-queue: 1.00x | 100 / 100 static-reply-queue: 1.00x | 4.20 / 4.20 static-reply-queue: 1.00x | 40.00 / 40.00 static-reply-queue: 1.00x | 500 / 900 parked-receivers: 0.56x **no** | n/a | **no**: cpu-vs-parked-receivers |",
		"| 10ms/40ms | 64 | 21.00 / 25.00 static-reply-queue: 0.84x | 3000 / 2500 static-reply-queue: 1.20x | 0.65 / 2.50 static-reply-queue: 0.26x | 42.00 / 50.00 static-reply-queue: 0.84x | 200 / 1100 parked-receivers: 0.18x | 200 / 1000 static-reply-queue: 0.20x | yes |",
		"| 10ms/40ms | 1 of 2 | 1 callers (cpu-vs-parked-receivers) |",
		"## Setting 10ms/40ms: lognormal latency per call, median 10ms, p99 40ms",
		"| parked-receivers | 64 | 1000 | 64.00 | 128.00 | 6.00 | n/a | 0.00 | n/a | 1100 | 0 |",
	} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q:\n%s", want, table)
		}
	}
	// The JSON round trip keeps every figure.
	j, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var back SweepReport
	if err := json.Unmarshal(j, &back); err != nil {
		t.Fatal(err)
	}
	back.Judge()
	var b2 bytes.Buffer
	if err := WriteSweepTable(&b2, &back); err != nil || b2.String() != table {
		t.Errorf("the JSON round trip renders differently (%v):\n%s", err, b2.String())
	}

	b.Reset()
	if err := WriteFrontSVG(&b, "10ms per call", r.Settings[1].Report); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		XMLName  xml.Name `xml:"svg"`
		Polyline []struct {
			Stroke string `xml:"stroke,attr"`
		} `xml:"polyline"`
		Circle []struct {
			Title string `xml:"title"`
		} `xml:"circle"`
		Text []string `xml:"text"`
	}
	if err := xml.Unmarshal(b.Bytes(), &doc); err != nil {
		t.Fatalf("not SVG: %v\n%s", err, b.String())
	}
	if len(doc.Polyline) != 4 || len(doc.Circle) != 8 {
		t.Errorf("%d lines and %d points, want a line per contender and a point per contender and concurrency", len(doc.Polyline), len(doc.Circle))
	}
	if !slices.Contains(doc.Text, "64") || !slices.Contains(doc.Text, "10ms per call") || !slices.ContainsFunc(doc.Circle, func(c struct {
		Title string `xml:"title"`
	}) bool {
		return c.Title == "tempqueues, 64 callers: p50 21 ms, 0.65 calls per RPC"
	}) {
		t.Errorf("labels %q, points %v", doc.Text, doc.Circle)
	}
}
