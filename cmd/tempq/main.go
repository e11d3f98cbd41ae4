// Command tempq is the tempqueues operator's tool: call a service over SQS,
// serve an echo responder, list temporary host queues and sweep idle ones,
// replay a dead-letter queue, print backlog-per-worker figures, run the
// embedded SQS emulator, and benchmark.
//
//	tempq <command> [flags]
//	tempq <command> --help
//
// Every command that talks to SQS takes --endpoint-url, --region and
// --profile (as the AWS CLI does) and honours AWS_ENDPOINT_URL_SQS.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"syscall"
)

// command is one subcommand. run gets the arguments after the command name.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

// commands lists the subcommands; each lives in its own file.
var commands = []command{
	{"emulator", "run the embedded SQS server (sqstest) for any SDK", runEmulator},
	{"call", "send a request and print the reply", runCall},
	{"serve-echo", "answer requests on a queue with their own body, until Ctrl-C", runServeEcho},
	{"queues", "list temporary host queues: heartbeat age and idle verdict", runQueues},
	{"sweep", "delete idle temporary queues (--dry-run to list them)", runSweep},
	{"redrive", "replay a dead-letter queue with backoff; park what keeps failing", runRedrive},
	{"backlog", "backlog-per-worker figures of a queue for autoscaling", runBacklog},
	{"bench", "benchmark tempqueues against queue-per-request, a static reply queue and the floor; idle cost, stop times", runBench},
}

// exitError carries an exit code; usage errors exit 2, failures 1.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// usageError marks bad command lines (exit code 2).
func usageError(format string, args ...any) error {
	return &exitError{code: 2, err: fmt.Errorf(format, args...)}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// run executes a command line and returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stderr)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	for _, c := range commands {
		if c.name != args[0] {
			continue
		}
		err := c.run(ctx, args[1:], stdout, stderr)
		if err == nil || errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(stderr, "tempq %s: %v\n", c.name, err)
		var ee *exitError
		if errors.As(err, &ee) {
			return ee.code
		}
		return 1
	}
	fmt.Fprintf(stderr, "tempq: unknown command %q\n\n", args[0])
	usage(stderr)
	return 2
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: tempq <command> [flags]   (tempq <command> --help for its flags)")
	fmt.Fprintln(w, "\ncommands:")
	cs := append([]command(nil), commands...)
	sort.Slice(cs, func(i, j int) bool { return cs[i].name < cs[j].name })
	for _, c := range cs {
		fmt.Fprintf(w, "  %-12s %s\n", c.name, c.summary)
	}
}

// newFlags returns a flag set for a subcommand whose errors and help go to
// stderr and are returned, not printed and exited on.
func newFlags(name, synopsis string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("tempq "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: tempq %s %s\n\n", name, synopsis)
		fs.PrintDefaults()
	}
	return fs
}

// parse parses args, turning bad flags into usage errors.
func parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return &exitError{code: 2, err: err}
	}
	return nil
}
