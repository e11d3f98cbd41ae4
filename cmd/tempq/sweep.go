package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"path"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/tempqueues/tempqueues/internal/awserr"
	"github.com/tempqueues/tempqueues/reaper"
	"github.com/tempqueues/tempqueues/sqsapi"
)

func runSweep(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("sweep", "[--prefix "+sqsapi.DefaultQueuePrefix+"] [--dry-run] [--retire] [--json]", stdout)
	prefix := prefixFlag(fs)
	dryRun := fs.Bool("dry-run", false, "report the idle queues without deleting them")
	retire := fs.Bool("retire", false, "after the sweep, delete the fleet's lease queue "+reaper.LeaseQueueName("<prefix>")+" too, when no temporary queue of the prefix is left (the fleet is retired)")
	asJSON := fs.Bool("json", false, "print the sweep report as JSON")
	var client *sqs.Client
	s, closeEnv, err := sweeperCommand(ctx, fs, args, stderr, prefix, func(o *reaper.SweeperOptions) { o.DryRun = *dryRun }, &client)
	if err != nil {
		return err
	}
	defer closeEnv()
	if *retire && *dryRun {
		return usageError("--retire deletes; it cannot be a --dry-run")
	}
	start := time.Now()
	rep, err := s.Sweep(ctx)
	took := time.Since(start)
	if err != nil {
		return err
	}
	if *retire && len(rep.Errors) == 0 {
		if err := retireLease(ctx, s, client, *prefix, stdout); err != nil {
			return err
		}
	}
	if *asJSON {
		errs := make([]string, len(rep.Errors))
		for i, e := range rep.Errors {
			errs[i] = e.Error()
		}
		if err := writeJSON(stdout, map[string]any{
			"dry_run": *dryRun, "listed": rep.Listed, "kept": rep.Kept, "deleted": nonNil(rep.Deleted),
			"skipped": skipped(rep), "errors": errs, "duration_seconds": took.Seconds(),
		}); err != nil {
			return err
		}
	} else {
		verb := "deleted"
		if *dryRun {
			verb = "would delete"
		}
		for _, u := range rep.Deleted {
			fmt.Fprintf(stdout, "%s %s\n", verb, queueNameOf(u))
		}
		// `tempq queues` shows why each kept queue is kept. The four
		// counts add up to the queues listed.
		fmt.Fprintf(stdout, "%s listed: %s %d, kept %d, skipped %d (sweeper queues, or gone meanwhile), %s, in %v\n",
			plural(rep.Listed, "queue"), verb, len(rep.Deleted), rep.Kept, skipped(rep), plural(len(rep.Errors), "error"), took.Round(time.Millisecond))
		for _, e := range rep.Errors {
			fmt.Fprintln(stderr, e)
		}
	}
	if len(rep.Errors) > 0 {
		return fmt.Errorf("%s could not be inspected or deleted", plural(len(rep.Errors), "queue"))
	}
	return nil
}

// skipped is the number of queues a sweep listed but neither inspected nor
// deleted: the sweepers' own queues under the prefix, which are never
// temporary (the lease queue <prefix>sweeper.fifo, and a Java sweeper's
// <prefix> and <prefix>_DLQ), and queues another process deleted during
// the sweep. With it, deleted + kept + skipped + errors = listed.
func skipped(rep reaper.Report) int {
	return max(0, rep.Listed-len(rep.Deleted)-rep.Kept-len(rep.Errors))
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
// arguments), connects (-v logs to stderr) and returns a Sweeper for the prefix with opt
// applied, and the function that closes the connection.
func sweeperCommand(ctx context.Context, fs *flag.FlagSet, args []string, stderr io.Writer, prefix *string, opt func(*reaper.SweeperOptions), client ...**sqs.Client) (*reaper.Sweeper, func(), error) {
	server := serverFlags(fs)
	if err := parse(fs, args); err != nil {
		return nil, nil, err
	}
	if err := noArgs(fs); err != nil {
		return nil, nil, err
	}
	env, err := openSQS(ctx, server, stderr)
	if err != nil {
		return nil, nil, err
	}
	for _, c := range client {
		*c = env.Client
	}
	s, err := reaper.NewSweeper(env.Client, func(o *reaper.SweeperOptions) {
		o.Prefix = *prefix
		o.Logger = server.logger(stderr)
		opt(o)
	})
	if err != nil {
		env.Close()
		return nil, nil, flagError(err, map[string]string{"Prefix": "--prefix"})
	}
	return s, env.Close, nil
}

// retireLease deletes the fleet's lease queue once no temporary queue of
// the prefix is left: a live process would only create it again.
func retireLease(ctx context.Context, s *reaper.Sweeper, client *sqs.Client, prefix string, stdout io.Writer) error {
	qs, err := s.Queues(ctx)
	if err != nil {
		return err
	}
	name := reaper.LeaseQueueName(prefix)
	left := 0
	for _, q := range qs {
		// Reserved: the lease queue and a Java sweeper's queues, never
		// temporary.
		if q.Verdict != reaper.VerdictNotTemporary && q.Verdict != reaper.VerdictReserved && path.Base(q.QueueURL) != name {
			left++
		}
	}
	if left > 0 {
		return fmt.Errorf("--retire: %s with prefix %q left (tempq queues lists them); the lease queue stays while a fleet may use it", plural(left, "temporary queue"), prefix)
	}
	out, err := client.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(name)})
	if awserr.IsQueueDoesNotExist(err) {
		fmt.Fprintf(stdout, "no lease queue %s\n", name)
		return nil
	}
	if err != nil {
		return fmt.Errorf("--retire: GetQueueUrl %s: %w", name, err)
	}
	if _, err := client.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: out.QueueUrl}); err != nil && !awserr.IsQueueDoesNotExist(err) {
		return fmt.Errorf("--retire: DeleteQueue %s: %w", name, err)
	}
	fmt.Fprintf(stdout, "deleted the lease queue %s\n", name)
	return nil
}
