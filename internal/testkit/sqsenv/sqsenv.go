// Package sqsenv picks the SQS server a command or example talks to: the
// embedded sqstest server by default, an explicit endpoint (fauxqs, another
// emulator), or AWS as configured by the environment (credentials, region,
// profile, AWS_ENDPOINT_URL_SQS).
//
// AWS_ENDPOINT_URL_SQS alone is enough against a local emulator: when it
// names a loopback host (127.0.0.0/8, ::1, localhost) and no credentials or
// region are configured, dummy static credentials and us-east-1 stand in, so
// that the SDK neither fails on a missing region nor waits for EC2 instance
// metadata. Any other endpoint, and AWS itself, get the SDK's own chains.
package sqsenv

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/credentials/ec2rolecreds"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/tempqueues/tempqueues/internal/callcount"
	"github.com/tempqueues/tempqueues/internal/httpbody"
	"github.com/tempqueues/tempqueues/sqstest"
)

// EndpointEnv is the environment variable that names an SQS endpoint, as
// the AWS SDKs and CLI read it.
const EndpointEnv = "AWS_ENDPOINT_URL_SQS"

// emulatorRegion is the region of emulator endpoints when none is
// configured: emulators accept any, and us-east-1 is the SDKs' habit.
const emulatorRegion = "us-east-1"

// ErrUsage marks the errors of Open that a command line or environment
// caused (an invalid endpoint URL, no region for AWS): a command reports
// them as usage errors, not as failures of the server.
var ErrUsage = errors.New("bad SQS server configuration")

// usageError is an ErrUsage with its own message.
type usageError struct{ msg string }

func (e *usageError) Error() string        { return e.msg }
func (e *usageError) Is(target error) bool { return target == ErrUsage }

func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// Flags are the server-selection flags, named as the AWS CLI names them.
type Flags struct {
	EndpointURL string // --endpoint-url: an SQS-compatible endpoint, dummy credentials
	Region      string // --region
	Profile     string // --profile
	AWS         bool   // --aws: use the AWS configuration even without AWS_ENDPOINT_URL_SQS
}

// Register adds the flags to fs.
func (f *Flags) Register(fs *flag.FlagSet) {
	fs.StringVar(&f.EndpointURL, "endpoint-url", "", "SQS-compatible endpoint URL (an emulator); dummy credentials are used")
	fs.StringVar(&f.Region, "region", "", "AWS region (default: AWS_REGION or the profile's; us-east-1 for an emulator endpoint; AWS needs one)")
	fs.StringVar(&f.Profile, "profile", "", "AWS shared-config profile")
	fs.BoolVar(&f.AWS, "aws", false, "use AWS as configured by the environment even when "+EndpointEnv+" is unset")
}

// Options configure Open.
type Options struct {
	// Logger receives, at debug level, how the client was configured:
	// the server, and the credentials and region that stood in for missing
	// ones. Nil is silent.
	Logger *slog.Logger
}

// Env is an opened SQS client.
type Env struct {
	Client  *sqs.Client
	Counter *callcount.Counter // every API call the client makes
	// Where describes the server: "embedded sqstest at http://...",
	// "endpoint http://...", or "AWS (region ...)".
	Where string
	// Endpoint is the endpoint URL the client was given (--endpoint-url or
	// AWS_ENDPOINT_URL_SQS); empty when the SDK picks AWS's own.
	Endpoint string
	// Server is the embedded server, nil otherwise.
	Server *sqstest.Server
}

// Close stops the embedded server, if any. It waits at most 10 s for the
// server's requests to end: the commands and examples that call it are
// exiting, and abandoned requests die with the process.
func (e *Env) Close() {
	if e.Server != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = e.Server.Close(ctx)
	}
}

// Embedded reports whether f selects the embedded server: no endpoint flag,
// no --aws, no profile, and no AWS_ENDPOINT_URL_SQS in the environment.
func (f Flags) Embedded() bool {
	return f.EndpointURL == "" && !f.AWS && f.Profile == "" && os.Getenv(EndpointEnv) == ""
}

// Open returns a client for the server f selects. Errors the flags or the
// environment caused match ErrUsage.
func Open(ctx context.Context, f Flags, opts ...func(*Options)) (*Env, error) {
	var o Options
	for _, opt := range opts {
		opt(&o)
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	counter := new(callcount.Counter)
	if f.Embedded() {
		srv := sqstest.NewServer(func(so *sqstest.Options) {
			if f.Region != "" {
				so.Region = f.Region
			}
		})
		log.Debug("SQS server: embedded sqstest", "url", srv.URL())
		return &Env{
			Client:  srv.Client(sqs.WithAPIOptions(counter.Register)),
			Counter: counter, Where: "embedded sqstest at " + srv.URL(), Server: srv,
		}, nil
	}

	// The endpoint: --endpoint-url, else AWS_ENDPOINT_URL_SQS (which the
	// SDK reads by itself), else AWS's.
	endpoint, source := f.EndpointURL, "--endpoint-url"
	if endpoint == "" {
		endpoint, source = os.Getenv(EndpointEnv), EndpointEnv
	}
	loopback := false
	if endpoint != "" {
		u, err := url.Parse(endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, usagef("%s %q is not a URL: want http://host[:port] or https://host[:port]", source, endpoint)
		}
		loopback = isLoopback(u.Hostname())
	}
	// An explicit --endpoint-url is an emulator; so is a loopback
	// AWS_ENDPOINT_URL_SQS. Other endpoints may be AWS's own.
	emulator := f.EndpointURL != "" || loopback

	var lo []func(*config.LoadOptions) error
	if f.Region != "" {
		lo = append(lo, config.WithRegion(f.Region))
	}
	if f.Profile != "" {
		lo = append(lo, config.WithSharedConfigProfile(f.Profile))
	}
	if f.EndpointURL != "" {
		// An emulator checks no signature: never resolve (or wait for)
		// real credentials for it.
		lo = append(lo, config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("tempq", "tempq", "")))
	}
	cfg, err := config.LoadDefaultConfig(ctx, lo...)
	if err != nil {
		var missing config.SharedConfigProfileNotExistError
		if errors.As(err, &missing) {
			return nil, usagef("AWS profile %q does not exist", missing.Profile)
		}
		return nil, fmt.Errorf("loading AWS configuration: %w", err)
	}
	if cfg.Region == "" {
		if !emulator {
			return nil, usagef("no AWS region: set AWS_REGION or pass --region")
		}
		cfg.Region = emulatorRegion
		log.Debug("no region configured for an emulator endpoint: using "+emulatorRegion, "endpoint", endpoint)
	}
	if loopback && f.EndpointURL == "" && aws.IsCredentialsProvider(cfg.Credentials, (*ec2rolecreds.Provider)(nil)) {
		// Nothing configured: the SDK's chain ended at EC2 instance
		// metadata, which a laptop running an emulator does not have.
		cfg.Credentials = credentials.NewStaticCredentialsProvider("tempq", "tempq", "")
		log.Debug("no AWS credentials configured for a loopback endpoint: using dummy static credentials", "endpoint", endpoint)
	}

	where := "AWS (region " + cfg.Region + ")"
	switch {
	case f.EndpointURL != "":
		where = "endpoint " + endpoint
	case endpoint != "":
		where = "endpoint " + endpoint + " (" + EndpointEnv + ")"
	}
	log.Debug("SQS server: "+where, "region", cfg.Region)
	client := sqs.NewFromConfig(cfg, sqs.WithAPIOptions(counter.Register), httpbody.Buffer, func(so *sqs.Options) {
		if f.EndpointURL != "" {
			so.BaseEndpoint = aws.String(f.EndpointURL)
		}
	})
	return &Env{Client: client, Counter: counter, Where: where, Endpoint: endpoint}, nil
}

// isLoopback reports whether host names this machine.
func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
