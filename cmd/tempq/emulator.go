package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go/middleware"

	"github.com/tempqueues/tempqueues/cmd/tempq/internal/console"
	"github.com/tempqueues/tempqueues/internal/callcount"
	"github.com/tempqueues/tempqueues/sqstest"
)

// readyPrefix starts the one line the emulator prints on stdout once it
// serves (and the --queue queues exist): scripts wait for it.
const readyPrefix = "sqstest listening on "

// queueFlags collects repeated --queue name[:attr=value,...] flags.
type queueFlags []queueSpec

type queueSpec struct {
	name  string
	attrs map[string]string
}

func (q *queueFlags) String() string { return fmt.Sprint(len(*q), " queues") }

func (q *queueFlags) Set(s string) error {
	name, rest, _ := strings.Cut(s, ":")
	if name == "" {
		return fmt.Errorf("want name[:attr=value,...], got %q", s)
	}
	spec := queueSpec{name: name, attrs: map[string]string{}}
	if rest != "" {
		for _, kv := range strings.Split(rest, ",") {
			k, v, ok := strings.Cut(kv, "=")
			if !ok || k == "" {
				return fmt.Errorf("--queue %s: want attr=value, got %q", name, kv)
			}
			spec.attrs[k] = v
		}
	}
	if _, ok := spec.attrs["FifoQueue"]; !ok && strings.HasSuffix(name, ".fifo") {
		spec.attrs["FifoQueue"] = "true"
	}
	*q = append(*q, spec)
	return nil
}

// runEmulator is `tempq emulator`, the one command that runs package
// sqstest's server on its own: for SDKs in other languages (JSON or query
// protocol), the AWS CLI, a quick look with curl, and tempq bench's child
// process. State lives in memory unless --data names a directory.
func runEmulator(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("emulator", "[--addr 127.0.0.1:4566] [--data DIR] [--region us-east-1] [--account 000000000000] [--queue name[:attr=value,...]]... [--latency 2ms [--latency-p99 8ms]] [--until-stdin-eof] [--no-console] [-v]", stdout)
	addr := fs.String("addr", "127.0.0.1:4566", "address to listen on (port 0 picks a free one)")
	data := optionalStringFlag(fs, "data", "", "keep queues and messages in this directory, on disk before each answer, so a restart (even after a crash) loses nothing; empty keeps them in memory")
	region := fs.String("region", "us-east-1", "region shown in queue ARNs")
	account := fs.String("account", "000000000000", "account id shown in queue URLs and ARNs (12 digits)")
	var queues queueFlags
	fs.Var(&queues, "queue", "create this queue at start, with these attributes (repeatable; a name ending .fifo gets FifoQueue=true); an existing one gets the attributes set")
	latency := fs.Duration("latency", 0, "wait this long before handling each call, to stand for a network")
	latencyP99 := fs.Duration("latency-p99", 0, "make --latency the median of a random wait with this 99th percentile (lognormal: a long tail, as real networks have); must be above --latency")
	untilEOF := fs.Bool("until-stdin-eof", false, "stop when standard input closes, so that a parent process that ends (even killed) stops the server; tempq bench runs it so")
	verbose := fs.Bool("v", false, "log every request and error to stderr")
	noConsole := fs.Bool("no-console", false, "do not serve the web console at /ui/ (served by default on a loopback --addr; see docs/console.md)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError("unexpected arguments %v", fs.Args())
	}
	if *latency < 0 {
		return usageError("--latency %v: must not be negative", *latency)
	}
	if err := checkLatencyP99(*latency, *latencyP99); err != nil {
		return err
	}
	if len(*account) != 12 || strings.Trim(*account, "0123456789") != "" {
		return usageError("--account %q: must be 12 digits", *account)
	}
	if *region == "" {
		return usageError("--region must not be empty")
	}
	if !loopbackAddr(*addr) {
		fmt.Fprintf(stderr, "tempq emulator: warning: listening on %s, not loopback only: the emulator has no authentication, so anyone who can reach it can read, send and delete every message\n", *addr)
	}
	if *untilEOF {
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
		// This goroutine may stay blocked in the read until the process
		// exits: nothing can interrupt a read of standard input.
		go func() {
			_, _ = io.Copy(io.Discard, os.Stdin)
			cancel()
		}()
	}
	ready := &readyWriter{w: stdout, setup: func(url string) error {
		return createQueues(ctx, url, *region, queues)
	}}
	srv, err := sqstest.NewHandler(func(o *sqstest.Options) {
		o.Region = *region
		o.AccountID = *account
		o.DataDir = *data
		if *verbose {
			// The server logs requests at debug level.
			o.Logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
		}
	})
	if err != nil {
		return err
	}
	if *latency > 0 {
		srv.InjectFault(sqstest.Latency("", *latency, *latencyP99))
	}
	return serveEmulator(ctx, srv, *addr, *region, !*noConsole, ready, stderr)
}

// serveEmulator serves srv, and its console at /ui/ when withConsole, on
// addr until ctx is done, then closes both. Once listening it writes the
// ready line ("sqstest listening on <URL>") to ready.
func serveEmulator(ctx context.Context, srv *sqstest.Server, addr, region string, withConsole bool, ready io.Writer, stderr io.Writer) error {
	closeServer := func() error {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), emulatorCloseTimeout)
		defer cancel()
		return srv.Close(cctx)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return errors.Join(fmt.Errorf("sqstest: listening on %s: %w", addr, err), closeServer())
	}
	url := "http://" + ln.Addr().String()
	mux := http.NewServeMux()
	mux.Handle("/", srv)
	if withConsole && loopbackAddr(addr) {
		// The console's client calls the emulator over its own socket, as
		// any client does; its calls are counted, to be left out of the
		// calls chart.
		counter := new(callcount.Counter)
		client := sqs.New(sqs.Options{
			Region:       region,
			BaseEndpoint: aws.String(url),
			Credentials:  credentials.NewStaticCredentialsProvider("tempq", "tempq", ""),
			APIOptions:   []func(*middleware.Stack) error{counter.Register},
		})
		con, err := console.New(client, func(o *console.Options) {
			o.Emulator = srv
			o.Counter = counter
			o.Where = "emulator at " + url
		})
		if err != nil {
			return errors.Join(err, ln.Close(), closeServer())
		}
		// Only /ui/: the rest, "/" included, is SQS's (query-protocol
		// clients may GET it).
		mux.Handle(console.Path, con)
	} else if withConsole {
		fmt.Fprintf(stderr, "tempq emulator: the console is off: it is served on loopback addresses only\n")
	}
	return serveUntil(ctx, ln, mux, func() error {
		if _, err := fmt.Fprintf(ready, "%s%s\n", readyPrefix, url); err != nil {
			return err
		}
		if withConsole && loopbackAddr(addr) {
			fmt.Fprintf(stderr, "tempq emulator: console at %s%s\n", url, console.Path)
		}
		return nil
	}, closeServer)
}

// serveUntil serves h on ln until ctx is done or serving fails, calling
// ready once it serves; then it calls before (the SQS server's Close,
// which ends parked long polls) and closes the HTTP server.
func serveUntil(ctx context.Context, ln net.Listener, h http.Handler, ready, before func() error) error {
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	err := ready()
	if err == nil {
		select {
		case <-ctx.Done():
		case err = <-served:
			served <- err
		}
	}
	err = errors.Join(err, before(), hs.Close())
	if serr := <-served; !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	return err
}

// emulatorCloseTimeout bounds the emulator's Close: handlers end as soon
// as the server closes, so one that takes longer is stuck.
const emulatorCloseTimeout = 10 * time.Second

// checkLatencyP99 checks a --latency-p99 flag against its --latency: zero,
// or above a positive median.
func checkLatencyP99(median, p99 time.Duration) error {
	if p99 != 0 && (median <= 0 || p99 <= median) {
		return usageError("--latency-p99 %v: must be above --latency (%v), which must be positive", p99, median)
	}
	return nil
}

// readyWriter holds back the server's ready line until setup, given the
// server's URL, has run: a script that waits for the line then finds the
// --queue queues in place.
type readyWriter struct {
	w     io.Writer
	setup func(url string) error
	done  bool
}

func (r *readyWriter) Write(p []byte) (int, error) {
	if !r.done {
		r.done = true
		if url, ok := strings.CutPrefix(strings.TrimSpace(string(p)), readyPrefix); ok {
			if err := r.setup(url); err != nil {
				return 0, err
			}
		}
	}
	return r.w.Write(p)
}

// createQueues creates the --queue queues through the server's own API,
// so they get the validation any client's would.
func createQueues(ctx context.Context, url, region string, queues []queueSpec) error {
	if len(queues) == 0 {
		return nil
	}
	client := sqs.New(sqs.Options{
		Region:       region,
		BaseEndpoint: aws.String(url),
		Credentials:  credentials.NewStaticCredentialsProvider("tempq", "tempq", ""),
	})
	for _, q := range queues {
		_, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(q.name), Attributes: q.attrs})
		var exists *types.QueueNameExists
		if errors.As(err, &exists) {
			// Kept by --data with other attributes: the flags win.
			var got *sqs.GetQueueUrlOutput
			if got, err = client.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(q.name)}); err == nil {
				attrs := make(map[string]string, len(q.attrs))
				for k, v := range q.attrs {
					if k != "FifoQueue" {
						attrs[k] = v
					}
				}
				_, err = client.SetQueueAttributes(ctx, &sqs.SetQueueAttributesInput{QueueUrl: got.QueueUrl, Attributes: attrs})
			}
		}
		if err != nil {
			return &exitError{code: exitUsage, err: fmt.Errorf("--queue %s: %w", q.name, err)}
		}
	}
	return nil
}

// loopbackAddr reports whether a listen address reaches this machine only:
// a loopback IP or "localhost". An empty host listens on every interface.
func loopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
