package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/tempqueues/tempqueues/reaper"
	"github.com/tempqueues/tempqueues/sqsapi"
)

func runQueues(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("queues", "[--prefix "+sqsapi.DefaultQueuePrefix+"] [--json]", stdout)
	prefix := prefixFlag(fs)
	asJSON := fs.Bool("json", false, "print one JSON object per queue")
	s, closeEnv, err := sweeperCommand(ctx, fs, args, stderr, prefix, func(*reaper.Options) {})
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
				"queue_url": q.QueueURL, "name": q.Name, "verdict": q.Verdict,
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
		return nil
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
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", q.Name, age, retention, verdict)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%d queues: %d live, %d idle, %d not temporary, %d other\n", len(qs), counts[reaper.VerdictLive], counts[reaper.VerdictIdle],
		counts[reaper.VerdictNotTemporary], len(qs)-counts[reaper.VerdictLive]-counts[reaper.VerdictIdle]-counts[reaper.VerdictNotTemporary])
	return nil
}
