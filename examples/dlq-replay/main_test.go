package main

import (
	"bytes"
	"context"
	"runtime"
	"strings"
	"testing"
	"time"
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
	checkGoroutines(t, before)
}

// checkGoroutines fails t unless the goroutines running fall back to the
// number before run: the example must stop everything it starts. It polls
// in real time (the example runs as users run it) with its own loop:
// examples import nothing internal.
func checkGoroutines(t *testing.T, before int) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); runtime.NumGoroutine() > before; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines before run, %d after:\n%s", before, runtime.NumGoroutine(), buf[:runtime.Stack(buf, true)])
		}
	}
}
