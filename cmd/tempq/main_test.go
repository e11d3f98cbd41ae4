package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/tempqueues/tempqueues/internal/testkit/child"
	"github.com/tempqueues/tempqueues/internal/testkit/sqstestenv"
)

// binDir holds the built command; TestMain removes it.
var binDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "tempq-test")
	if err != nil {
		panic(err)
	}
	binDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// tempqBinary builds the command once per test binary.
var tempqBinary = sync.OnceValues(func() (string, error) {
	bin := filepath.Join(binDir, "tempq")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		return "", &buildError{out: string(out), err: err}
	}
	return bin, nil
})

type buildError struct {
	out string
	err error
}

func (e *buildError) Error() string { return e.err.Error() + "\n" + e.out }

// tempq runs the built binary and returns its stdout, stderr and exit code.
func tempq(t *testing.T, env []string, args ...string) (string, string, int) {
	t.Helper()
	return tempqStdin(t, "", env, args...)
}

// tempqStdin is tempq with stdin as the standard input: bodies larger
// than an argument may be ("-" reads the body from it).
func tempqStdin(t *testing.T, stdin string, env []string, args ...string) (string, string, int) {
	t.Helper()
	bin, err := tempqBinary()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return stdout.String(), stderr.String(), code
}

func TestUsageAndUnknownCommand(t *testing.T) {
	t.Parallel()
	_, stderr, code := tempq(t, nil)
	if code != 2 || !strings.Contains(stderr, "emulator") {
		t.Fatalf("no args: code %d, stderr %q", code, stderr)
	}
	_, stderr, code = tempq(t, nil, "frobnicate")
	if code != 2 || !strings.Contains(stderr, `unknown command "frobnicate"`) {
		t.Fatalf("unknown command: code %d, stderr %q", code, stderr)
	}
	_, stderr, code = tempq(t, nil, "emulator", "--no-such-flag")
	if code != 2 {
		t.Fatalf("bad flag: code %d, stderr %q", code, stderr)
	}
	stdout, stderr, code := tempq(t, nil, "emulator", "--help")
	if code != 0 || !strings.Contains(stdout, "-addr") || stderr != "" {
		t.Fatalf("--help: code %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}

func TestEmulatorServesTheSDK(t *testing.T) {
	t.Parallel()
	bin, err := tempqBinary()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "emulator", "--addr", "127.0.0.1:0")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	go func() { _, _ = io.Copy(io.Discard, stdout) }()
	i := strings.Index(line, "http://")
	if i < 0 {
		t.Fatalf("emulator printed %q, want its URL", line)
	}
	client := sqstestenv.NewClient(strings.TrimSpace(line[i:]), nil)
	if _, err := client.ListQueues(context.Background(), &sqs.ListQueuesInput{}); err != nil {
		t.Fatalf("ListQueues against the emulator: %v", err)
	}
}

// TestEmulatorUntilStdinEOF checks the way tempq bench runs its server: the
// emulator adds --latency to every call and stops once its standard input
// closes, so that it cannot outlive the process that started it.
func TestEmulatorUntilStdinEOF(t *testing.T) {
	t.Parallel()
	bin, err := tempqBinary()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "emulator", "--addr", "127.0.0.1:0", "--latency", "50ms", "--until-stdin-eof")
	url, stdin, err := child.Start(cmd, "sqstest listening on ", 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		_ = cmd.Process.Kill() // a no-op once it has exited
		<-exited
	}()
	client := sqstestenv.NewClient(url, nil)
	start := time.Now()
	if _, err := client.ListQueues(context.Background(), &sqs.ListQueuesInput{}); err != nil {
		t.Fatalf("ListQueues against the emulator: %v", err)
	}
	if d := time.Since(start); d < 50*time.Millisecond {
		t.Errorf("ListQueues took %v, want at least the 50ms of --latency", d)
	}
	if err := stdin.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		exited <- err // for the deferred wait
		if err != nil {
			t.Fatalf("emulator exited with %v after its stdin closed, want a clean exit", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("emulator still running 10s after its stdin closed")
	}
}
