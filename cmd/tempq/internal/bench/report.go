package bench

import (
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strings"
	"time"
)

// Target is one of the project's performance targets with the figure the
// run measured for it.
type Target struct {
	Name     string  `json:"name"`
	Measured float64 `json:"measured"`
	Limit    float64 `json:"limit"`
	Unit     string  `json:"unit"`
	AtMost   bool    `json:"at_most"` // the figure must be at most Limit; else at least
	// Errors fail the target whatever the figure (a stop that returned an
	// error has not done its job, however fast).
	Errors int  `json:"errors,omitempty"`
	Met    bool `json:"met"`
}

// Targets checks the report against the project's performance targets,
// listed with their limits in BENCHMARKS.md's Targets section. Targets
// whose figures were not measured are left out, and so are all of them in
// a run with payloads: they are set for the default tiny body.
func Targets(r *Report) []Target {
	if len(r.Payloads) > 0 {
		return nil
	}
	var ts []Target
	add := func(name string, measured, limit float64, unit string, atMost bool) {
		// Judged at the two decimals printed: 6.000001 calls is 6.00.
		m := math.Round(measured*100) / 100
		met := m >= limit
		if atMost {
			met = m <= limit
		}
		ts = append(ts, Target{Name: name, Measured: measured, Limit: limit, Unit: unit, AtMost: atMost, Met: met})
	}
	lo, hi := 0, 0
	for _, c := range r.Concurrency {
		if lo == 0 || c < lo {
			lo = c
		}
		hi = max(hi, c)
	}
	tq := func(c int) *Result { return r.Find(TempQueues, c) }
	if hi == lo {
		hi = 0 // the steady-load targets need a second concurrency level
	}
	if t := tq(hi); t != nil && t.RPCs > 0 {
		add(fmt.Sprintf("API calls per RPC at %d callers", hi), t.APICallsPerRPC, 1.0, "calls", true)
	}
	if t := tq(lo); t != nil && t.RPCs > 0 && lo == 1 {
		add("API calls per RPC one at a time", t.APICallsPerRPC, 6, "calls", true)
		if f := r.Find(Floor, 1); f != nil && f.RPCs > 0 {
			add("p50 latency one at a time, x the floor", t.P50ms/f.P50ms, 1.15, "x", true)
		}
	}
	if t := tq(hi); t != nil && t.RPCs > 0 {
		if q := r.Find(QueuePerRequest, hi); q != nil && q.RPCPerSecond > 0 {
			add(fmt.Sprintf("throughput at %d callers, x queue-per-request", hi), t.RPCPerSecond/q.RPCPerSecond, 10, "x", false)
		}
		if s := r.Find(StaticReplyQueue, hi); s != nil && s.RPCPerSecond > 0 {
			add(fmt.Sprintf("throughput at %d callers, x static reply queue", hi), t.RPCPerSecond/s.RPCPerSecond, 1.5, "x", false)
		}
		// The target is about the client's work: a figure that includes
		// the server says nothing about it.
		if s := r.Find(StaticReplyQueue, hi); s != nil && !r.CPUIncludesServer && t.CPUMicrosPerRPC > 0 && s.CPUMicrosPerRPC > 0 {
			add(fmt.Sprintf("CPU per RPC at %d callers, x static reply queue", hi), t.CPUMicrosPerRPC/s.CPUMicrosPerRPC, 0.25, "x", true)
		}
	}
	if r.Idle != nil {
		add("idle requester API calls per hour", r.Idle.RequesterPerHour, 120, "calls/h", true)
	}
	for _, name := range StopComponents {
		if st := r.Stop[name]; st != nil {
			add(fmt.Sprintf("idle %s stops, slowest of %d, no error", stopLabel[name], len(st.Samples)), st.Max, ms(StopLimit), "ms", true)
			ts[len(ts)-1].Errors = st.Errors
			ts[len(ts)-1].Met = ts[len(ts)-1].Met && st.Errors == 0
		}
	}
	if r.BytesPerIdleVirtualQueue > 0 {
		add("bytes per idle virtual queue", r.BytesPerIdleVirtualQueue, 512, "B", true)
	}
	return ts
}

// WriteTable writes the results, the idle figures and the targets as
// Markdown tables.
func WriteTable(w io.Writer, r *Report) error {
	var b strings.Builder
	commit, goVersion := r.Commit, r.GoVersion
	if commit == "" {
		commit = "unknown"
	}
	if goVersion == "" {
		goVersion = "Go version unknown"
	}
	fmt.Fprintf(&b, "server: %s; commit %s; %s; %d rounds of %v windows%s per contender and concurrency; queue-per-request waits %v after CreateQueue\n",
		r.Server, commit, goVersion, r.Rounds, r.Window, warmUp(r.WarmUp), r.CreateWait)
	writeResults(&b, r)
	if r.Idle != nil {
		fmt.Fprintf(&b, "\nidle, measured over %v with every period divided by %d (stands for %v):\n\n",
			r.Idle.Window, r.Idle.Scale, r.Idle.Window*time.Duration(r.Idle.Scale))
		b.WriteString("| idle process | API calls/hour | calls in the window |\n|---|--:|---|\n")
		fmt.Fprintf(&b, "| requester (alone in its fleet: it also sweeps) | %.0f | %s |\n", r.Idle.RequesterPerHour, ops(r.Idle.RequesterCalls))
		fmt.Fprintf(&b, "| responder (one Serve, 20 s long polls) | %.0f | %s |\n", r.Idle.ResponderPerHour, ops(r.Idle.ResponderCalls))
	}
	if len(r.Stop) > 0 {
		writeStops(&b, r)
	}
	if r.BytesPerIdleVirtualQueue > 0 {
		fmt.Fprintf(&b, "\nheap per idle virtual queue: %.0f bytes\n", r.BytesPerIdleVirtualQueue)
	}
	if ts := Targets(r); len(ts) > 0 {
		b.WriteString("\n| target | measured | limit | met |\n|---|--:|--:|---|\n")
		for _, t := range ts {
			cmp := ">="
			if t.AtMost {
				cmp = "<="
			}
			met := "yes"
			if !t.Met {
				met = "**no**"
			}
			errs := ""
			if t.Errors > 0 {
				errs = fmt.Sprintf(", %d errors", t.Errors)
			}
			fmt.Fprintf(&b, "| %s | %.2f %s%s | %s %.2f | %s |\n", t.Name, t.Measured, t.Unit, errs, cmp, t.Limit, met)
		}
	}
	writeNotes(&b, r)
	_, err := io.WriteString(w, b.String())
	return err
}

// writeNotes writes the report's notes, if any.
func writeNotes(b *strings.Builder, r *Report) {
	if len(r.Notes) == 0 {
		return
	}
	b.WriteString("\nnotes:\n\n")
	for _, n := range r.Notes {
		b.WriteString("- " + n + "\n")
	}
}

// warmUp describes a window's warm-up, if any.
func warmUp(d time.Duration) string {
	if d <= 0 {
		return ""
	}
	return fmt.Sprintf(" (each after a %v warm-up)", d)
}

// writeResults writes what the figures hold and the table of results, a
// table per payload in a run with payloads.
func writeResults(b *strings.Builder, r *Report) {
	cpuHeader := "CPU µs/RPC"
	if r.CPUIncludesServer {
		cpuHeader = "CPU µs/RPC, server included"
		b.WriteString("CPU µs/RPC: user+system CPU time of the benchmark process per RPC, which includes the embedded server's\n")
	} else {
		b.WriteString("CPU µs/RPC: user+system CPU time of the benchmark process per RPC, requester and responder sides; the server's is not in it\n")
	}
	b.WriteString("billed requests: what SQS bills, one per API call and per started 64 KiB of message payload a call sends or receives; $ per million RPCs: billed requests x $0.40 per million; wire KiB: HTTP request and response bodies\n")
	if len(r.Payloads) == 0 {
		b.WriteString("\n")
		writeResultTable(b, r, "", cpuHeader)
		return
	}
	b.WriteString("S3 calls: the payload store's Put, Get and Delete calls (an in-memory S3 that waits as long per call as configured); S3 KiB: the bytes they put and got; S3 $: a PUT $5 and a GET $0.40 per million\n")
	for _, p := range r.Payloads {
		kind := "JSON text"
		if p.Kind == PayloadBinary {
			kind = fmt.Sprintf("%d random bytes in base64", p.Bytes)
		}
		how := "sent and echoed by every RPC"
		if p.replyOnly() {
			how = "the reply of every RPC, whose request is the tiny body"
		}
		fmt.Fprintf(b, "\n### payload %s: a body of %d bytes (%s), %s\n\n", p.Label(), p.BodyBytes(), kind, how)
		writeResultTable(b, r, p.Label(), cpuHeader)
	}
}

// writeResultTable writes the results with payload as a table.
func writeResultTable(b *strings.Builder, r *Report, payload, cpuHeader string) {
	// A run with payloads shows what its contenders' payload stores did.
	s3 := payload != ""
	if s3 {
		fmt.Fprintf(b, "| contender | callers | RPC/s | p50 ms | p99 ms | API calls/RPC | billed requests/RPC | S3 calls/RPC | $ per million RPCs | S3 $ per million RPCs | wire KiB/RPC | S3 KiB/RPC | %s | errors |\n", cpuHeader)
		b.WriteString("|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	} else {
		fmt.Fprintf(b, "| contender | callers | RPC/s | p50 ms | p99 ms | API calls/RPC | billed requests/RPC | $ per million RPCs | wire KiB/RPC | %s | errors |\n", cpuHeader)
		b.WriteString("|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	}
	var refusals []string
	for _, res := range r.Results {
		if res.Payload != payload {
			continue
		}
		if res.Refused != "" {
			empty := strings.Repeat(" |", 8)
			if s3 {
				empty = strings.Repeat(" |", 11)
			}
			fmt.Fprintf(b, "| %s | %d | %s |%s\n", res.Contender, res.Concurrency, overMax, empty)
			if why := res.Contender + ", " + overMax + ": " + res.Refused; !slices.Contains(refusals, why) {
				refusals = append(refusals, why)
			}
			continue
		}
		cpu := "n/a"
		if res.CPUMicrosPerRPC > 0 {
			cpu = fmt.Sprintf("%.0f", res.CPUMicrosPerRPC)
		}
		// A report saved before billed requests and bytes were counted
		// has neither.
		billed, wire := "n/a", "n/a"
		if res.BilledPerRPC > 0 || res.APICallsPerRPC == 0 {
			billed = fmt.Sprintf("%.2f", res.BilledPerRPC)
		}
		if res.WireBytesPerRPC > 0 || res.APICallsPerRPC == 0 {
			wire = fmt.Sprintf("%.1f", res.WireBytesPerRPC/1024)
		}
		if s3 {
			fmt.Fprintf(b, "| %s | %d | %.0f | %.2f | %.2f | %.2f | %s | %.2f | %.2f | %.2f | %s | %.1f | %s | %d |\n",
				res.Contender, res.Concurrency, res.RPCPerSecond, res.P50ms, res.P99ms, res.APICallsPerRPC, billed, res.S3CallsPerRPC,
				res.DollarsPerMillionRPC, res.S3DollarsPerMillionRPC, wire, res.S3BytesPerRPC/1024, cpu, res.Errors)
			continue
		}
		fmt.Fprintf(b, "| %s | %d | %.0f | %.2f | %.2f | %.2f | %s | %.2f | %s | %s | %d |\n",
			res.Contender, res.Concurrency, res.RPCPerSecond, res.P50ms, res.P99ms, res.APICallsPerRPC, billed, res.DollarsPerMillionRPC, wire, cpu, res.Errors)
	}
	if len(refusals) > 0 {
		b.WriteString("\n")
		for _, why := range refusals {
			fmt.Fprintf(b, "- %s\n", why)
		}
	}
}

// stopLabel names each idle client and its stop in the targets.
var stopLabel = map[string]string{
	StopRequester:         "requester: Close",
	StopVirtualQueue:      "virtualqueue.Client: Close",
	StopTempQueue:         "tempqueue.Client: Close",
	StopResponderShutdown: "responder: Shutdown",
	StopResponderCancel:   "responder: Serve's context cancelled",
}

// writeStops writes the stop times of the idle clients and the first error
// of each component that had one.
func writeStops(b *strings.Builder, r *Report) {
	fmt.Fprintf(b, "\nstopping idle clients (default options: 20 s long polls, sweeping on), each left alone %v before its stop, limit %v:\n\n", r.StopIdle, StopLimit)
	b.WriteString("| idle client | timed | stops | max ms | median ms | errors | API calls per stop |\n|---|---|--:|--:|--:|--:|---|\n")
	var firsts []string
	for _, name := range StopComponents {
		st := r.Stop[name]
		if st == nil {
			continue
		}
		fmt.Fprintf(b, "| %s | %s | %d | %.2f | %.2f | %d | %s |\n", name, stopCall[name], len(st.Samples), st.Max, st.Median, st.Errors, opsPer(st.Calls, len(st.Samples)))
		if st.FirstError != "" {
			firsts = append(firsts, fmt.Sprintf("first error of %s: %s\n", name, st.FirstError))
		}
	}
	if len(firsts) > 0 {
		b.WriteString("\n" + strings.Join(firsts, ""))
	}
}

// opsPer is ops with every count divided by n.
func opsPer(m map[string]int64, n int) string {
	if len(m) == 0 || n <= 0 {
		return "none"
	}
	keys := slices.Sorted(maps.Keys(m))
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %.3g", k, float64(m[k])/float64(n))
	}
	return strings.Join(parts, ", ")
}

func ops(m map[string]int64) string {
	if len(m) == 0 {
		return "none"
	}
	keys := slices.Sorted(maps.Keys(m))
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, m[k])
	}
	return strings.Join(parts, ", ")
}
