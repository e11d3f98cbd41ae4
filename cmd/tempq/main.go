// Command tempq is the tempqueues operator's tool: call a service over SQS,
// serve an echo responder, create, list, purge and delete queues, send and
// receive plain messages, list temporary host queues and sweep idle ones,
// replay a dead-letter queue, print backlog-per-worker figures, run the
// embedded SQS emulator and its web console, and benchmark.
//
//	tempq <command> [flags]
//	tempq <command> --help
//	tempq version
//
// Every command that talks to SQS takes --endpoint-url, --region and
// --profile (as the AWS CLI does) and honours AWS_ENDPOINT_URL_SQS; a
// loopback AWS_ENDPOINT_URL_SQS with nothing else configured needs no
// credentials or region. Help goes to stdout. Exit codes: 0 ok, 1 failure,
// 2 usage, 3 timeout. With --json, an error is one JSON object on stderr,
// {"error": "...", "code": N}, so that stdout holds only results.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"github.com/tempqueues/tempqueues/internal/testkit/sqsenv"
	"github.com/tempqueues/tempqueues/sqsapi"
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
	{"console", "serve the web console for any SQS endpoint, on loopback (read-only on AWS)", runConsole},
	{"call", "send a request and print the reply", runCall},
	{"serve-echo", "answer requests on a queue with their own body, until Ctrl-C", runServeEcho},
	{"create-queue", "create a queue (FIFO when its name ends in .fifo) and print its URL", runCreateQueue},
	{"delete-queue", "delete a queue and its messages", runDeleteQueue},
	{"purge-queue", "delete every message of a queue", runPurgeQueue},
	{"list-queues", "list every queue's URL (--prefix to narrow), temporary or not", runListQueues},
	{"send", "send one message to a queue (no reply awaited: that is call)", runSend},
	{"receive", "receive messages and print their bodies (--delete deletes them)", runReceive},
	{"queues", "list temporary host queues: heartbeat age and idle verdict", runQueues},
	{"sweep", "delete idle temporary queues (--dry-run to list them)", runSweep},
	{"redrive", "replay a dead-letter queue with backoff; park what keeps failing", runRedrive},
	{"backlog", "backlog-per-worker figures of a queue for autoscaling", runBacklog},
	{"bench", "benchmark tempqueues against queue-per-request, a static reply queue and the floor; idle cost, stop times", runBench},
	{"version", "print tempq's module version and the Go version it was built with", runVersion},
}

// The exit codes, the same for every command.
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
	exitTimeout = 3 // call: no reply in time
)

// exitError carries an exit code; usage errors exit 2, failures 1.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// usageError marks bad command lines (exit code 2).
func usageError(format string, args ...any) error {
	return &exitError{code: exitUsage, err: fmt.Errorf(format, args...)}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// run executes a command line and returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return exitUsage
	}
	switch args[0] {
	case "-h", "-help", "--help":
		usage(stdout)
		return exitOK
	case "help":
		if len(args) == 1 {
			usage(stdout)
			return exitOK
		}
		args = []string{args[1], "--help"} // tempq help call = tempq call --help
	case "-version", "--version":
		args[0] = "version"
	}
	for _, c := range commands {
		if c.name != args[0] {
			continue
		}
		err := c.run(ctx, args[1:], stdout, stderr)
		if err == nil || errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		code := exitFailure
		var ee *exitError
		switch {
		case errors.As(err, &ee):
			code = ee.code
		case errors.Is(err, sqsapi.ErrInvalidInput):
			// Input the library rejected before any call is bad usage
			// too: the body, attributes or queue the command line gave,
			// named as the command line names it.
			err, code = flagError(err, nil), exitUsage
		case errors.Is(err, sqsenv.ErrUsage):
			code = exitUsage
		}
		reportError(stderr, c.name, err, code, wantsJSON(args[1:]))
		return code
	}
	reportError(stderr, "", fmt.Errorf("unknown command %q%s (tempq --help lists them)", args[0], suggest(args[0])), exitUsage, wantsJSON(args[1:]))
	return exitUsage
}

// suggest names the commands an unknown one may have meant: those it
// starts, or that start it ("serve" for serve-echo), else "".
func suggest(name string) string {
	var near []string
	for _, c := range commands {
		if len(name) >= 2 && (strings.HasPrefix(c.name, name) || strings.HasPrefix(name, c.name)) {
			near = append(near, c.name)
		}
	}
	if len(near) == 0 {
		return ""
	}
	return "; did you mean " + strings.Join(near, " or ") + "?"
}

// reportError writes err as "tempq cmd: err", or, for --json, as one JSON
// object on stderr: stdout keeps only results, which a script can parse
// without meeting an error among them, and the exit code says which to read.
func reportError(stderr io.Writer, cmd string, err error, code int, asJSON bool) {
	if asJSON {
		_ = writeJSON(stderr, struct {
			Error string `json:"error"`
			Code  int    `json:"code"`
		}{err.Error(), code})
		return
	}
	prefix := "tempq"
	if cmd != "" {
		prefix += " " + cmd
	}
	fmt.Fprintf(stderr, "%s: %v\n", prefix, err)
	if code == exitUsage && cmd != "" {
		fmt.Fprintf(stderr, "(tempq %s --help shows its usage)\n", cmd)
	}
}

// wantsJSON reports whether args, before any "--", set --json: errors are
// reported before (or instead of) the command's own parsing of its flags.
func wantsJSON(args []string) bool {
	on := false
	for _, a := range args {
		if a == "--" {
			break
		}
		name, val, hasVal := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "-") || name != "json" {
			continue
		}
		if !hasVal {
			on = true
		} else if b, err := strconv.ParseBool(val); err == nil {
			on = b
		}
	}
	return on
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: tempq <command> [flags]   (tempq <command> --help for its flags)")
	fmt.Fprintln(w, "\ncommands:")
	cs := append([]command(nil), commands...)
	sort.Slice(cs, func(i, j int) bool { return cs[i].name < cs[j].name })
	for _, c := range cs {
		fmt.Fprintf(w, "  %-13s %s\n", c.name, c.summary)
	}
	fmt.Fprint(w, `
queues and list-queues differ: queues reads the heartbeat tags of
tempqueues' temporary host queues (those with --prefix, by default
__RequesterClientQueues__) and says which a sweep would delete; list-queues
lists the URLs of every queue, as SQS's ListQueues does.

The SQS server: --endpoint-url URL, AWS_ENDPOINT_URL_SQS (a loopback one,
such as http://127.0.0.1:4566 of "tempq emulator", needs no credentials or
region), or --aws / --profile for AWS as the environment configures it;
--endpoint-url and --aws together are refused.

exit codes (every command):
  0  ok
  1  failure (the server refused, a queue does not exist, ...)
  2  usage: bad flags or arguments, an invalid endpoint URL, no region for AWS
  3  timeout: call got no reply within --timeout

With --json, an error is one JSON object on stderr, {"error": "...", "code": N};
stdout holds only results. tempq --version prints the version.
`)
}

// newFlags returns a flag set for a subcommand whose help goes to stdout;
// parse returns its errors instead of printing them.
func newFlags(name, synopsis string, stdout io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("tempq "+name, flag.ContinueOnError)
	fs.SetOutput(stdout)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: tempq %s %s\n\n", name, synopsis)
		fs.PrintDefaults()
	}
	return fs
}

// parse parses args, turning bad flags into usage errors, and prints the
// usage for -h and --help (to the flag set's output, stdout).
func parse(fs *flag.FlagSet, args []string) error {
	usage, out := fs.Usage, fs.Output()
	// The flag package prints errors and usage itself; run reports errors,
	// and only an asked-for help is printed.
	fs.Usage = func() {}
	fs.SetOutput(io.Discard)
	err := fs.Parse(args)
	fs.Usage = usage
	fs.SetOutput(out)
	if errors.Is(err, flag.ErrHelp) {
		fs.Usage()
		return err
	}
	if err != nil {
		return &exitError{code: exitUsage, err: err}
	}
	return checkNoEmpty(fs)
}

// runVersion is `tempq version`: the module version the binary was built
// from ("(devel)" when the build stamped none) and the Go version.
func runVersion(_ context.Context, args []string, stdout, _ io.Writer) error {
	fs := newFlags("version", "[--json]", stdout)
	asJSON := fs.Bool("json", false, "print the versions as JSON")
	if err := parse(fs, args); err != nil {
		return err
	}
	if err := noArgs(fs); err != nil {
		return err
	}
	version := "(devel)"
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		version = bi.Main.Version
	}
	if *asJSON {
		return writeJSON(stdout, map[string]string{"version": version, "go": runtime.Version()})
	}
	_, err := fmt.Fprintf(stdout, "tempq %s %s %s/%s\n", version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return err
}
