package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/backlog"
	"github.com/tempqueues/tempqueues/observe"
)

func runBacklog(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("backlog", "--queue Q --workers N --latency D --processing D [--concurrency 1] [--in-flight] [--delayed] [--min N] [--max N] [--watch D] [--json]", stdout)
	queue := fs.String("queue", "", "queue of requests, by name or URL (required)")
	workers := fs.Int("workers", 1, "running workers (instances, tasks, pods)")
	concurrency := fs.Int("concurrency", 1, "messages one worker handles at once (a responder's MaxConcurrency)")
	latency := fs.Duration("latency", 0, "acceptable latency: the longest a message should wait")
	processing := fs.Duration("processing", 0, "average processing time of one message (responder.Stats.AverageProcessingTime)")
	inFlight := fs.Bool("in-flight", false, "count in-flight messages too (KEDA's default)")
	delayed := fs.Bool("delayed", false, "count delayed messages too")
	minWorkers := fs.Int("min", 0, "fewest workers to desire")
	maxWorkers := fs.Int("max", 0, "most workers to desire (0: no limit)")
	watch := fs.Duration("watch", 0, "measure again at this interval (at least 1s) until Ctrl-C")
	asJSON := fs.Bool("json", false, "print the figures as JSON (one line per measurement)")
	server := serverFlags(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	if err := noArgs(fs); err != nil {
		return err
	}
	if *watch != 0 && *watch < time.Second {
		return usageError("--watch must be at least 1s")
	}
	optFn := func(o *backlog.Options) {
		o.Workers, o.MaxConcurrency = *workers, *concurrency
		o.AcceptableLatency, o.ProcessingTime = *latency, *processing
		o.IncludeInFlight, o.IncludeDelayed = *inFlight, *delayed
		o.MinWorkers, o.MaxWorkers = *minWorkers, *maxWorkers
	}
	backlogFlags := map[string]string{
		"Workers": "--workers", "MaxConcurrency": "--concurrency", "AcceptableLatency/ProcessingTime": "--latency/--processing",
		"MinWorkers/MaxWorkers": "--min/--max", "MinWorkers": "--min",
	}
	if _, err := backlog.Compute(backlog.Counts{}, optFn); err != nil {
		return flagError(err, backlogFlags)
	}
	env, err := openSQS(ctx, server, stderr)
	if err != nil {
		return err
	}
	defer env.Close()
	queueURL, err := resolveQueue(ctx, env.Client, "queue", *queue)
	if err != nil {
		return err
	}
	counted := "visible"
	if *inFlight {
		counted += "+in-flight"
	}
	if *delayed {
		counted += "+delayed"
	}
	show := func(f backlog.Figures) error {
		hasTarget := f.TargetBacklogPerWorker > 0
		if *asJSON {
			return writeJSON(stdout, struct {
				QueueURL string `json:"queue_url"`
				backlog.Figures
				Counted   string `json:"counted"`
				HasTarget bool   `json:"has_target"`
			}{queueURL, f, counted, hasTarget})
		}
		target, desired := "unknown (pass --latency and --processing)", fmt.Sprint(f.DesiredWorkers)
		if hasTarget {
			target = fmt.Sprintf("%.1f  (%d x %v / %v)", f.TargetBacklogPerWorker, *concurrency, *latency, *processing)
		} else {
			desired += " (no target: the running workers, at least 1 with a backlog)"
		}
		perWorker := fmt.Sprintf("%.1f", f.BacklogPerWorker)
		if f.Workers == 0 {
			perWorker = "- (no workers running)"
		}
		_, err := fmt.Fprintf(stdout, "queue             %s\nmessages          %d %s  (visible %d, in flight %d, delayed %d)\nworkers           %d\nbacklog/worker    %s\ntarget/worker     %s\ndesired workers   %s\n",
			queueNameOf(queueURL), f.Messages, counted, f.Visible, f.InFlight, f.Delayed, f.Workers, perWorker, target, desired)
		return err
	}
	if *watch == 0 {
		f, err := backlog.Measure(ctx, env.Client, queueURL, optFn)
		if err != nil {
			return err
		}
		return show(f)
	}
	var showErr error
	m, err := backlog.NewMonitor(env.Client, queueURL, func(o *backlog.MonitorOptions) {
		o.Inputs = func() backlog.Options {
			var f backlog.Options
			optFn(&f)
			return f
		}
		o.Logger = server.logger(stderr)
		o.Period = *watch
		o.Observer = observe.Func(func(_ context.Context, e observe.Event) func(*types.Message, error) {
			f, err := e.Detail.(backlog.Figures), e.Err
			if err != nil {
				// The monitor measures again at the next period: an
				// error here is reported, not fatal (so it has no code).
				if *asJSON {
					_ = writeJSON(stderr, map[string]string{"error": err.Error()})
				} else {
					fmt.Fprintf(stderr, "tempq backlog: %v\n", err)
				}
				return nil
			}
			if !*asJSON {
				fmt.Fprintf(stdout, "--- %s\n", time.Now().Format(time.RFC3339))
			}
			if err := show(f); err != nil && showErr == nil {
				showErr = err
			}
			return nil
		})
	})
	if err != nil {
		return flagError(err, backlogFlags)
	}
	if err := m.Run(ctx); err != nil {
		return err
	}
	return showErr
}
