package sqsgrpc_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"google.golang.org/grpc"
	"google.golang.org/grpc/interop"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"

	"github.com/tempqueues/tempqueues/internal/testkit/sqstestenv"
	"github.com/tempqueues/tempqueues/sqsgrpc"
)

// interopCases are grpc-go's interoperability client cases
// (google.golang.org/grpc/interop, named as in grpc's
// doc/interop-test-descriptions.md), each run against grpc-go's own
// interop server over SQS. A supported case must pass; one that is not
// (client-streaming and bidirectional RPCs fail with codes.Unimplemented)
// is run and reported as skipped, and fails the test once it passes, so
// that it gets marked supported: flip its one line.
var interopCases = []struct {
	name      string
	supported bool
	run       func(ctx context.Context, cc grpc.ClientConnInterface)
}{
	{"empty_unary", true, onTestService(interop.DoEmptyUnaryCall)},
	{"large_unary", true, onTestService(interop.DoLargeUnaryCall)}, // 271828 bytes out, 314159 back: base64 fits one message
	{"client_streaming", true, onTestService(interop.DoClientStreaming)},
	{"server_streaming", true, onTestService(interop.DoServerStreaming)},
	{"ping_pong", true, onTestService(interop.DoPingPong)},
	{"empty_stream", true, onTestService(interop.DoEmptyStream)},
	{"timeout_on_sleeping_server", true, onTestService(interop.DoTimeoutOnSleepingServer)},
	{"cancel_after_begin", true, onTestService(interop.DoCancelAfterBegin)},
	{"cancel_after_first_response", true, onTestService(interop.DoCancelAfterFirstResponse)},
	{"custom_metadata", true, onTestService(interop.DoCustomMetadata)},
	{"status_code_and_message", true, onTestService(interop.DoStatusCodeAndMessage)},
	{"special_status_message", true, onTestService(interop.DoSpecialStatusMessage)},
	{"unimplemented_service", true, func(ctx context.Context, cc grpc.ClientConnInterface) {
		interop.DoUnimplementedService(ctx, testgrpc.NewUnimplementedServiceClient(cc))
	}},
}

// onTestService runs a case of the TestService on cc, with no call options.
func onTestService(do func(context.Context, testgrpc.TestServiceClient, ...grpc.CallOption)) func(context.Context, grpc.ClientConnInterface) {
	return func(ctx context.Context, cc grpc.ClientConnInterface) { do(ctx, testgrpc.NewTestServiceClient(cc)) }
}

const (
	// interopEnv names the case, the endpoint, the request queue and the
	// requester's prefix for TestInteropChild, as case\nendpoint\nqueue\nprefix.
	interopEnv = "SQSGRPC_INTEROP_CHILD"
	// interopPassed is what TestInteropChild prints once its case passed.
	interopPassed = "sqsgrpc interop case passed: "
	// interopCaseTimeout bounds a case's calls, in the child.
	interopCaseTimeout = 10 * time.Second
	// interopChildTimeout bounds a child process.
	interopChildTimeout = 60 * time.Second
)

// TestInterop runs grpc-go's interop client cases against its interop
// server (interop.NewTestServer) over SQS: the server is served in this
// process, each case's client (a requester and a ClientConn) in a child
// process, since the cases report failure with grpclog's Fatal, which
// exits. The children of a backend run at once.
func TestInterop(t *testing.T) {
	sqstestenv.Each(t, func(t *testing.T, b *sqstestenv.Backend) {
		srv := sqsgrpc.NewServer()
		testgrpc.RegisterTestServiceServer(srv, interop.NewTestServer())
		raw, queue, prefix := serve(t, b, srv)

		type result struct {
			out []byte
			err error
		}
		results := make([]result, len(interopCases))
		var wg sync.WaitGroup
		for i, c := range interopCases {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx, cancel := context.WithTimeout(context.Background(), interopChildTimeout)
				defer cancel()
				cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestInteropChild$", "-test.count=1")
				cmd.Env = append(os.Environ(), interopEnv+"="+strings.Join([]string{c.name, b.Endpoint, queue, prefix}, "\n"))
				cmd.WaitDelay = 5 * time.Second
				out, err := cmd.CombinedOutput()
				switch {
				case ctx.Err() != nil:
					err = fmt.Errorf("no end within %v: %w", interopChildTimeout, ctx.Err())
				case err == nil && !bytes.Contains(out, []byte(interopPassed+c.name+"\n")):
					err = errors.New("the child exited without running the case")
				}
				results[i] = result{out, err}
			}()
		}
		wg.Wait()
		// A child that exited through Fatal did not close its requester:
		// delete the host queues it left.
		ctx := timeout(t, 20*time.Second)
		left, err := raw.ListQueues(ctx, &sqs.ListQueuesInput{QueueNamePrefix: aws.String(prefix)})
		if err != nil {
			t.Errorf("listing the children's host queues: %v", err)
		} else {
			t.Logf("deleting %d host queues the children left", len(left.QueueUrls))
			for _, u := range left.QueueUrls {
				_, _ = raw.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: aws.String(u)})
			}
		}

		for i, c := range interopCases {
			t.Run(c.name, func(t *testing.T) {
				r := results[i]
				switch {
				case r.err == nil && !c.supported:
					t.Errorf("%s passes now: mark it supported in interopCases", c.name)
				case r.err != nil && c.supported:
					t.Errorf("%s failed on %s: %v; output:\n%s", c.name, b.Name, r.err, r.out)
				case r.err != nil:
					t.Skipf("not yet supported: %s: %s", c.name, fatalLine(r.out, r.err))
				}
			})
		}
	})
}

// fatalLine returns the line of a child's output that reports why its
// case failed (grpclog's FATAL), or err when there is none.
func fatalLine(out []byte, err error) string {
	for _, line := range strings.Split(string(out), "\n") {
		if i := strings.Index(line, "FATAL: "); i >= 0 {
			return strings.TrimSpace(line[i:])
		}
	}
	return err.Error()
}

// TestInteropChild runs one interop case as TestInterop's child process:
// it passes, and prints interopPassed with the case's name, when the case
// did not exit the process.
func TestInteropChild(t *testing.T) {
	env := os.Getenv(interopEnv)
	if env == "" {
		t.Skip("TestInterop's child process")
	}
	f := strings.Split(env, "\n")
	if len(f) != 4 {
		t.Fatalf("%s=%q: want case, endpoint, queue and prefix", interopEnv, env)
	}
	name, endpoint, queue, prefix := f[0], f[1], f[2], f[3]
	var run func(context.Context, grpc.ClientConnInterface)
	for _, c := range interopCases {
		if c.name == name {
			run = c.run
		}
	}
	if run == nil {
		t.Fatalf("no interop case %q", name)
	}
	b := sqstestenv.External(t) // real AWS has no endpoint
	if endpoint != "" {
		b = &sqstestenv.Backend{Name: "parent's", Endpoint: endpoint}
	}
	if b == nil {
		t.Fatal("no endpoint and no external backend")
	}
	raw, _ := b.Client(t)
	cc := sqsgrpc.NewClientConn(newRequester(t, raw, prefix), queue)
	run(timeout(t, interopCaseTimeout), cc)
	fmt.Println(interopPassed + name)
}
