package main

import (
	"context"
	"io"
	"log/slog"

	"github.com/tempqueues/tempqueues/sqstest"
)

func runEmulator(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("emulator", "[--addr 127.0.0.1:4566] [--region us-east-1] [-v]", stderr)
	addr := fs.String("addr", "127.0.0.1:4566", "address to listen on (port 0 picks a free one)")
	region := fs.String("region", "us-east-1", "region shown in queue ARNs")
	verbose := fs.Bool("v", false, "log every request to stderr")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError("unexpected arguments %v", fs.Args())
	}
	return sqstest.Run(ctx, stdout, func(o *sqstest.Options) {
		o.Addr = *addr
		o.Region = *region
		if *verbose {
			o.Logger = slog.New(slog.NewTextHandler(stderr, nil))
		}
	})
}
