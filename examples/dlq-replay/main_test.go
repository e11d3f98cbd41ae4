package main

import (
	"bytes"
	"context"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/tempqueues/tempqueues/internal/testkit/leakcheck"
)

// The example must keep working as `go run ./examples/dlq-replay` runs it,
// on the embedded server.
func TestDLQReplayExample(t *testing.T) {
	t.Setenv("AWS_ENDPOINT_URL_SQS", "")
	before := runtime.NumGoroutine()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var out bytes.Buffer
	if err := run(ctx, nil, &out); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	s := out.String()
	t.Log("\n" + s)
	for _, want := range []string{
		"embedded sqstest", `client: "processed order 1"`,
		"redrive: replay request", "attempt 1, delay", "(at most 1s)", "attempt 2, delay", "(at most 2s)",
		"after 2 replays: redrive: maximum replay attempts reached",
		`parking queue: "poison order 2"`, "(same: true), customer c-17, replays 2",
		"the service saw the poison order 6 times; redrive: replayed 2, parked 1, failed 0",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	leakcheck.CheckCount(t, before) // real time: the example runs as users run it
}
