package main

import (
	"bytes"
	"context"
	"runtime"
	"strings"
	"testing"
	"time"
)

// The main example must keep working: run it as `go run ./examples/login`
// does, on the embedded server.
func TestLoginExample(t *testing.T) {
	t.Setenv("AWS_ENDPOINT_URL_SQS", "")
	before := runtime.NumGoroutine()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var out bytes.Buffer
	if err := run(ctx, nil, &out); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	s := out.String()
	for _, want := range []string{"embedded sqstest", `ok     "welcome, alice"`, `denied "invalid user name or password"`, "5 requests, 5 replies, 0 timed out"} {
		if !strings.Contains(s, want) {
			t.Errorf("output lacks %q:\n%s", want, s)
		}
	}
	checkGoroutines(t, before)
}

func TestSeparateProcessesNeedASharedServer(t *testing.T) {
	t.Setenv("AWS_ENDPOINT_URL_SQS", "")
	if err := run(context.Background(), []string{"-mode", "client"}, new(bytes.Buffer)); err == nil {
		t.Fatal("client mode on the embedded server must fail")
	}
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
