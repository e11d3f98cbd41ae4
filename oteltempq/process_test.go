package oteltempq_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/tempqueues/tempqueues/internal/testkit/child"
	"github.com/tempqueues/tempqueues/internal/testkit/sqstestenv"
	"github.com/tempqueues/tempqueues/oteltempq"
	"github.com/tempqueues/tempqueues/requester"
	"github.com/tempqueues/tempqueues/responder"
)

// The test binary doubles as a traced responder process: with
// TEMPQUEUES_OTEL_CHILD set it serves the queue the environment names
// until its standard input closes, then writes its spans as JSON.
func TestMain(m *testing.M) {
	if os.Getenv("TEMPQUEUES_OTEL_CHILD") != "" {
		if err := childResponder(); err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func childResponder() error {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	inst, err := oteltempq.New(func(o *oteltempq.Options) { o.TracerProvider = tp })
	if err != nil {
		return err
	}
	client := sqstestenv.NewClient(os.Getenv("CHILD_ENDPOINT"), nil)
	r, err := responder.New(client, inst.Responder, func(o *responder.Options) { o.PollWaitTime = time.Second })
	if err != nil {
		return err
	}
	served := make(chan error, 1)
	go func() {
		served <- r.Serve(context.Background(), os.Getenv("CHILD_QUEUE"), responder.HandlerFunc(func(ctx context.Context, req *responder.Request) (*responder.Reply, error) {
			return &responder.Reply{Body: fmt.Sprintf("re: %s from %d", req.Body(), os.Getpid())}, nil
		}))
	}()
	fmt.Println("ready", os.Getpid())
	_, _ = io.Copy(io.Discard, os.Stdin) // until the parent closes it
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := r.Shutdown(ctx); err != nil {
		return err
	}
	if err := <-served; err != nil {
		return err
	}
	b, err := json.Marshal(spans(exp.GetSpans()))
	if err != nil {
		return err
	}
	return os.WriteFile(os.Getenv("CHILD_SPANS"), b, 0o600)
}

// TestTraceAcrossProcesses is the acceptance test: a requester in this
// process, a responder in a child process, one trace ID over the request's
// send, the handler and the reply, carried by AWSTraceHeader alone.
func TestTraceAcrossProcesses(t *testing.T) {
	b := sqstestenv.SQSTest(t) // fauxqs drops AWSTraceHeader
	inst, exp, _ := setup(t, false)
	client, _ := b.Client(t)
	q := createQueue(t, client, "otelproc")
	out := filepath.Join(t.TempDir(), "spans.json")

	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "TEMPQUEUES_OTEL_CHILD=1", "CHILD_ENDPOINT="+b.Endpoint, "CHILD_QUEUE="+q, "CHILD_SPANS="+out)
	cmd.Stderr = os.Stderr
	pid, stdin, err := child.Start(cmd, "ready", 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = stdin.Close(); _ = cmd.Wait() }()

	rq, err := requester.New(client, inst.Requester, func(o *requester.Options) { o.DisableSweeping = true })
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rq.Close(context.Background()) }()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m, err := rq.SendMessageAndGetResponse(ctx, &sqs.SendMessageInput{QueueUrl: &q, MessageBody: aws.String("hi")})
	if err != nil {
		t.Fatal(err)
	}
	if want := "re: hi from " + pid; aws.ToString(m.Body) != want {
		t.Fatalf("reply %q, want %q", aws.ToString(m.Body), want)
	}
	if err := stdin.Close(); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("responder process: %v", err)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var server []span
	if err := json.Unmarshal(data, &server); err != nil {
		t.Fatal(err)
	}
	reply := checkRoundTrip(t, spans(exp.GetSpans()), server)
	checkReplyContext(t, m, reply, true, false)
}
