package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/tempqueues/tempqueues/internal/awserr"
	"github.com/tempqueues/tempqueues/internal/sqsenv"
	"github.com/tempqueues/tempqueues/internal/wire"
)

// serverHelp ends the usage of every command that talks to SQS.
const serverHelp = `
The SQS server must be named: --endpoint-url URL (an emulator, such as
"tempq emulator"), AWS_ENDPOINT_URL_SQS, or --aws / --profile for AWS as the
environment configures it (credentials, AWS_REGION). tempq never falls back
to a server of its own: an operator's command against an empty in-process
queue would only mislead.`

// serverFlags registers the server-selection flags on fs and extends its
// usage with serverHelp.
func serverFlags(fs *flag.FlagSet) *sqsenv.Flags {
	var f sqsenv.Flags
	f.Register(fs)
	usage := fs.Usage
	fs.Usage = func() {
		usage()
		fmt.Fprintln(fs.Output(), serverHelp)
	}
	return &f
}

// openSQS opens the client of the server the flags name. Unlike the
// examples, tempq refuses the embedded server (a usage error).
func openSQS(ctx context.Context, f *sqsenv.Flags) (*sqsenv.Env, error) {
	if f.Embedded() {
		return nil, usageError("no SQS server named: pass --endpoint-url URL (for example of `tempq emulator`), set AWS_ENDPOINT_URL_SQS, or pass --aws or --profile to use AWS")
	}
	return sqsenv.Open(ctx, *f)
}

// resolveQueue returns the URL of a queue given by URL or by name (one
// GetQueueUrl call).
func resolveQueue(ctx context.Context, client *sqs.Client, flagName, q string) (string, error) {
	if q == "" {
		return "", usageError("--%s is required", flagName)
	}
	if strings.Contains(q, "://") {
		return q, nil
	}
	if !wire.ValidQueueName(q) {
		return "", usageError("--%s %q is neither a queue URL nor a valid queue name", flagName, q)
	}
	out, err := client.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(q)})
	if err != nil {
		if awserr.IsQueueDoesNotExist(err) {
			return "", fmt.Errorf("--%s: queue %q does not exist", flagName, q)
		}
		return "", fmt.Errorf("--%s: GetQueueUrl %q: %w", flagName, q, err)
	}
	return aws.ToString(out.QueueUrl), nil
}

// queueNameOf returns the last path segment of a queue URL.
func queueNameOf(u string) string {
	return u[strings.LastIndexByte(u, '/')+1:]
}

// writeJSON writes v as one line of JSON.
func writeJSON(w io.Writer, v any) error {
	return json.NewEncoder(w).Encode(v)
}

// noArgs rejects positional arguments.
func noArgs(fs *flag.FlagSet) error {
	if fs.NArg() > 0 {
		return usageError("unexpected arguments %v", fs.Args())
	}
	return nil
}

// parseInterspersed parses args allowing flags after positional arguments
// (`tempq call "body" --queue q`), and returns the positional ones. "--"
// ends the flags.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := parse(fs, args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if len(args) >= len(rest)+1 && args[len(args)-len(rest)-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}
