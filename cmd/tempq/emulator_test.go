package main

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/tempqueues/tempqueues/internal/testkit/sqstestenv"
	"github.com/tempqueues/tempqueues/internal/testkit/testtime"
)

// lockedBuffer is a bytes.Buffer that the emulator and the test may use at
// once.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// waitFor polls buf until it contains s.
func waitFor(t *testing.T, buf *lockedBuffer, s string) {
	t.Helper()
	if !testtime.Until(10*time.Second, func() bool { return strings.Contains(buf.String(), s) }) {
		t.Fatalf("no %q in %q", s, buf.String())
	}
}

// -v logs every request (the server logs them at debug level, which -v
// must enable), and the emulator stops cleanly when its context ends.
func TestEmulatorVerboseLogsRequests(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr lockedBuffer
	errc := make(chan error, 1)
	go func() { errc <- runEmulator(ctx, []string{"--addr", "127.0.0.1:0", "-v"}, &stdout, &stderr) }()
	waitFor(t, &stdout, "\n")
	url := strings.TrimSpace(strings.TrimPrefix(stdout.String(), "sqstest listening on "))
	client := sqstestenv.NewClient(url, nil)
	if _, err := client.ListQueues(ctx, &sqs.ListQueuesInput{}); err != nil {
		t.Fatalf("ListQueues against %q: %v", url, err)
	}
	waitFor(t, &stderr, "op=ListQueues")
	cancel()
	select {
	case err := <-errc:
		if err != nil {
			t.Fatalf("emulator returned %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("emulator still running 10 s after its context ended")
	}
}

// tempq embeds sqstest but must not link package testing (its flags and
// code would ship in the binary): sqstest.Start takes sqstest.TB for that.
func TestBinaryDoesNotLinkTesting(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, pkg := range strings.Fields(string(out)) {
		if pkg == "testing" {
			t.Fatal("tempq links package testing; go list -deps -f '{{.ImportPath}} {{.Imports}}' shows which package imports it")
		}
	}
}

// --latency-p99 needs a positive --latency below it.
func TestEmulatorLatencyP99Flags(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"--latency-p99", "40ms"},
		{"--latency", "10ms", "--latency-p99", "10ms"},
		{"--latency", "10ms", "--latency-p99", "5ms"},
	} {
		var stdout, stderr lockedBuffer
		err := runEmulator(context.Background(), append([]string{"--addr", "127.0.0.1:0"}, args...), &stdout, &stderr)
		var ee *exitError
		if !errors.As(err, &ee) || ee.code != exitUsage || !strings.Contains(err.Error(), "--latency-p99") {
			t.Errorf("%v: %v, want a usage error about --latency-p99", args, err)
		}
	}
}
