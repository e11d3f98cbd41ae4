package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/tempqueues/tempqueues/reaper"
	"github.com/tempqueues/tempqueues/sqsapi"
)

func runSweep(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("sweep", "[--prefix "+sqsapi.DefaultQueuePrefix+"] [--dry-run] [--json]", stderr)
	prefix := prefixFlag(fs)
	dryRun := fs.Bool("dry-run", false, "report the idle queues without deleting them")
	asJSON := fs.Bool("json", false, "print the sweep report as JSON")
	s, closeEnv, err := sweeperCommand(ctx, fs, args, prefix, func(o *reaper.Options) { o.DryRun = *dryRun })
	if err != nil {
		return err
	}
	defer closeEnv()
	rep, err := s.Sweep(ctx)
	if err != nil {
		return err
	}
	if *asJSON {
		errs := make([]string, len(rep.Errors))
		for i, e := range rep.Errors {
			errs[i] = e.Error()
		}
		if err := writeJSON(stdout, map[string]any{
			"dry_run": rep.DryRun, "listed": rep.Listed, "skipped": rep.Skipped, "candidates": rep.Candidates,
			"kept": rep.Kept, "not_temporary": rep.NotTemporary, "live": rep.Live, "future_heartbeat": rep.FutureHeartbeat,
			"not_empty": rep.NotEmpty, "deleted": nonNil(rep.Deleted), "vanished": rep.Vanished, "errors": errs, "calls": rep.Calls,
			"duration_seconds": rep.Duration.Seconds(),
		}); err != nil {
			return err
		}
	} else {
		verb := "deleted"
		if rep.DryRun {
			verb = "would delete"
		}
		for _, u := range rep.Deleted {
			fmt.Fprintf(stdout, "%s %s\n", verb, queueNameOf(u))
		}
		fmt.Fprintf(stdout, "%d queues listed, %d inspected: %s %d, kept %d (%d live, %d not temporary, %d not empty, %d heartbeat in the future), %d errors; %d calls in %v\n",
			rep.Listed, rep.Candidates, verb, len(rep.Deleted), rep.Kept, rep.Live, rep.NotTemporary, rep.NotEmpty, rep.FutureHeartbeat,
			len(rep.Errors), rep.Calls, rep.Duration.Round(time.Millisecond))
		for _, e := range rep.Errors {
			fmt.Fprintln(stderr, e)
		}
	}
	if len(rep.Errors) > 0 {
		return fmt.Errorf("%d queues could not be inspected or deleted", len(rep.Errors))
	}
	return nil
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// prefixFlag adds the --prefix flag of the sweeper commands to fs.
func prefixFlag(fs *flag.FlagSet) *string {
	return fs.String("prefix", sqsapi.DefaultQueuePrefix, "queue name prefix of the temporary queues")
}

// sweeperCommand adds the server flags to fs, parses args (no positional
// arguments), connects and returns a Sweeper for the prefix with opt
// applied, and the function that closes the connection.
func sweeperCommand(ctx context.Context, fs *flag.FlagSet, args []string, prefix *string, opt func(*reaper.Options)) (*reaper.Sweeper, func(), error) {
	server := serverFlags(fs)
	if err := parse(fs, args); err != nil {
		return nil, nil, err
	}
	if err := noArgs(fs); err != nil {
		return nil, nil, err
	}
	env, err := openSQS(ctx, server)
	if err != nil {
		return nil, nil, err
	}
	s, err := reaper.NewSweeper(env.Client, func(o *reaper.Options) {
		o.Prefix = *prefix
		opt(o)
	})
	if err != nil {
		env.Close()
		return nil, nil, usageError("%v", err)
	}
	return s, env.Close, nil
}
