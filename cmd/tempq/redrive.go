package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/observe"
	"github.com/tempqueues/tempqueues/redrive"
)

func runRedrive(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("redrive", "--dlq Q --parking Q [--target Q] [--base 1s] [--cap 15m] [--max-attempts 5] [--rate N] [--dry-run] [--follow] [--json]", stdout)
	dlq := fs.String("dlq", "", "dead-letter queue to replay, by name or URL (required)")
	parking := fs.String("parking", "", "queue for messages past --max-attempts, by name or URL (required)")
	target := fs.String("target", "", "queue to replay to (default: the dead-letter queue's only source queue)")
	base := fs.Duration("base", time.Second, "backoff base: replay n waits random(0, min(cap, base*2^(n-1)))")
	cpt := fs.Duration("cap", 15*time.Minute, "backoff cap; above 900s the message waits on the dead-letter queue")
	maxAttempts := fs.Int("max-attempts", 5, "replays before a message is parked")
	rate := fs.Float64("rate", 0, "messages per second at most (0: no limit)")
	dryRun := fs.Bool("dry-run", false, "report what would be done, change nothing")
	follow := fs.Bool("follow", false, "keep replaying messages as they arrive, until Ctrl-C (default: drain once)")
	visibility := fs.Duration("visibility", 30*time.Second, "how long a message stays hidden while replayed, or after a failure")
	asJSON := fs.Bool("json", false, "print JSON lines: one per message, then the report")
	server := serverFlags(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	if err := noArgs(fs); err != nil {
		return err
	}
	if *dryRun && *follow {
		return usageError("--dry-run drains once; it cannot --follow")
	}
	if *maxAttempts < 1 {
		return usageError("--max-attempts must be at least 1")
	}
	env, err := openSQS(ctx, server, stderr)
	if err != nil {
		return err
	}
	defer env.Close()
	dlqURL, err := resolveQueue(ctx, env.Client, "dlq", *dlq)
	if err != nil {
		return err
	}
	parkingURL, err := resolveQueue(ctx, env.Client, "parking", *parking)
	if err != nil {
		return err
	}
	targetURL := ""
	if *target != "" {
		if targetURL, err = resolveQueue(ctx, env.Client, "target", *target); err != nil {
			return err
		}
	}
	var (
		evErr error
		tally tally
	)
	r, err := redrive.New(env.Client, dlqURL, func(o *redrive.Options) {
		o.Target, o.ParkingQueue = targetURL, parkingURL
		o.Logger = server.logger(stderr)
		o.BackoffBase, o.BackoffCap, o.MaxAttempts = *base, *cpt, *maxAttempts
		o.RateLimit, o.DryRun, o.VisibilityTimeout = *rate, *dryRun, *visibility
		o.Observer = observe.Func(func(_ context.Context, e observe.Event) func(*types.Message, error) {
			if e.Kind != observe.Redriven {
				return nil
			}
			tally.add(e)
			if err := printEvent(stdout, e, *dryRun, *asJSON); err != nil && evErr == nil {
				evErr = err
			}
			return nil
		})
	})
	if err != nil {
		return flagError(err, map[string]string{
			"dlqURL": "--dlq", "ParkingQueue": "--parking", "Target": "--target",
			"BackoffBase/BackoffCap": "--base/--cap", "MaxAttempts": "--max-attempts",
			"RateLimit": "--rate", "VisibilityTimeout": "--visibility",
		})
	}
	resolved, err := r.Target(ctx)
	if err != nil {
		if *asJSON {
			_ = printReport(stdout, redrive.Report{}, passInfo{dlq: dlqURL, dryRun: *dryRun}, true)
		}
		return targetError(ctx, env.Client, dlqURL, err)
	}
	if !*asJSON {
		mode := "draining"
		switch {
		case *dryRun:
			mode = "dry run of"
		case *follow:
			mode = "following"
		}
		fmt.Fprintf(stdout, "%s %s -> %s (parking %s, %d attempts, base %v, cap %v)\n", mode, queueNameOf(dlqURL), queueNameOf(resolved), queueNameOf(parkingURL), *maxAttempts, *base, *cpt)
	}
	var rep redrive.Report
	start := time.Now()
	if *follow {
		rep, err = r.Run(ctx)
	} else {
		rep, err = r.Drain(ctx)
	}
	pass := passInfo{dlq: dlqURL, target: resolved, dryRun: *dryRun, took: time.Since(start), tally: tally}
	if perr := printReport(stdout, rep, pass, *asJSON); perr != nil && err == nil {
		err = perr
	}
	if err == nil {
		err = evErr
	}
	err = targetError(ctx, env.Client, dlqURL, err)
	if errors.Is(err, context.Canceled) {
		return nil // interrupted: the report says how far it got
	}
	if err != nil {
		return err
	}
	if rep.Failed > 0 {
		return fmt.Errorf("%d messages could not be handled and stay on the dead-letter queue; first error: %v", rep.Failed, rep.Errors[0])
	}
	return nil
}

// tally counts what the report of a pass says beyond redrive.Report,
// from the events of the pass.
type tally struct {
	noRoom int // parked without room for the attempt attribute
	errors int // events with an error: failed actions and failed deletes
}

func (t *tally) add(e observe.Event) {
	d, _ := e.Detail.(redrive.Detail)
	if e.Reason == "park" && errors.Is(d.Cause, redrive.ErrNoRoom) {
		t.noRoom++
	}
	if e.Err != nil {
		t.errors++
	}
}

func printEvent(w io.Writer, e observe.Event, dryRun, asJSON bool) error {
	d, _ := e.Detail.(redrive.Detail)
	var id string
	if e.Message != nil {
		id = aws.ToString(e.Message.MessageId)
	}
	if asJSON {
		v := map[string]any{"type": "event", "action": e.Reason, "message_id": id, "attempt": d.Attempt, "dry_run": dryRun}
		if e.RequestID != "" {
			v["request_id"] = e.RequestID
		}
		if d.To != "" {
			v["queue"] = d.To
		}
		if e.Reason != "park" {
			v["delay_seconds"] = e.Duration.Seconds()
		}
		if !d.Due.IsZero() {
			v["due"] = d.Due.UTC()
		}
		if d.Cause != nil {
			v["reason"] = d.Cause.Error()
		}
		if e.Err != nil {
			v["error"] = e.Err.Error()
		}
		return writeJSON(w, v)
	}
	var detail string
	switch e.Reason {
	case "replay":
		detail = fmt.Sprintf("attempt %d, delay %v -> %s", d.Attempt, e.Duration, queueNameOf(d.To))
	case "schedule":
		detail = fmt.Sprintf("attempt %d, delay %v: waits on the dead-letter queue until %s", d.Attempt, e.Duration, d.Due.Format(time.RFC3339))
	case "wait":
		detail = fmt.Sprintf("attempt %d due %s, %v left", d.Attempt, d.Due.Format(time.RFC3339), e.Duration.Round(time.Second))
	case "park":
		detail = fmt.Sprintf("after %d replays -> %s: %v", d.Attempt, queueNameOf(d.To), d.Cause)
	}
	prefix := ""
	if dryRun {
		prefix = "(dry run) "
	}
	line := fmt.Sprintf("%s%-8s %s", prefix, e.Reason, id)
	if e.RequestID != "" {
		line += " request " + e.RequestID
	}
	line += ": " + detail
	if e.Err != nil {
		line += "; FAILED: " + e.Err.Error()
	}
	_, err := fmt.Fprintln(w, line)
	return err
}

// passInfo is what the command knows of a pass besides its report.
type passInfo struct {
	dlq, target string
	dryRun      bool
	took        time.Duration
	tally       tally
}

func printReport(w io.Writer, rep redrive.Report, pass passInfo, asJSON bool) error {
	// Failed actions and failed deletes after a send are the events with an
	// error; the failed actions are counted in the report.
	deleteErrors := max(pass.tally.errors-rep.Failed, 0)
	if asJSON {
		errs := make([]string, len(rep.Errors))
		for i, e := range rep.Errors {
			errs[i] = e.Error()
		}
		return writeJSON(w, map[string]any{
			"type": "report", "dead_letter_queue": pass.dlq, "target": pass.target, "dry_run": pass.dryRun,
			"received": rep.Received, "replayed": rep.Replayed, "scheduled": rep.Scheduled, "waiting": rep.Waiting,
			"parked": rep.Parked, "no_room": pass.tally.noRoom, "failed": rep.Failed, "delete_errors": deleteErrors,
			"errors": errs, "duration_seconds": pass.took.Seconds(),
		})
	}
	verb := ""
	if pass.dryRun {
		verb = "dry run, would have: "
	}
	_, err := fmt.Fprintf(w, "%d messages: %sreplayed %d, scheduled %d, waiting %d, parked %d (%d without room for the attempt attribute), failed %d, in %v\n",
		rep.Received, verb, rep.Replayed, rep.Scheduled, rep.Waiting, rep.Parked, pass.tally.noRoom, rep.Failed, pass.took.Round(time.Millisecond))
	return err
}

// targetError words redrive's "set the target" for the command line: the
// flag is --target. Several source queues are listed.
func targetError(ctx context.Context, client *sqs.Client, dlqURL string, err error) error {
	switch {
	case errors.Is(err, redrive.ErrNoSource):
		return usageError("no queue names %s as its dead-letter queue: pass --target QUEUE", queueNameOf(dlqURL))
	case errors.Is(err, redrive.ErrAmbiguousSource):
		var names []string
		out, lerr := client.ListDeadLetterSourceQueues(ctx, &sqs.ListDeadLetterSourceQueuesInput{QueueUrl: aws.String(dlqURL)})
		if lerr == nil {
			for _, u := range out.QueueUrls {
				names = append(names, queueNameOf(u))
			}
		}
		return usageError("%s is the dead-letter queue of several queues (%s): pass --target QUEUE", queueNameOf(dlqURL), strings.Join(names, ", "))
	}
	return err
}
