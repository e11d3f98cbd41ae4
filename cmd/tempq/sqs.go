package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"

	"github.com/tempqueues/tempqueues/internal/awserr"
	"github.com/tempqueues/tempqueues/internal/testkit/sqsenv"
	"github.com/tempqueues/tempqueues/internal/wire"
)

// serverHelp ends the usage of every command that talks to SQS.
const serverHelp = `
The SQS server must be named: --endpoint-url URL (an emulator, such as
"tempq emulator"; dummy credentials), AWS_ENDPOINT_URL_SQS, or --aws /
--profile for AWS as the environment configures it (credentials,
AWS_REGION); not --endpoint-url and --aws together. A loopback AWS_ENDPOINT_URL_SQS (127.0.0.1, ::1, localhost)
with no credentials or region configured gets dummy credentials and
us-east-1 (-v says so); any other keeps the SDK's credential chain. tempq
never falls back to a server of its own: an operator's command against an
empty in-process queue would only mislead.

Exit codes: 0 ok, 1 failure, 2 usage, 3 timeout. With --json, an error is
one JSON object on stderr: {"error": "...", "code": N}.`

// dialTimeout bounds the connection check of an explicit endpoint. A
// refused connection fails at once; this is for one that gets no answer.
const dialTimeout = 2 * time.Second

// sqsFlags holds the server-selection flags of a command.
type sqsFlags struct {
	sqsenv.Flags
	verbose bool
	log     *slog.Logger // made once by logger
}

// serverFlags registers the server-selection flags (and -v) on fs and
// extends its usage with serverHelp.
func serverFlags(fs *flag.FlagSet) *sqsFlags {
	var s sqsFlags
	s.Register(fs)
	fs.BoolVar(&s.verbose, "v", false, "log at debug level to stderr: how the client was configured, and the library's own logs")
	usage := fs.Usage
	fs.Usage = func() {
		usage()
		fmt.Fprintln(fs.Output(), serverHelp)
	}
	return &s
}

// logger returns the logger of -v, nil (silent) without it.
func (s *sqsFlags) logger(stderr io.Writer) *slog.Logger {
	if s.verbose && s.log == nil {
		s.log = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return s.log
}

// openSQS opens the client of the server the flags name, and checks that
// an explicit endpoint accepts connections, so that a server that is not
// running fails at once, in one line, instead of after the SDK's retries.
// Unlike the examples, tempq refuses the embedded server (a usage error).
func openSQS(ctx context.Context, s *sqsFlags, stderr io.Writer) (*sqsenv.Env, error) {
	if err := checkServerChoice(s.Flags); err != nil {
		return nil, err
	}
	if s.Embedded() {
		return nil, usageError("no SQS server named: pass --endpoint-url URL (for example of `tempq emulator`), set " + sqsenv.EndpointEnv + ", or pass --aws or --profile to use AWS")
	}
	env, err := sqsenv.Open(ctx, s.Flags, func(o *sqsenv.Options) { o.Logger = s.logger(stderr) })
	if err != nil {
		return nil, err
	}
	if err := checkServer(ctx, env); err != nil {
		env.Close()
		return nil, err
	}
	return env, nil
}

// checkServer checks that the SQS endpoint of env accepts connections: the
// endpoint named (--endpoint-url, AWS_ENDPOINT_URL_SQS), or for AWS the
// regional endpoint the SDK resolves, so that a network failure is one
// line naming the endpoint instead of the SDK's error after its retries.
func checkServer(ctx context.Context, env *sqsenv.Env) error {
	endpoint := env.Endpoint
	if endpoint == "" {
		endpoint = awsEndpoint(ctx, env.Client)
	}
	if endpoint == "" {
		return nil // nothing to check: the SDK's calls will say
	}
	return checkConnect(ctx, endpoint)
}

// awsEndpoint returns the endpoint URL the client's calls go to, as the
// SDK resolves it from its region (FIPS and dual-stack included), or ""
// when it cannot be resolved.
func awsEndpoint(ctx context.Context, client *sqs.Client) string {
	o := client.Options()
	if o.BaseEndpoint != nil {
		return *o.BaseEndpoint
	}
	if o.EndpointResolverV2 == nil || o.Region == "" {
		return ""
	}
	ep, err := o.EndpointResolverV2.ResolveEndpoint(ctx, sqs.EndpointParameters{
		Region:       aws.String(o.Region),
		UseFIPS:      aws.Bool(o.EndpointOptions.UseFIPSEndpoint == aws.FIPSEndpointStateEnabled),
		UseDualStack: aws.Bool(o.EndpointOptions.UseDualStackEndpoint == aws.DualStackEndpointStateEnabled),
	})
	if err != nil {
		return ""
	}
	return ep.URI.String()
}

// checkConnect opens (and closes) one TCP connection to endpoint, a URL
// that sqsenv.Open has validated or the SDK has resolved. Only this first contact is strict: the
// SDK's calls keep their retries, for servers that blink later. An
// endpoint reached through an HTTP proxy is not checked: the proxy, not
// this process, connects to it.
func checkConnect(ctx context.Context, endpoint string) error {
	u, err := url.Parse(endpoint)
	if err != nil {
		return err
	}
	if proxy, err := http.ProxyFromEnvironment(&http.Request{URL: u}); err != nil || proxy != nil {
		return nil
	}
	addr := u.Host
	if u.Port() == "" {
		port := "443"
		if u.Scheme == "http" {
			port = "80"
		}
		addr = net.JoinHostPort(u.Hostname(), port)
	}
	d := net.Dialer{Timeout: dialTimeout}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err == nil {
		return conn.Close()
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	reason := err.Error()
	var dnsErr *net.DNSError
	var netErr net.Error
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		reason = "connection refused (is the server running?)"
	case errors.As(err, &dnsErr):
		reason = "no such host " + dnsErr.Name
	case errors.As(err, &netErr) && netErr.Timeout():
		reason = fmt.Sprintf("no answer within %v", dialTimeout)
	}
	return fmt.Errorf("cannot connect to the SQS server at %s: %s", endpoint, reason)
}

// errNoQueue is matched by resolveQueue's error for a queue that does not
// exist.
var errNoQueue = errors.New("does not exist")

// checkQueueArg checks the value of the queue flag flagName before any
// call: present, and a queue URL or a valid queue name.
func checkQueueArg(flagName, q string) error {
	if q == "" {
		return usageError("--%s is required", flagName)
	}
	if strings.Contains(q, "://") {
		if u, err := url.Parse(q); err != nil || u.Host == "" || queueNameOf(q) == "" {
			return usageError("--%s %q is neither a queue URL nor a valid queue name", flagName, q)
		}
		return nil
	}
	if !wire.ValidQueueName(q) {
		return usageError("--%s %q is neither a queue URL nor a valid queue name (1 to %d characters of A-Z a-z 0-9 - _, and .fifo at the end of a FIFO queue's)", flagName, q, wire.MaxQueueNameLength)
	}
	return nil
}

// resolveQueue returns the URL of a queue given by URL or by name (one
// GetQueueUrl call for a name, one GetQueueAttributes call for a URL), so
// that a missing queue is reported the same way whichever was given.
func resolveQueue(ctx context.Context, client *sqs.Client, flagName, q string) (string, error) {
	if err := checkQueueArg(flagName, q); err != nil {
		return "", err
	}
	if strings.Contains(q, "://") {
		_, err := client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
			QueueUrl: aws.String(q), AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameQueueArn},
		})
		var apiErr smithy.APIError
		switch {
		case err == nil:
			return q, nil
		case awserr.IsQueueDoesNotExist(err):
			return "", fmt.Errorf("--%s: queue %q %w", flagName, q, errNoQueue)
		case errors.As(err, &apiErr):
			// A caller may send to a queue whose attributes it may not
			// read (AccessDenied): the URL stands, and the command's own
			// calls say whether they are allowed.
			return q, nil
		default:
			return "", fmt.Errorf("--%s: GetQueueAttributes %q: %w", flagName, q, err)
		}
	}
	out, err := client.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(q)})
	if err != nil {
		if awserr.IsQueueDoesNotExist(err) {
			return "", fmt.Errorf("--%s: queue %q %w", flagName, q, errNoQueue)
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
