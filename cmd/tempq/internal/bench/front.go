package bench

import (
	"math"
	"slices"
)

// The rules of issue 23 that tempqueues' default must meet at every point
// of a sweep (a setting and a number of callers), against every other
// contender of the run.
const (
	// RuleP50: p50 at most 1.1x the lowest p50 of the others.
	RuleP50 = "p50"
	// RuleThroughput: RPCs per second at least 0.95x the highest of the
	// others.
	RuleThroughput = "throughput"
	// RuleCalls: API calls per RPC no more than the fewest of the others;
	// at one caller a tie within 2% is fine.
	RuleCalls = "calls"
	// RuleP99: p99 at most 1.5x the lowest p99 of the others.
	RuleP99 = "p99"
	// RuleCPUParked: CPU per RPC at most 0.5x parked-receivers'.
	RuleCPUParked = "cpu-vs-parked-receivers"
	// RuleCPUStatic: at 64 callers, CPU per RPC at most 0.25x the static
	// reply queue's.
	RuleCPUStatic = "cpu-vs-static-reply-queue"
	// RuleErrors: no failed RPC.
	RuleErrors = "errors"
)

// The limits of the rules, as ratios of tempqueues' figure to the other's.
const (
	limitP50          = 1.1
	limitThroughput   = 0.95
	limitCalls        = 1.0
	limitCallsOne     = 1.02 // at one caller
	limitP99          = 1.5
	limitCPUParked    = 0.5
	limitCPUStatic    = 0.25
	cpuStaticCallers  = 64
	callsTieAtCallers = 1
)

// FrontCheck is one rule at one point: tempqueues' figure, the other
// contender's it is held against, their ratio and the rule's limit.
type FrontCheck struct {
	Rule       string  `json:"rule"`
	TempQueues float64 `json:"tempqueues"`
	Other      float64 `json:"other"`
	// Against is the contender whose figure Other is: the best of the
	// others, or the one the rule names.
	Against string  `json:"against"`
	Ratio   float64 `json:"ratio"`
	Limit   float64 `json:"limit"`
	AtMost  bool    `json:"at_most"` // Ratio must be at most Limit; else at least
	Met     bool    `json:"met"`
}

// FrontPoint is where tempqueues stands at one number of callers.
type FrontPoint struct {
	Callers int          `json:"callers"`
	Checks  []FrontCheck `json:"checks"`
	// OnFront says that tempqueues ran without error and met every
	// rule that could be checked.
	OnFront bool `json:"on_front"`
}

// Missed returns the rules the point missed.
func (p FrontPoint) Missed() []string {
	var m []string
	for _, c := range p.Checks {
		if !c.Met {
			m = append(m, c.Rule)
		}
	}
	return m
}

// Check returns the point's check of rule, or nil.
func (p *FrontPoint) Check(rule string) *FrontCheck {
	for i := range p.Checks {
		if p.Checks[i].Rule == rule {
			return &p.Checks[i]
		}
	}
	return nil
}

// Front judges tempqueues against the other contenders of r at each of its
// concurrency levels. A rule is checked where both figures exist: others
// without RPCs are left out, CPU rules need CPU figures that leave the
// server out (Report.CPUIncludesServer false), the CPU rule against the
// static reply queue applies at 64 callers only. Ratios are judged at the
// two decimals printed, as Targets are. A concurrency level without a
// tempqueues result has no point.
func Front(r *Report) []FrontPoint {
	var points []FrontPoint
	for _, conc := range r.Concurrency {
		tq := r.Find(TempQueues, conc)
		if tq == nil {
			continue
		}
		var others []*Result
		for i := range r.Results {
			o := &r.Results[i]
			if o.Concurrency == conc && o.Payload == r.firstPayload() && !ours(o.Contender) && o.RPCs > 0 {
				others = append(others, o)
			}
		}
		p := FrontPoint{Callers: conc}
		add := func(rule string, t float64, o *Result, other, limit float64, atMost bool) {
			ratio := 0.0
			if other > 0 {
				ratio = t / other
			}
			judged := math.Round(ratio*100) / 100
			met := judged >= limit
			if atMost {
				met = judged <= limit
			}
			p.Checks = append(p.Checks, FrontCheck{Rule: rule, TempQueues: t, Other: other, Against: o.Contender,
				Ratio: ratio, Limit: limit, AtMost: atMost, Met: met && other > 0})
		}
		p.Checks = append(p.Checks, FrontCheck{Rule: RuleErrors, TempQueues: float64(tq.Errors), AtMost: true,
			Met: tq.Errors == 0 && tq.RPCs > 0})
		if tq.RPCs > 0 && len(others) > 0 {
			best := func(value func(*Result) float64, lowest bool) *Result {
				return slices.MinFunc(others, func(a, b *Result) int {
					va, vb := value(a), value(b)
					if !lowest {
						va, vb = -va, -vb
					}
					switch {
					case va < vb:
						return -1
					case va > vb:
						return 1
					}
					return 0
				})
			}
			p50 := func(x *Result) float64 { return x.P50ms }
			rps := func(x *Result) float64 { return x.RPCPerSecond }
			calls := func(x *Result) float64 { return x.APICallsPerRPC }
			p99 := func(x *Result) float64 { return x.P99ms }
			o := best(p50, true)
			add(RuleP50, tq.P50ms, o, o.P50ms, limitP50, true)
			o = best(rps, false)
			add(RuleThroughput, tq.RPCPerSecond, o, o.RPCPerSecond, limitThroughput, false)
			o = best(calls, true)
			limit := limitCalls
			if conc == callsTieAtCallers {
				limit = limitCallsOne
			}
			add(RuleCalls, tq.APICallsPerRPC, o, o.APICallsPerRPC, limit, true)
			o = best(p99, true)
			add(RuleP99, tq.P99ms, o, o.P99ms, limitP99, true)
		}
		if tq.RPCs > 0 && tq.CPUMicrosPerRPC > 0 && !r.CPUIncludesServer {
			if o := r.Find(ParkedReceivers, conc); o != nil && o.RPCs > 0 && o.CPUMicrosPerRPC > 0 {
				add(RuleCPUParked, tq.CPUMicrosPerRPC, o, o.CPUMicrosPerRPC, limitCPUParked, true)
			}
			if o := r.Find(StaticReplyQueue, conc); conc == cpuStaticCallers && o != nil && o.RPCs > 0 && o.CPUMicrosPerRPC > 0 {
				add(RuleCPUStatic, tq.CPUMicrosPerRPC, o, o.CPUMicrosPerRPC, limitCPUStatic, true)
			}
		}
		p.OnFront = len(p.Missed()) == 0
		points = append(points, p)
	}
	return points
}
