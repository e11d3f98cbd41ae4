package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/internal/wire"
	"github.com/tempqueues/tempqueues/observe"
	"github.com/tempqueues/tempqueues/responder"
	"github.com/tempqueues/tempqueues/sqsapi"
)

func runServeEcho(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("serve-echo", "--queue NAME|URL [--concurrency 10] [--allow-reply-to PREFIX,...] [--json]", stdout)
	queue := fs.String("queue", "", "request queue, by name (created if missing, FIFO when it ends in .fifo) or URL (required)")
	concurrency := fs.Int("concurrency", 10, "requests handled at once")
	allowReplyTo := fs.String("allow-reply-to", "", "comma-separated queue name prefixes (a requester's --prefix) or queue URL prefixes that replies may go to, beside requesters' host queues with the default prefix next to the request queue")
	asJSON := fs.Bool("json", false, "log each request as a line of JSON")
	server := serverFlags(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	if err := noArgs(fs); err != nil {
		return err
	}
	if *queue == "" {
		return usageError("--queue is required")
	}
	if *concurrency < 1 {
		return usageError("--concurrency must be at least 1")
	}
	env, err := openSQS(ctx, server, stderr)
	if err != nil {
		return err
	}
	defer env.Close()
	queueURL, err := resolveQueue(ctx, env.Client, "queue", *queue)
	if errors.Is(err, errNoQueue) && wire.ValidQueueName(*queue) {
		// A name of a missing queue: create it, FIFO when the name says so.
		in := &sqs.CreateQueueInput{QueueName: queue}
		if strings.HasSuffix(*queue, ".fifo") {
			in.Attributes = map[string]string{string(types.QueueAttributeNameFifoQueue): "true"}
		}
		out, cerr := env.Client.CreateQueue(ctx, in)
		if cerr != nil {
			return fmt.Errorf("creating queue %q: %w", *queue, cerr)
		}
		queueURL, err = aws.ToString(out.QueueUrl), nil
	}
	if err != nil {
		return err
	}

	var replies atomic.Int64 // replies sent, as the Observer hears of them
	r, err := responder.New(env.Client, func(o *responder.Options) {
		o.Observer = observe.Func(func(_ context.Context, e observe.Event) func(*types.Message, error) {
			if e.Kind != observe.Reply {
				return nil
			}
			return func(_ *types.Message, err error) {
				if err == nil {
					replies.Add(1)
				}
			}
		})
		o.MaxConcurrency = *concurrency
		o.Logger = server.logger(stderr)
		o.DrainTimeout = 2 * time.Second // Ctrl-C: running handlers get 2 s; idle, it stops in 0.5 s
		if *allowReplyTo != "" {
			o.AllowReplyTo = strings.Split(*allowReplyTo, ",")
		}
	})
	if err != nil {
		return flagError(err, map[string]string{"AllowReplyTo": "--allow-reply-to"})
	}
	var mu sync.Mutex // orders the log lines
	logf := func(req *responder.Request) {
		mu.Lock()
		defer mu.Unlock()
		rid, _ := req.Attribute(sqsapi.RequestIDAttribute)
		if *asJSON {
			_ = writeJSON(stdout, map[string]any{"time": time.Now().UTC(), "request_id": rid, "bytes": len(req.Body()), "reply": req.ResponseRequested()})
			return
		}
		fmt.Fprintf(stdout, "%s echo request %s, %d bytes\n", time.Now().Format("15:04:05.000"), rid, len(req.Body()))
	}
	if *asJSON {
		_ = writeJSON(stdout, map[string]any{"serving": queueURL})
	} else {
		fmt.Fprintf(stdout, "serving echo on %s (Ctrl-C to stop)\n", queueURL)
	}
	err = r.Serve(ctx, queueURL, responder.HandlerFunc(func(_ context.Context, req *responder.Request) (*responder.Reply, error) {
		logf(req)
		return &responder.Reply{Body: req.Body()}, nil
	}))
	if err != nil {
		return err
	}
	s := r.Stats()
	if *asJSON { // the last line of the JSON stream on stdout
		return writeJSON(stdout, map[string]any{"stopped": time.Now().UTC(), "requests": s.Received, "replies": replies.Load()})
	}
	fmt.Fprintf(stderr, "stopped: %d requests, %d replies\n", s.Received, replies.Load())
	return nil
}
