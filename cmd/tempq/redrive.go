package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/tempqueues/tempqueues/redrive"
)

func runRedrive(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("redrive", "--dlq Q --parking Q [--target Q] [--base 1s] [--cap 15m] [--max-attempts 5] [--rate N] [--dry-run] [--follow] [--json]", stdout)
	dlq := fs.String("dlq", "", "dead-letter queue to replay, by name or URL (required)")
	parking := fs.String("parking", "", "queue for messages past --max-attempts, by name or URL (required)")
	target := fs.String("target", "", "queue to replay to (default: the dead-letter queue's only source queue)")
	base := fs.Duration("base", redrive.DefaultBackoffBase, "backoff base: replay n waits random(0, min(cap, base*2^(n-1)))")
	cpt := fs.Duration("cap", redrive.DefaultBackoffCap, "backoff cap; above 900s the message waits on the dead-letter queue")
	maxAttempts := fs.Int("max-attempts", redrive.DefaultMaxAttempts, "replays before a message is parked")
	rate := fs.Float64("rate", 0, "messages per second at most (0: no limit)")
	dryRun := fs.Bool("dry-run", false, "report what would be done, change nothing")
	follow := fs.Bool("follow", false, "keep replaying messages as they arrive, until Ctrl-C (default: drain once)")
	visibility := fs.Duration("visibility", redrive.DefaultVisibilityTimeout, "how long a message stays hidden while replayed, or after a failure")
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
	var evErr error
	r, err := redrive.New(env.Client, dlqURL, func(o *redrive.Options) {
		o.Target, o.ParkingQueue = targetURL, parkingURL
		o.Logger = server.logger(stderr)
		o.BackoffBase, o.BackoffCap, o.MaxAttempts = *base, *cpt, *maxAttempts
		o.RateLimit, o.DryRun, o.VisibilityTimeout = *rate, *dryRun, *visibility
		o.OnEvent = func(ev redrive.Event) {
			if err := printEvent(stdout, ev, *asJSON); err != nil && evErr == nil {
				evErr = err
			}
		}
	})
	if err != nil {
		return flagError(err, map[string]string{
			"dlqURL": "--dlq", "ParkingQueue": "--parking", "Target": "--target",
			"BackoffBase/BackoffCap": "--base/--cap", "MaxAttempts": "--max-attempts",
			"RateLimit": "--rate", "VisibilityTimeout": "--visibility",
		})
	}
	if !*asJSON {
		t, err := r.Target(ctx)
		if err != nil {
			return targetError(err)
		}
		mode := "draining"
		switch {
		case *dryRun:
			mode = "dry run of"
		case *follow:
			mode = "following"
		}
		fmt.Fprintf(stdout, "%s %s -> %s (parking %s, %d attempts, base %v, cap %v)\n", mode, queueNameOf(dlqURL), queueNameOf(t), queueNameOf(parkingURL), *maxAttempts, *base, *cpt)
	}
	var rep redrive.Report
	if *follow {
		rep, err = r.Run(ctx)
	} else {
		rep, err = r.Drain(ctx)
	}
	if perr := printReport(stdout, rep, *asJSON); perr != nil && err == nil {
		err = perr
	}
	if err == nil {
		err = evErr
	}
	err = targetError(err)
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

func printEvent(w io.Writer, ev redrive.Event, asJSON bool) error {
	if asJSON {
		v := map[string]any{"type": "event", "action": ev.Action, "message_id": ev.MessageID, "attempt": ev.Attempt, "dry_run": ev.DryRun}
		if ev.RequestID != "" {
			v["request_id"] = ev.RequestID
		}
		if ev.Queue != "" {
			v["queue"] = ev.Queue
		}
		if ev.Action != redrive.ActionPark {
			v["delay_seconds"] = ev.Delay.Seconds()
		}
		if !ev.Due.IsZero() {
			v["due"] = ev.Due.UTC()
		}
		if ev.Reason != nil {
			v["reason"] = ev.Reason.Error()
		}
		if ev.Err != nil {
			v["error"] = ev.Err.Error()
		}
		return writeJSON(w, v)
	}
	var detail string
	switch ev.Action {
	case redrive.ActionReplay:
		detail = fmt.Sprintf("attempt %d, delay %v -> %s", ev.Attempt, ev.Delay, queueNameOf(ev.Queue))
	case redrive.ActionSchedule:
		detail = fmt.Sprintf("attempt %d, delay %v: waits on the dead-letter queue until %s", ev.Attempt, ev.Delay, ev.Due.Format(time.RFC3339))
	case redrive.ActionWait:
		detail = fmt.Sprintf("attempt %d due %s, %v left", ev.Attempt, ev.Due.Format(time.RFC3339), ev.Delay.Round(time.Second))
	case redrive.ActionPark:
		detail = fmt.Sprintf("after %d replays -> %s: %v", ev.Attempt, queueNameOf(ev.Queue), ev.Reason)
	}
	prefix := ""
	if ev.DryRun {
		prefix = "(dry run) "
	}
	line := fmt.Sprintf("%s%-8s %s", prefix, ev.Action, ev.MessageID)
	if ev.RequestID != "" {
		line += " request " + ev.RequestID
	}
	line += ": " + detail
	if ev.Err != nil {
		line += "; FAILED: " + ev.Err.Error()
	}
	_, err := fmt.Fprintln(w, line)
	return err
}

func printReport(w io.Writer, rep redrive.Report, asJSON bool) error {
	if asJSON {
		errs := make([]string, len(rep.Errors))
		for i, e := range rep.Errors {
			errs[i] = e.Error()
		}
		return writeJSON(w, map[string]any{
			"type": "report", "dead_letter_queue": rep.DeadLetterQueue, "target": rep.Target, "dry_run": rep.DryRun,
			"received": rep.Received, "replayed": rep.Replayed, "scheduled": rep.Scheduled, "waiting": rep.Waiting,
			"parked": rep.Parked, "no_room": rep.NoRoom, "failed": rep.Failed, "delete_errors": rep.DeleteErrors,
			"errors": errs, "duration_seconds": rep.Duration.Seconds(),
		})
	}
	verb := ""
	if rep.DryRun {
		verb = "dry run, would have: "
	}
	_, err := fmt.Fprintf(w, "%d messages: %sreplayed %d, scheduled %d, waiting %d, parked %d (%d without room for the attempt attribute), failed %d, in %v\n",
		rep.Received, verb, rep.Replayed, rep.Scheduled, rep.Waiting, rep.Parked, rep.NoRoom, rep.Failed, rep.Duration.Round(time.Millisecond))
	return err
}

// targetError words redrive's "set the target" for the command line: the
// flag is --target.
func targetError(err error) error {
	var se *redrive.SourceError
	if !errors.As(err, &se) {
		return err
	}
	if len(se.Sources) == 0 {
		return usageError("no queue names %s as its dead-letter queue: pass --target QUEUE", queueNameOf(se.DeadLetterQueue))
	}
	return usageError("%s is the dead-letter queue of %d queues (%s): pass --target QUEUE", queueNameOf(se.DeadLetterQueue), len(se.Sources), strings.Join(se.Sources, ", "))
}
