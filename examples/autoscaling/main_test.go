package main

import (
	"bytes"
	"context"
	"encoding/json"
	"runtime"
	"strings"
	"testing"
	"time"
)

// The example must keep working as `go run ./examples/autoscaling` runs
// it, on the embedded server.
func TestAutoscalingExample(t *testing.T) {
	t.Setenv("AWS_ENDPOINT_URL_SQS", "")
	before := runtime.NumGoroutine()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var out bytes.Buffer
	if err := run(ctx, []string{"-requests", "100", "-work", "40ms", "-latency", "200ms"}, &out); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	s := out.String()
	t.Log("\n" + s)
	for _, want := range []string{"embedded sqstest", "queued 100 requests", "per-worker", "drained: 100 requests handled"} {
		if !strings.Contains(s, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	// The last figures: an empty queue, a measured processing time near
	// 40 ms, a target of 4 x 200 ms / 40 ms = about 20, and the minimum of 1
	// worker.
	_, js, ok := strings.Cut(s, "expvar: ")
	if !ok {
		t.Fatal("no expvar line")
	}
	var f struct {
		Visible    int64   `json:"visible"`
		Processing int64   `json:"processing_time_ns"`
		Target     float64 `json:"target_backlog_per_worker"`
		Desired    int     `json:"desired_workers"`
	}
	if err := json.Unmarshal([]byte(js), &f); err != nil {
		t.Fatal(err)
	}
	if p := time.Duration(f.Processing); f.Visible != 0 || p < 40*time.Millisecond || p > 200*time.Millisecond || f.Target < 4 || f.Target > 20.5 || f.Desired != 1 {
		t.Errorf("last figures %+v", f)
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
