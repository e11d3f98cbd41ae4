// Package sqsenv picks the SQS server a command or example talks to: the
// embedded sqstest server by default, an explicit endpoint (fauxqs, another
// emulator), or AWS as configured by the environment (credentials, region,
// profile, AWS_ENDPOINT_URL_SQS).
package sqsenv

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/smithy-go/middleware"

	"github.com/tempqueues/tempqueues/sqsapi"
	"github.com/tempqueues/tempqueues/sqstest"
)

// Flags are the server-selection flags, named as the AWS CLI names them.
type Flags struct {
	EndpointURL string // --endpoint-url: an SQS-compatible endpoint, dummy credentials
	Region      string // --region
	Profile     string // --profile
	AWS         bool   // --aws: use the AWS configuration even without AWS_ENDPOINT_URL_SQS
}

// Register adds the flags to fs.
func (f *Flags) Register(fs *flag.FlagSet) {
	fs.StringVar(&f.EndpointURL, "endpoint-url", "", "SQS-compatible endpoint (an emulator); dummy credentials are used")
	fs.StringVar(&f.Region, "region", "", "AWS region (default from the environment, or us-east-1)")
	fs.StringVar(&f.Profile, "profile", "", "AWS shared-config profile")
	fs.BoolVar(&f.AWS, "aws", false, "use AWS as configured by the environment even when AWS_ENDPOINT_URL_SQS is unset")
}

// Env is an opened SQS client.
type Env struct {
	Client  *sqs.Client
	Counter *sqsapi.CallCounter // every API call the client makes
	// Where describes the server: "embedded sqstest at http://...",
	// "endpoint http://...", or "AWS (region ...)".
	Where string
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
	return f.EndpointURL == "" && !f.AWS && f.Profile == "" && os.Getenv("AWS_ENDPOINT_URL_SQS") == ""
}

// Open returns a client for the server f selects.
func Open(ctx context.Context, f Flags) (*Env, error) {
	counter := new(sqsapi.CallCounter)
	region := f.Region
	if f.Embedded() {
		srv := sqstest.NewServer(func(o *sqstest.Options) {
			if region != "" {
				o.Region = region
			}
		})
		return &Env{
			Client:  srv.Client(sqs.WithAPIOptions(counter.Register)),
			Counter: counter, Where: "embedded sqstest at " + srv.URL(), Server: srv,
		}, nil
	}
	if f.EndpointURL != "" {
		if region == "" {
			region = "us-east-1"
		}
		client := sqs.New(sqs.Options{
			Region:       region,
			BaseEndpoint: aws.String(f.EndpointURL),
			Credentials:  credentials.NewStaticCredentialsProvider("tempq", "tempq", ""),
			APIOptions:   []func(*middleware.Stack) error{counter.Register},
		}, sqsapi.BufferRequestBodies)
		return &Env{Client: client, Counter: counter, Where: "endpoint " + f.EndpointURL}, nil
	}
	var opts []func(*config.LoadOptions) error
	if region != "" {
		opts = append(opts, config.WithRegion(region))
	}
	if f.Profile != "" {
		opts = append(opts, config.WithSharedConfigProfile(f.Profile))
	}
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("loading AWS configuration: %w", err)
	}
	if cfg.Region == "" {
		return nil, errors.New("no AWS region: set AWS_REGION or pass --region")
	}
	where := "AWS (region " + cfg.Region + ")"
	if ep := os.Getenv("AWS_ENDPOINT_URL_SQS"); ep != "" {
		where = "endpoint " + ep + " (AWS_ENDPOINT_URL_SQS)"
	}
	return &Env{Client: sqs.NewFromConfig(cfg, sqs.WithAPIOptions(counter.Register), sqsapi.BufferRequestBodies), Counter: counter, Where: where}, nil
}
