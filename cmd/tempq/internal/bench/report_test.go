package bench

import (
	"bytes"
	"encoding/xml"
	"strings"
	"testing"
	"time"
)

func sampleReport() *Report {
	r := &Report{Server: "test", Rounds: 1, Concurrency: []int{1, 64}}
	add := func(name string, conc int, rps, p50, calls float64) {
		r.Results = append(r.Results, Result{Contender: name, Concurrency: conc, RPCs: 100, RPCPerSecond: rps, P50ms: p50, P99ms: 2 * p50, APICallsPerRPC: calls})
	}
	add(TempQueues, 1, 1000, 1.1, 6.0000001)
	add(TempQueues, 64, 5000, 8, 0.7)
	add(Floor, 1, 1000, 1, 6)
	add(Floor, 64, 2000, 20, 6)
	add(QueuePerRequest, 64, 60, 1000, 6.4)
	add(StaticReplyQueue, 64, 4000, 20, 4.2)
	r.Idle = &IdleResult{RequesterPerHour: 72}
	r.BytesPerIdleVirtualQueue = 155
	return r
}

func TestTargets(t *testing.T) {
	met := map[string]bool{}
	for _, tg := range Targets(sampleReport()) {
		met[tg.Name] = tg.Met
	}
	want := map[string]bool{
		"API calls per RPC at 64 callers":                true,
		"API calls per RPC one at a time":                true, // 6.0000001 prints and counts as 6.00
		"p50 latency one at a time, x the floor":         true,
		"throughput at 64 callers, x queue-per-request":  true,
		"throughput at 64 callers, x static reply queue": false, // 1.25x
		"idle requester API calls per hour":              true,
		"bytes per idle virtual queue":                   true,
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
}

func TestReportOutputs(t *testing.T) {
	r := sampleReport()
	var b bytes.Buffer
	if err := WriteTable(&b, r); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "| tempqueues | 64 | 5000 |") || !strings.Contains(b.String(), "**no**") {
		t.Errorf("table:\n%s", b.String())
	}
	for _, write := range []func(*bytes.Buffer, *Report) error{
		func(w *bytes.Buffer, r *Report) error { return WriteLatencySVG(w, r) },
		func(w *bytes.Buffer, r *Report) error { return WriteCallsSVG(w, r) },
		func(w *bytes.Buffer, r *Report) error { return WriteThroughputSVG(w, r) },
	} {
		b.Reset()
		if err := write(&b, r); err != nil {
			t.Fatal(err)
		}
		if err := xml.Unmarshal(b.Bytes(), new(struct {
			XMLName xml.Name `xml:"svg"`
		})); err != nil {
			t.Errorf("not SVG: %v", err)
		}
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
