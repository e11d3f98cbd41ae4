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

// checkGoroutines fails t if more goroutines run than before run: the
// example must have stopped everything it started by the time it returns,
// since Close and Shutdown wait for their goroutines. The check allows a
// second, far less than an idle worker's two, for goroutines a Close
// waited for that are still on their way out. (Examples import nothing
// internal, so each keeps its own copy.)
func checkGoroutines(t *testing.T, before int) {
	t.Helper()
	// real: other threads finish exiting in real time
	for deadline := time.Now().Add(time.Second); runtime.NumGoroutine() > before; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines before run, %d after:\n%s", before, runtime.NumGoroutine(), buf[:runtime.Stack(buf, true)])
		}
	}
}
