package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/tempqueues/tempqueues/cmd/tempq/internal/console"
	"github.com/tempqueues/tempqueues/sqsapi"
)

// runConsole is `tempq console`: the web console of tempq emulator, served
// for any SQS endpoint through the SQS API, on loopback. On AWS it is
// read-only unless --allow-actions.
func runConsole(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("console", "[--addr 127.0.0.1:4567] [--allow-actions] [--prefix "+sqsapi.DefaultQueuePrefix+"] [--sweep-period 5m] [--refresh 2s]", stdout)
	addr := fs.String("addr", "127.0.0.1:4567", "loopback address to serve the console on (127.0.0.1, [::1] or localhost; port 0 picks a free one)")
	allow := fs.Bool("allow-actions", false, "on AWS, allow the console to send, purge, delete queues and move messages; without it the console is read-only on AWS (emulator endpoints always allow them)")
	prefix := prefixFlag(fs)
	period := fs.Duration("sweep-period", 5*time.Minute, "the fleet's sweep period (reaper Options.Period), for the time of the next sweep")
	refresh := fs.Duration("refresh", 2*time.Second, "how often pages refresh: each refresh of the queue list reads every queue (2 calls per queue)")
	fs.Usage = consoleUsage(fs.Usage, fs)
	server := serverFlags(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	if err := noArgs(fs); err != nil {
		return err
	}
	if !loopbackAddr(*addr) {
		return usageError("--addr %s: the console listens on loopback only (127.0.0.1, [::1] or localhost)", *addr)
	}
	if *refresh < 100*time.Millisecond {
		return usageError("--refresh %v: must be at least 100ms", *refresh)
	}
	env, err := openSQS(ctx, server, stderr)
	if err != nil {
		return err
	}
	defer env.Close()
	readOnly := onAWS(server.AWS, env.Endpoint) && !*allow
	con, err := console.New(env.Client, func(o *console.Options) {
		o.Logger = server.logger(stderr)
		o.ReadOnly = readOnly
		o.Counter = env.Counter
		o.Prefix = *prefix
		o.SweepPeriod = *period
		o.Where = env.Where
		o.Refresh = *refresh
	})
	if err != nil {
		return flagError(err, map[string]string{"Prefix": "--prefix", "Period": "--sweep-period"})
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return fmt.Errorf("tempq console: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle(console.Path, con)
	mux.Handle("GET /{$}", http.RedirectHandler(console.Path, http.StatusFound))
	return serveUntil(ctx, ln, mux, func() error {
		mode := ""
		if readOnly {
			mode = " (read-only: --allow-actions enables actions)"
		}
		_, err := fmt.Fprintf(stdout, "tempq console: %s at http://%s%s%s\n", env.Where, ln.Addr(), console.Path, mode)
		return err
	}, func() error { return nil })
}

// consoleUsage extends the usage with what the console shows and allows.
func consoleUsage(usage func(), fs *flag.FlagSet) func() {
	return func() {
		usage()
		fmt.Fprint(fs.Output(), `
The console shows the endpoint's queues (counts, type, dead-letter links,
tags), each queue's page (send a test message, purge, delete, message move
tasks of a dead-letter queue), the temporary host queues of --prefix with
their heartbeat age against their retention and the fleet's sweeper lease,
and a chart of API calls per second with their cost. It reads through the
ordinary SQS API: the queue list costs 2 calls per queue per refresh, and
the calls chart shows only the calls the console made itself (tempq
emulator's own console shows every call it served, and peeks at messages).

On AWS (--aws, no --endpoint-url, or an amazonaws.com one) it is read-only unless
--allow-actions. Every action is a POST with the console's CSRF token; the
console answers only requests addressed to a loopback name. See
docs/console.md.
`)
	}
}

// onAWS reports whether a console's client talks to AWS itself: --aws, no
// endpoint given (the SDK resolves AWS's), or an endpoint under
// amazonaws.com. Such a console is read-only without --allow-actions.
func onAWS(awsFlag bool, endpoint string) bool {
	if awsFlag || endpoint == "" {
		return true
	}
	u, err := url.Parse(endpoint)
	if err != nil {
		return true // unknown: the safe side
	}
	host := strings.ToLower(u.Hostname())
	return strings.HasSuffix(host, ".amazonaws.com") || strings.HasSuffix(host, ".amazonaws.com.cn")
}
