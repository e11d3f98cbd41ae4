// Package sqstestenv gives tests real SQS-compatible servers to run against:
// the pinned fauxqs emulator (integration/emulator), started once per test
// binary on 127.0.0.1 and stopped when the binary exits, the in-process
// sqstest server, or an external endpoint. Each runs a test on all of them.
//
// Environment:
//
//	TEMPQUEUES_TEST_ENDPOINT=http://127.0.0.1:4566  use this server instead of starting fauxqs
//	TEMPQUEUES_TEST_AWS=1                           use the default AWS config (credentials,
//	                                                region, AWS_ENDPOINT_URL_SQS): real SQS
//	CI=true                                         a missing emulator fails instead of skipping
package sqstestenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/tempqueues/tempqueues/internal/callcount"
	"github.com/tempqueues/tempqueues/internal/httpbody"
	"github.com/tempqueues/tempqueues/internal/testkit/child"
	"github.com/tempqueues/tempqueues/sqstest"
)

// Backend is one SQS-compatible server.
type Backend struct {
	// Name is "fauxqs", "sqstest", "endpoint" or "aws".
	Name string
	// Endpoint is the base URL, empty for real AWS.
	Endpoint string
	// Server is the in-process server of an "sqstest" backend, for its test
	// controls (clock, faults, call counts); nil for the others.
	Server *sqstest.Server

	awsConfig *aws.Config  // set for "aws"
	handler   http.Handler // set for InProcess: clients call it directly
}

// Client returns a new SDK client for the backend with its own API-call
// counter; optFns adjust the client's options.
func (b *Backend) Client(tb testing.TB, optFns ...func(*sqs.Options)) (*sqs.Client, *callcount.Counter) {
	tb.Helper()
	counter := new(callcount.Counter)
	if b.awsConfig != nil {
		return sqs.NewFromConfig(*b.awsConfig, append([]func(*sqs.Options){sqs.WithAPIOptions(counter.Register), httpbody.Buffer}, optFns...)...), counter
	}
	if b.handler != nil {
		return inProcessClient(b.handler, counter, optFns...), counter
	}
	return NewClient(b.Endpoint, counter, optFns...), counter
}

// NewClient returns an SDK client for a local SQS-compatible endpoint, with
// static dummy credentials, region us-east-1, httpbody.Buffer
// (sqsclient.BufferRequestBodies, as every client should have) and, if
// counter is not nil, the API-call counter installed; optFns adjust the
// options.
func NewClient(endpoint string, counter *callcount.Counter, optFns ...func(*sqs.Options)) *sqs.Client {
	opts := sqs.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(endpoint),
		Credentials:  credentials.NewStaticCredentialsProvider("test", "test", ""),
	}
	if counter != nil {
		opts.APIOptions = append(opts.APIOptions, counter.Register)
	}
	// Buffer last, so that it wraps an HTTP client optFns set.
	return sqs.New(opts, append(optFns, httpbody.Buffer)...)
}

var (
	fauxqsOnce sync.Once
	fauxqs     *Backend
	fauxqsErr  error
)

// External reports the backend selected by the environment, or nil when the
// tests should use their own servers.
func External(tb testing.TB) *Backend {
	tb.Helper()
	if ep := os.Getenv("TEMPQUEUES_TEST_ENDPOINT"); ep != "" {
		return &Backend{Name: "endpoint", Endpoint: ep}
	}
	if os.Getenv("TEMPQUEUES_TEST_AWS") == "1" {
		cfg, err := config.LoadDefaultConfig(context.Background())
		if err != nil {
			tb.Fatalf("sqstestenv: loading AWS config: %v", err)
		}
		return &Backend{Name: "aws", awsConfig: &cfg}
	}
	return nil
}

// Fauxqs returns the fauxqs emulator shared by the test binary, starting it on
// first use, or the external backend when the environment names one. When
// the emulator is not installed the test is skipped, or failed under CI=true.
func Fauxqs(tb testing.TB) *Backend {
	tb.Helper()
	if b := External(tb); b != nil {
		return b
	}
	fauxqsOnce.Do(func() { fauxqs, fauxqsErr = startFauxqs() })
	if fauxqsErr != nil {
		if os.Getenv("CI") == "true" {
			tb.Fatalf("sqstestenv: fauxqs unavailable under CI: %v", fauxqsErr)
		}
		tb.Skipf("sqstestenv: skipping, fauxqs unavailable (run `make emulator`): %v", fauxqsErr)
	}
	return fauxqs
}

// EmulatorDir is the directory of the pinned fauxqs install.
func EmulatorDir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..", "integration", "emulator")
}

func startFauxqs() (*Backend, error) {
	dir := EmulatorDir()
	node := filepath.Join(dir, "node_modules", ".bin", "node")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "fauxqs")); err != nil {
		return nil, fmt.Errorf("%s/node_modules/fauxqs missing (npm ci there): %w", dir, err)
	}
	if _, err := os.Stat(node); err != nil {
		return nil, fmt.Errorf("node 22 from the node@22 npm package missing: %w", err)
	}
	cmd := exec.Command(node, "--no-warnings", "start.mjs")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PORT=0")
	cmd.Stderr = os.Stderr
	// The launcher exits when its stdin closes, which happens when this test
	// binary exits for any reason: no emulator outlives its tests.
	url, stdin, err := child.Start(cmd, "READY ", 30*time.Second)
	if err != nil {
		return nil, fmt.Errorf("starting fauxqs: %w", err)
	}
	keepAlive = stdin
	return &Backend{Name: "fauxqs", Endpoint: url}, nil
}

// keepAlive holds the launcher's stdin open for the life of the test binary.
//
//lint:ignore U1000 written only: holding the pipe keeps its finalizer from closing it.
var keepAlive io.WriteCloser

var unsafeChars = regexp.MustCompile(`[^A-Za-z0-9_-]+`)

// QueueName returns a queue name unique to this test and call: a sanitized,
// shortened test name plus a random suffix, prefixed with "tq-". It is always
// a valid SQS queue name.
func QueueName(tb testing.TB, base string) string {
	tb.Helper()
	var b [4]byte
	_, _ = rand.Read(b[:])
	name := unsafeChars.ReplaceAllString(tb.Name()+"-"+base, "_")
	if len(name) > 60 {
		name = name[len(name)-60:]
	}
	return "tq-" + name + "-" + hex.EncodeToString(b[:])
}
