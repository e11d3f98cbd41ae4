package bench

import (
	"slices"
	"testing"
)

// fr is a fake result for the front's tests.
type fr struct {
	name          string
	p50, rps, p99 float64
	calls, cpu    float64
	errors        int64
}

func frontReport(conc int, results ...fr) *Report {
	r := &Report{Concurrency: []int{conc}}
	for _, f := range results {
		r.Results = append(r.Results, Result{Contender: f.name, Concurrency: conc, RPCs: 1000, Errors: f.errors,
			P50ms: f.p50, RPCPerSecond: f.rps, P99ms: f.p99, APICallsPerRPC: f.calls, CPUMicrosPerRPC: f.cpu})
	}
	return r
}

func TestFront(t *testing.T) {
	// The others at 8 callers: static-reply-queue best on p50 and RPC/s,
	// parked-receivers on p99, the floor nowhere; the fewest calls 3.0.
	others := []fr{
		{name: StaticReplyQueue, p50: 20, rps: 400, p99: 60, calls: 3.0, cpu: 800},
		{name: ParkedReceivers, p50: 22, rps: 360, p99: 40, calls: 6, cpu: 1000},
		{name: Floor, p50: 40, rps: 200, p99: 80, calls: 6, cpu: 900},
	}
	for _, tc := range []struct {
		name    string
		conc    int
		tq      fr
		others  []fr
		missed  []string
		against map[string]string // rule: contender compared with
		skipped []string          // rules not checked
	}{
		{name: "on the front", conc: 8, tq: fr{p50: 22, rps: 380, p99: 60, calls: 2, cpu: 500}, others: others,
			against: map[string]string{RuleP50: StaticReplyQueue, RuleThroughput: StaticReplyQueue, RuleCalls: StaticReplyQueue,
				RuleP99: ParkedReceivers, RuleCPUParked: ParkedReceivers},
			skipped: []string{RuleCPUStatic}},
		{name: "at the limits, judged at two decimals", conc: 8, tq: fr{p50: 22.09, rps: 379.9, p99: 60.1, calls: 3.01, cpu: 502}, others: others},
		{name: "just past every limit", conc: 8, tq: fr{p50: 22.2, rps: 377, p99: 60.4, calls: 3.03, cpu: 510}, others: others,
			missed: []string{RuleP50, RuleThroughput, RuleCalls, RuleP99, RuleCPUParked}},
		{name: "one caller: a 2% tie on calls is fine", conc: 1, tq: fr{p50: 2, rps: 500, p99: 4, calls: 4.08, cpu: 400},
			others: []fr{{name: StaticReplyQueue, p50: 2, rps: 500, p99: 4, calls: 4.0, cpu: 800}, {name: ParkedReceivers, p50: 2, rps: 500, p99: 4, calls: 6, cpu: 900}}},
		{name: "one caller: 3% more calls is not", conc: 1, tq: fr{p50: 2, rps: 500, p99: 4, calls: 4.12, cpu: 400},
			others: []fr{{name: StaticReplyQueue, p50: 2, rps: 500, p99: 4, calls: 4.0, cpu: 800}, {name: ParkedReceivers, p50: 2, rps: 500, p99: 4, calls: 6, cpu: 900}},
			missed: []string{RuleCalls}},
		{name: "two callers: no tie", conc: 2, tq: fr{p50: 2, rps: 1000, p99: 4, calls: 4.08, cpu: 400},
			others: []fr{{name: StaticReplyQueue, p50: 2, rps: 1000, p99: 4, calls: 4.0, cpu: 800}, {name: ParkedReceivers, p50: 2, rps: 1000, p99: 4, calls: 6, cpu: 900}},
			missed: []string{RuleCalls}},
		{name: "64 callers: CPU against the static reply queue too", conc: 64, tq: fr{p50: 20, rps: 3000, p99: 40, calls: 0.7, cpu: 300},
			others: []fr{{name: StaticReplyQueue, p50: 25, rps: 2500, p99: 50, calls: 2.5, cpu: 1000}, {name: ParkedReceivers, p50: 60, rps: 1000, p99: 90, calls: 6, cpu: 2000}},
			missed: []string{RuleCPUStatic}, against: map[string]string{RuleCPUStatic: StaticReplyQueue}},
		{name: "64 callers: a quarter of the static reply queue's CPU", conc: 64, tq: fr{p50: 20, rps: 3000, p99: 40, calls: 0.7, cpu: 250},
			others: []fr{{name: StaticReplyQueue, p50: 25, rps: 2500, p99: 50, calls: 2.5, cpu: 1000}, {name: ParkedReceivers, p50: 60, rps: 1000, p99: 90, calls: 6, cpu: 2000}}},
		{name: "errors take it off the front", conc: 8, tq: fr{p50: 10, rps: 800, p99: 20, calls: 1, cpu: 100, errors: 1}, others: others,
			missed: []string{RuleErrors}},
		{name: "without CPU figures the CPU rules are not checked", conc: 64, tq: fr{p50: 20, rps: 3000, p99: 40, calls: 0.7},
			others:  []fr{{name: StaticReplyQueue, p50: 25, rps: 2500, p99: 50, calls: 2.5, cpu: 1000}, {name: ParkedReceivers, p50: 60, rps: 1000, p99: 90, calls: 6, cpu: 2000}},
			skipped: []string{RuleCPUParked, RuleCPUStatic}},
		{name: "without parked-receivers no CPU rule at 8", conc: 8, tq: fr{p50: 20, rps: 400, p99: 60, calls: 3, cpu: 5000},
			others: []fr{{name: StaticReplyQueue, p50: 20, rps: 400, p99: 60, calls: 3.0, cpu: 800}}, skipped: []string{RuleCPUParked, RuleCPUStatic}},
		{name: "alone: nothing to compare", conc: 8, tq: fr{p50: 20, rps: 400, p99: 60, calls: 3, cpu: 100},
			skipped: []string{RuleP50, RuleThroughput, RuleCalls, RuleP99, RuleCPUParked, RuleCPUStatic}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.tq.name = TempQueues
			r := frontReport(tc.conc, append([]fr{tc.tq}, tc.others...)...)
			points := Front(r)
			if len(points) != 1 || points[0].Callers != tc.conc {
				t.Fatalf("points %+v, want one at %d callers", points, tc.conc)
			}
			p := points[0]
			if got := p.Missed(); !slices.Equal(got, tc.missed) {
				t.Errorf("missed %v, want %v; checks %+v", got, tc.missed, p.Checks)
			}
			if p.OnFront != (len(tc.missed) == 0) {
				t.Errorf("on the front %v with %v missed", p.OnFront, tc.missed)
			}
			for rule, who := range tc.against {
				if c := p.Check(rule); c == nil || c.Against != who {
					t.Errorf("%s held against %+v, want %s", rule, c, who)
				}
			}
			for _, rule := range tc.skipped {
				if c := p.Check(rule); c != nil {
					t.Errorf("%s checked: %+v", rule, c)
				}
			}
		})
	}
}

func TestFrontLeavesOut(t *testing.T) {
	r := frontReport(8,
		fr{name: TempQueues, p50: 20, rps: 400, p99: 40, calls: 2, cpu: 100},
		fr{name: StaticReplyQueue, p50: 25, rps: 300, p99: 60, calls: 3, cpu: 800})
	// An other without RPCs has no figures to beat.
	r.Results = append(r.Results, Result{Contender: Floor, Concurrency: 8})
	// A level without tempqueues has no point.
	r.Concurrency = append(r.Concurrency, 16)
	r.Results = append(r.Results, Result{Contender: Floor, Concurrency: 16, RPCs: 10, P50ms: 1, RPCPerSecond: 1, P99ms: 1, APICallsPerRPC: 1})
	points := Front(r)
	if len(points) != 1 || !points[0].OnFront || points[0].Check(RuleP50).Against != StaticReplyQueue {
		t.Errorf("points %+v, want one on the front, against the static reply queue only", points)
	}
	// Figures that include the server say nothing about the client's CPU.
	r.Results = append(r.Results, Result{Contender: ParkedReceivers, Concurrency: 8, RPCs: 10, P50ms: 30, RPCPerSecond: 200, P99ms: 60, APICallsPerRPC: 6, CPUMicrosPerRPC: 150})
	if p := Front(r)[0]; p.OnFront || p.Check(RuleCPUParked) == nil {
		t.Errorf("100 µs against parked-receivers' 150: %+v, want the CPU rule missed", p)
	}
	r.CPUIncludesServer = true
	if p := Front(r)[0]; !p.OnFront || p.Check(RuleCPUParked) != nil {
		t.Errorf("CPU rule checked on figures that include the server: %+v", p)
	}
	// tempqueues without RPCs is not on the front.
	r = frontReport(8, fr{name: TempQueues}, fr{name: StaticReplyQueue, p50: 25, rps: 300, p99: 60, calls: 3, cpu: 800})
	r.Results[0].RPCs = 0
	if p := Front(r)[0]; p.OnFront {
		t.Errorf("tempqueues without RPCs on the front: %+v", p)
	}
}

// TestFrontIgnoresTheCostOption checks that tempqueues with
// PreferFewerCalls, which the sweep runs beside the default, is never one
// of the others the default is judged against.
func TestFrontIgnoresTheCostOption(t *testing.T) {
	r := frontReport(8,
		fr{name: TempQueues, p50: 20, rps: 400, p99: 40, calls: 1.5, cpu: 400},
		fr{name: TempQueuesFewerCalls, p50: 10, rps: 800, p99: 20, calls: 0.5, cpu: 100},
		fr{name: StaticReplyQueue, p50: 20, rps: 400, p99: 40, calls: 3, cpu: 800},
		fr{name: ParkedReceivers, p50: 21, rps: 390, p99: 41, calls: 6, cpu: 1000},
	)
	for _, p := range Front(r) {
		for _, c := range p.Checks {
			if c.Against == TempQueuesFewerCalls {
				t.Errorf("rule %s judged against %s", c.Rule, c.Against)
			}
			if !c.Met {
				t.Errorf("rule %s missed against %s: %.2f / %.2f", c.Rule, c.Against, c.TempQueues, c.Other)
			}
		}
	}
}

// TestPlotsShowEveryContender checks that every contender of a report is
// drawn, the sweep's tempqueues-fewer-calls among them.
func TestPlotsShowEveryContender(t *testing.T) {
	r := frontReport(8,
		fr{name: TempQueues, p50: 20, rps: 400, p99: 40, calls: 1.5, cpu: 400},
		fr{name: TempQueuesFewerCalls, p50: 21, rps: 390, p99: 41, calls: 1.2, cpu: 380},
		fr{name: StaticReplyQueue, p50: 25, rps: 320, p99: 40, calls: 3, cpu: 800},
	)
	got := contendersIn(r)
	if want := []string{TempQueues, TempQueuesFewerCalls, StaticReplyQueue}; !slices.Equal(got, want) {
		t.Fatalf("plotted %v, want %v", got, want)
	}
	for _, name := range AllContenders {
		if !slices.Contains(plotOrder, name) {
			t.Errorf("%s is in no plot", name)
		}
	}
}
