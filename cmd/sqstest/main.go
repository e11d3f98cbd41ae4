// Command sqstest runs the in-process SQS server of package sqstest as a
// standalone server, for SDKs in other languages, the AWS CLI, or a quick
// look with curl. It prints its URL and stops on SIGINT or SIGTERM.
//
//	go run ./cmd/sqstest -addr 127.0.0.1:4566
//	AWS_ENDPOINT_URL_SQS=http://127.0.0.1:4566 aws sqs list-queues
//
// State lives in memory only and is lost when it stops.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/tempqueues/tempqueues/sqstest"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "TCP address to listen on (port 0 picks a free port)")
	region := flag.String("region", "us-east-1", "region in queue ARNs")
	verbose := flag.Bool("v", false, "log every request to stderr")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := sqstest.Run(ctx, os.Stdout, func(o *sqstest.Options) {
		o.Addr = *addr
		o.Region = *region
		if *verbose {
			o.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
		}
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
