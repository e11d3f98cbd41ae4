package main

import (
	"context"
	"fmt"
	"io"
	"path"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/tempqueues/tempqueues/internal/heartbeat"
	"github.com/tempqueues/tempqueues/internal/wire"
	"github.com/tempqueues/tempqueues/reaper"
	"github.com/tempqueues/tempqueues/sqsapi"
)

// plural returns "1 queue" or "n queues".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

func runQueues(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("queues", "[--prefix "+sqsapi.DefaultQueuePrefix+"] [--json]", stdout)
	prefix := prefixFlag(fs)
	asJSON := fs.Bool("json", false, "print one JSON object per queue, then one with the fleet's figures")
	s, closeEnv, err := sweeperCommand(ctx, fs, args, stderr, prefix, func(*reaper.SweeperOptions) {})
	if err != nil {
		return err
	}
	defer closeEnv()
	qs, err := s.Queues(ctx)
	if err != nil {
		return err
	}
	now := time.Now()
	if *asJSON {
		for _, q := range qs {
			v := map[string]any{
				"queue_url": q.QueueURL, "name": path.Base(q.QueueURL), "verdict": q.Verdict,
				"requester_host_queue": q.RequesterHostQueue, "retention_seconds": int64(q.Retention / time.Second),
			}
			if !q.Heartbeat.IsZero() {
				v["heartbeat"] = q.Heartbeat.UTC()
				v["heartbeat_age_seconds"] = now.Sub(q.Heartbeat).Seconds()
			}
			if q.Err != nil {
				v["error"] = q.Err.Error()
			}
			if err := writeJSON(stdout, v); err != nil {
				return err
			}
		}
		return writeJSON(stdout, map[string]any{"fleet": fleetFigures(qs, now)})
	}
	if len(qs) == 0 {
		fmt.Fprintf(stdout, "no queues with prefix %q\n", *prefix)
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tHEARTBEAT AGE\tRETENTION\tVERDICT")
	counts := map[reaper.Verdict]int{}
	for _, q := range qs {
		counts[q.Verdict]++
		age, retention := "-", "-"
		if !q.Heartbeat.IsZero() {
			age = now.Sub(q.Heartbeat).Round(time.Second).String()
		}
		if q.Retention > 0 {
			retention = q.Retention.String()
		}
		verdict := string(q.Verdict)
		switch {
		case q.Verdict == reaper.VerdictIdle && !q.RequesterHostQueue:
			verdict += " (swept only when empty)"
		case q.Err != nil:
			verdict += ": " + q.Err.Error()
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", path.Base(q.QueueURL), age, retention, verdict)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	// Only queues with the prefix are listed: the count says so, lest
	// "0 not temporary" read as a statement on the account's other queues.
	fmt.Fprintf(stdout, "%s with prefix %q: %d live, %d idle, %d without heartbeat tags, %d other\n", plural(len(qs), "queue"), *prefix,
		counts[reaper.VerdictLive], counts[reaper.VerdictIdle], counts[reaper.VerdictNotTemporary],
		len(qs)-counts[reaper.VerdictLive]-counts[reaper.VerdictIdle]-counts[reaper.VerdictNotTemporary])
	if f := fleetFigures(qs, now); f.Temporary > 0 {
		fmt.Fprintf(stdout, "heartbeat age p50 %.0fs, p99 %.0fs, max %.0fs (p99 %.0f%% of retention); tagging about %.1f calls/s of the account's %d (recommended retention %v)\n",
			f.AgeSeconds.P50, f.AgeSeconds.P99, f.AgeSeconds.Max, 100*f.AgeOfRetention.P99, f.Tagging.Total, int(f.Tagging.Quota),
			time.Duration(f.RecommendedRetentionSeconds)*time.Second)
	}
	return nil
}

// sweepPeriod is the reaper's default sweep period, which the capacity
// model (heartbeat.Need; docs/capacity.md) assumes.
const sweepPeriod = 5 * time.Minute

type percentiles struct {
	P50 float64 `json:"p50"`
	P90 float64 `json:"p90"`
	P99 float64 `json:"p99"`
	Max float64 `json:"max"`
}

// fleet are the figures of a fleet an operator needs to see whether it
// fits the account's tagging quota.
type fleet struct {
	Queues    int `json:"queues"`
	Temporary int `json:"temporary"` // with a RetentionTag
	Live      int `json:"live"`
	// AgeSeconds and AgeOfRetention are the heartbeat ages of the live
	// queues, in seconds and as a share of each queue's retention.
	AgeSeconds     percentiles `json:"heartbeat_age_seconds"`
	AgeOfRetention percentiles `json:"heartbeat_age_of_retention"`
	Tagging        struct {
		Heartbeats float64 `json:"heartbeats"`
		Sweeps     float64 `json:"sweeps"`
		Total      float64 `json:"total"`
		Quota      float64 `json:"quota"`
	} `json:"tagging_per_second"`
	// RecommendedRetentionSeconds is the shortest retention at which the
	// fleet's heartbeats and sweeps fit 80% of the quota (at least the
	// default 300 s).
	RecommendedRetentionSeconds int64 `json:"recommended_retention_seconds"`
}

func fleetFigures(qs []reaper.QueueStatus, now time.Time) fleet {
	var f fleet
	var ages, shares []float64
	f.Queues = len(qs)
	for _, q := range qs {
		if q.Retention <= 0 {
			continue
		}
		f.Temporary++
		if q.Verdict != reaper.VerdictLive {
			continue
		}
		f.Live++
		age := now.Sub(q.Heartbeat)
		ages = append(ages, age.Seconds())
		shares = append(shares, age.Seconds()/q.Retention.Seconds())
		f.Tagging.Heartbeats += 1 / (q.Retention.Seconds() * heartbeat.DefaultFraction)
	}
	f.AgeSeconds, f.AgeOfRetention = percentilesOf(ages), percentilesOf(shares)
	f.Tagging.Sweeps = heartbeat.SweepRate(f.Temporary, sweepPeriod)
	f.Tagging.Total = f.Tagging.Heartbeats + f.Tagging.Sweeps
	f.Tagging.Quota = heartbeat.TaggingQuota
	need := heartbeat.Need(f.Temporary, sweepPeriod)
	need = (need + time.Minute - 1).Truncate(time.Minute) // whole minutes, rounded up
	f.RecommendedRetentionSeconds = int64(max(need, wire.DefaultIdleQueueRetention) / time.Second)
	return f
}

func percentilesOf(v []float64) percentiles {
	if len(v) == 0 {
		return percentiles{}
	}
	slices.Sort(v)
	at := func(p float64) float64 { return v[min(len(v)-1, int(p*float64(len(v))))] }
	return percentiles{P50: at(0.50), P90: at(0.90), P99: at(0.99), Max: v[len(v)-1]}
}
