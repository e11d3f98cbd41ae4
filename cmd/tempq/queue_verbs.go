package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/internal/wire"
)

// The queue verbs: create-queue, delete-queue, purge-queue and
// list-queues, the plain SQS operations an emulator user reaches for. They
// check their flags before any call: bad input is a usage error (exit 2)
// naming the flag, and the server is not contacted.

// SQS's bounds of the queue attributes create-queue sets.
const (
	minRetention = time.Minute
	maxRetention = 14 * 24 * time.Hour
	maxDelay     = wire.MaxDelaySeconds * time.Second
	maxHidden    = wire.MaxVisibilityTimeout * time.Second
)

// wholeSeconds returns d in seconds when it is a whole number of seconds
// within lo to hi, else a usage error naming --flagName.
func wholeSeconds(flagName string, d, lo, hi time.Duration) (int32, error) {
	if d < lo || d > hi || d%time.Second != 0 {
		return 0, usageError("--%s %s: want whole seconds from %s to %s", flagName, shortDuration(d), shortDuration(lo), shortDuration(hi))
	}
	return int32(d / time.Second), nil
}

// shortDuration formats d without zero minutes and seconds: 15m, not 15m0s.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// setFlags returns the names of the flags the command line set.
func setFlags(fs *flag.FlagSet) map[string]bool {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	return set
}

// parseNoArgs parses the flags of a command that names its queue with
// --queue, wherever they stand, and rejects positional arguments.
func parseNoArgs(fs *flag.FlagSet, args []string) error {
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageError("unexpected arguments %q (name the queue with --queue)", pos)
	}
	return nil
}

func runCreateQueue(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("create-queue", "--queue NAME [--visibility-timeout 30s] [--retention 96h] [--delay 0s] [--content-dedup] [--json]", stdout)
	queue := fs.String("queue", "", "name of the queue (required); a name ending in .fifo makes a FIFO queue")
	visibility := fs.Duration("visibility-timeout", 0, "how long a received message stays hidden, 0s to 12h (default: the server's, 30s on SQS)")
	retention := fs.Duration("retention", 0, "how long the queue keeps a message, 1m to 336h (default: the server's, 96h on SQS)")
	delay := fs.Duration("delay", 0, "how long each new message stays hidden before its first receive, 0s to 15m")
	contentDedup := fs.Bool("content-dedup", false, "FIFO queues: take messages with equal bodies, sent within 5 minutes without a --dedup-id, for duplicates")
	asJSON := fs.Bool("json", false, `print {"queue_url": URL}`)
	server := serverFlags(fs)
	if err := parseNoArgs(fs, args); err != nil {
		return err
	}
	if strings.Contains(*queue, "://") {
		return usageError("--queue %q: create-queue takes a queue name, not a URL", *queue)
	}
	if err := checkQueueArg("queue", *queue); err != nil {
		return err
	}
	fifo := strings.HasSuffix(*queue, ".fifo")
	attrs := map[string]string{}
	if fifo {
		attrs[string(types.QueueAttributeNameFifoQueue)] = "true"
	}
	if *contentDedup {
		if !fifo {
			return usageError("--content-dedup is for FIFO queues, whose names end in .fifo; %s is not one", *queue)
		}
		attrs[string(types.QueueAttributeNameContentBasedDeduplication)] = "true"
	}
	set := setFlags(fs)
	for _, a := range []struct {
		flag    string
		d       *time.Duration
		lo, hi  time.Duration
		attName types.QueueAttributeName
	}{
		{"visibility-timeout", visibility, 0, maxHidden, types.QueueAttributeNameVisibilityTimeout},
		{"retention", retention, minRetention, maxRetention, types.QueueAttributeNameMessageRetentionPeriod},
		{"delay", delay, 0, maxDelay, types.QueueAttributeNameDelaySeconds},
	} {
		if !set[a.flag] {
			continue
		}
		n, err := wholeSeconds(a.flag, *a.d, a.lo, a.hi)
		if err != nil {
			return err
		}
		attrs[string(a.attName)] = strconv.Itoa(int(n))
	}
	env, err := openSQS(ctx, server, stderr)
	if err != nil {
		return err
	}
	defer env.Close()
	out, err := env.Client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: queue, Attributes: attrs})
	if err != nil {
		return fmt.Errorf("creating queue %q: %w", *queue, err)
	}
	u := aws.ToString(out.QueueUrl)
	if *asJSON {
		return writeJSON(stdout, map[string]string{"queue_url": u})
	}
	_, err = fmt.Fprintln(stdout, u)
	return err
}

func runDeleteQueue(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return queueAction(ctx, "delete-queue", "deleted", "queue to delete, by name or URL (required): it goes with its messages", args, stdout, stderr,
		func(ctx context.Context, client *sqs.Client, u string) error {
			_, err := client.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: aws.String(u)})
			return err
		})
}

func runPurgeQueue(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return queueAction(ctx, "purge-queue", "purged", "queue to empty, by name or URL (required); SQS allows one purge a minute", args, stdout, stderr,
		func(ctx context.Context, client *sqs.Client, u string) error {
			_, err := client.PurgeQueue(ctx, &sqs.PurgeQueueInput{QueueUrl: aws.String(u)})
			return err
		})
}

// queueAction runs a command that does one thing to one queue, --queue,
// and prints "<done> URL" or, with --json, {"<done>": URL}.
func queueAction(ctx context.Context, name, done, queueUsage string, args []string, stdout, stderr io.Writer, act func(context.Context, *sqs.Client, string) error) error {
	fs := newFlags(name, "--queue NAME|URL [--json]", stdout)
	queue := fs.String("queue", "", queueUsage)
	asJSON := fs.Bool("json", false, fmt.Sprintf(`print {"%s": URL}`, done))
	server := serverFlags(fs)
	if err := parseNoArgs(fs, args); err != nil {
		return err
	}
	if err := checkQueueArg("queue", *queue); err != nil {
		return err
	}
	env, err := openSQS(ctx, server, stderr)
	if err != nil {
		return err
	}
	defer env.Close()
	u, err := resolveQueue(ctx, env.Client, "queue", *queue)
	if err != nil {
		return err
	}
	if err := act(ctx, env.Client, u); err != nil {
		return fmt.Errorf("%s %s: %w", name, queueNameOf(u), err)
	}
	if *asJSON {
		return writeJSON(stdout, map[string]string{done: u})
	}
	_, err = fmt.Fprintln(stdout, done, u)
	return err
}

func runListQueues(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("list-queues", "[--prefix P] [--json]", stdout)
	prefix := fs.String("prefix", "", "list only the queues whose names start with this")
	asJSON := fs.Bool("json", false, `print a JSON array of {"name": N, "url": URL}`)
	server := serverFlags(fs)
	if err := parseNoArgs(fs, args); err != nil {
		return err
	}
	if len(*prefix) > wire.MaxQueueNameLength || strings.Trim(*prefix, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.") != "" {
		return usageError("--prefix %q: a queue name prefix has up to %d characters of A-Z a-z 0-9 - _ .", *prefix, wire.MaxQueueNameLength)
	}
	env, err := openSQS(ctx, server, stderr)
	if err != nil {
		return err
	}
	defer env.Close()
	type queue struct {
		Name string `json:"name"`
		URL  string `json:"url"`
	}
	qs := []queue{}
	in := &sqs.ListQueuesInput{MaxResults: aws.Int32(1000)}
	if *prefix != "" {
		in.QueueNamePrefix = prefix
	}
	for p := sqs.NewListQueuesPaginator(env.Client, in); p.HasMorePages(); {
		out, err := p.NextPage(ctx)
		if err != nil {
			return fmt.Errorf("listing queues: %w", err)
		}
		for _, u := range out.QueueUrls {
			qs = append(qs, queue{Name: queueNameOf(u), URL: u})
		}
	}
	if *asJSON {
		return writeJSON(stdout, qs)
	}
	for _, q := range qs {
		if _, err := fmt.Fprintln(stdout, q.URL); err != nil {
			return err
		}
	}
	return nil
}
