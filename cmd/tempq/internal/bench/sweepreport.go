package bench

import (
	"fmt"
	"io"
	"slices"
	"strings"
)

// WriteSweepTable writes a sweep's report as Markdown: the front (where
// tempqueues stands against the best other contender at every setting and
// concurrency), a summary per setting, then every setting's results.
func WriteSweepTable(w io.Writer, r *SweepReport) error {
	var b strings.Builder
	commit, goVersion := r.Commit, r.GoVersion
	if commit == "" {
		commit = "unknown"
	}
	if goVersion == "" {
		goVersion = "Go version unknown"
	}
	names := make([]string, len(r.Settings))
	for i, s := range r.Settings {
		names[i] = s.Name
	}
	fmt.Fprintf(&b, "sweep: commit %s; %s; %d rounds of %v windows%s per setting, contender and concurrency; responders' concurrency %d; took %v\n\n",
		commit, goVersion, r.Rounds, r.Window, warmUp(r.WarmUp), r.ServerConcurrency, r.Elapsed.Round(1e9))
	fmt.Fprintf(&b, "settings (latency added to every call; MEDIAN/P99 is lognormal): %s; callers: %s; contenders: %s\n",
		strings.Join(names, ", "), ints(r.Concurrency), strings.Join(r.Contenders, ", "))
	if !slices.Contains(r.Contenders, QueuePerRequest) {
		b.WriteString("\nqueue-per-request is not in the sweep: it waits 1 s per request for its new reply queue (CreateQueue's documented wait), far off the front at every point.\n")
	}

	b.WriteString("\n## The front\n\n")
	fmt.Fprintf(&b, "tempqueues with default options against the best of the other contenders at each point. It is on the front where it meets every rule: "+
		"p50 <= %.2fx the lowest other p50; RPC/s >= %.2fx the highest; API calls/RPC <= the fewest (at 1 caller a tie within 2%%); p99 <= %.2fx the lowest; "+
		"CPU/RPC <= %.2fx parked-receivers' at every point and <= %.2fx static-reply-queue's at %d callers (CPU rules only where the server is not in the figure); no errors. "+
		"Ratios are judged at the two decimals printed; a rule missed is marked **no**.\n\n",
		limitP50, limitThroughput, limitP99, limitCPUParked, limitCPUStatic, cpuStaticCallers)
	b.WriteString("| setting | callers | p50 ms: tempqueues / lowest other | RPC/s: tempqueues / highest other | API calls/RPC: tempqueues / fewest other | p99 ms: tempqueues / lowest other | CPU µs/RPC: tempqueues / parked-receivers | CPU µs/RPC at 64: tempqueues / static-reply-queue | on the front |\n")
	b.WriteString("|---|--:|---|---|---|---|---|---|---|\n")
	for _, s := range r.Settings {
		for _, p := range s.Front {
			verdict := "yes"
			if !p.OnFront {
				verdict = "**no**: " + strings.Join(p.Missed(), ", ")
			}
			fmt.Fprintf(&b, "| %s | %d | %s | %s | %s | %s | %s | %s | %s |\n", s.Name, p.Callers,
				frontCell(p.Check(RuleP50), "%.2f"), frontCell(p.Check(RuleThroughput), "%.0f"),
				frontCell(p.Check(RuleCalls), "%.2f"), frontCell(p.Check(RuleP99), "%.2f"),
				frontCell(p.Check(RuleCPUParked), "%.0f"), frontCell(p.Check(RuleCPUStatic), "%.0f"), verdict)
		}
	}
	b.WriteString("\n| setting | points on the front | missed |\n|---|--:|---|\n")
	for _, s := range r.Settings {
		on := 0
		var missed []string
		for _, p := range s.Front {
			if p.OnFront {
				on++
			} else {
				missed = append(missed, fmt.Sprintf("%d callers (%s)", p.Callers, strings.Join(p.Missed(), ", ")))
			}
		}
		m := "none"
		if len(missed) > 0 {
			m = strings.Join(missed, "; ")
		}
		fmt.Fprintf(&b, "| %s | %d of %d | %s |\n", s.Name, on, len(s.Front), m)
	}

	for _, s := range r.Settings {
		fmt.Fprintf(&b, "\n## Setting %s: %s\n\nserver: %s\n\n", s.Name, s.Setting.Describe(), s.Report.Server)
		writeResults(&b, s.Report)
		writeNotes(&b, s.Report)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// frontCell shows a check: both figures, the other's contender, the ratio,
// and **no** when the rule is missed; n/a when not checked.
func frontCell(c *FrontCheck, format string) string {
	if c == nil {
		return "n/a"
	}
	s := fmt.Sprintf(format+" / "+format+" %s: %.2fx", c.TempQueues, c.Other, c.Against, c.Ratio)
	if !c.Met {
		s += " **no**"
	}
	return s
}

func ints(v []int) string {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = fmt.Sprint(n)
	}
	return strings.Join(s, ", ")
}
