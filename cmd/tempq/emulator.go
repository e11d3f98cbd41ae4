package main

import (
	"context"
	"io"
	"log/slog"
	"os"

	"github.com/tempqueues/tempqueues/sqstest"
)

// runEmulator is `tempq emulator`, the one command that runs package
// sqstest's server on its own: for SDKs in other languages, the AWS CLI, a
// quick look with curl, and tempq bench's child process. State lives in
// memory and ends with it.
func runEmulator(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("emulator", "[--addr 127.0.0.1:4566] [--region us-east-1] [--latency 2ms] [--until-stdin-eof] [-v]", stdout)
	addr := fs.String("addr", "127.0.0.1:4566", "address to listen on (port 0 picks a free one)")
	region := fs.String("region", "us-east-1", "region shown in queue ARNs")
	latency := fs.Duration("latency", 0, "wait this long before handling each call, to stand for a network")
	untilEOF := fs.Bool("until-stdin-eof", false, "stop when standard input closes, so that a parent process that ends (even killed) stops the server; tempq bench runs it so")
	verbose := fs.Bool("v", false, "log every request and error to stderr")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError("unexpected arguments %v", fs.Args())
	}
	if *latency < 0 {
		return usageError("--latency %v: must not be negative", *latency)
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
	return sqstest.Run(ctx, stdout, func(o *sqstest.Options) {
		o.Addr = *addr
		o.Region = *region
		if *latency > 0 {
			o.Faults = []sqstest.Fault{sqstest.Latency("", *latency)}
		}
		if *verbose {
			// The server logs requests at debug level.
			o.Logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
		}
	})
}
