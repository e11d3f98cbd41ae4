package main

import (
	"bufio"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tempqueues/tempqueues/sqstest"
)

// With --aws there is no endpoint named, but the SDK resolves one: a
// network failure is one line naming it, not the SDK's error after its
// retries. An unknown region's endpoint does not resolve.
func TestAWSNetworkFailureNamesTheEndpoint(t *testing.T) {
	t.Parallel()
	env := withEnv("AWS_REGION=nowhere-1", "AWS_ACCESS_KEY_ID=AKIDTEMPQ", "AWS_SECRET_ACCESS_KEY=x",
		"HTTPS_PROXY=", "https_proxy=", "HTTP_PROXY=", "http_proxy=", "ALL_PROXY=", "all_proxy=")
	const endpoint = "https://sqs.nowhere-1.amazonaws.com"
	for _, args := range [][]string{{"queues", "--aws"}, {"bench", "--aws", "--rounds", "1"}} {
		start := time.Now()
		_, stderr, code := tempq(t, env, args...)
		if code != exitFailure || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, "cannot connect to the SQS server at "+endpoint) {
			t.Errorf("%v: code %d, stderr %q", args, code, stderr)
		}
		if took := time.Since(start); took > 10*time.Second {
			t.Errorf("%v: failed after %v", args, took)
		}
	}
}

// tempq bench takes -v like every other command that talks to SQS.
func TestBenchVerbose(t *testing.T) {
	t.Parallel()
	srv := sqstest.Start(t).URL()
	_, stderr, code := tempq(t, bareEnv, "bench", "-v", "--endpoint-url", srv, "--contenders", "floor",
		"--concurrency", "1", "--rounds", "1", "--duration", "100ms", "--create-wait", "0",
		"--idle-window", "0", "--stop-idle", "0", "--memory-queues", "0")
	if code != 0 || !strings.Contains(stderr, "level=DEBUG") || !strings.Contains(stderr, srv) {
		t.Fatalf("bench -v: code %d, stderr %q", code, stderr)
	}
}

// With --json every line serve-echo prints is JSON, its stop line
// included, and stderr stays empty.
func TestServeEchoJSONStop(t *testing.T) {
	t.Parallel()
	_, ep, _ := server(t)
	bin, err := tempqBinary()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, append([]string{"serve-echo", "--json", "--queue", "echo"}, ep...)...)
	cmd.Env = append(os.Environ(), noEnvEndpoint...)
	pipe, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill() }()
	var stdout strings.Builder
	sc := bufio.NewScanner(pipe)
	if !sc.Scan() || !strings.Contains(sc.Text(), `"serving"`) {
		t.Fatalf("serve-echo printed %q first, stderr %q", sc.Text(), stderr.String())
	}
	stdout.WriteString(sc.Text() + "\n")
	if out, errOut, code := tempq(t, noEnvEndpoint, append([]string{"call", "--queue", "echo", "hi"}, ep...)...); code != 0 || out != "hi\n" {
		t.Fatalf("call: code %d, stdout %q, stderr %q", code, out, errOut)
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	for sc.Scan() {
		stdout.WriteString(sc.Text() + "\n")
	}
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	select {
	case err := <-waited:
		if err != nil {
			t.Fatalf("serve-echo after SIGINT: %v, stderr %q", err, stderr.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("serve-echo did not stop within 10s of SIGINT")
	}
	lines := jsonLines(t, stdout.String())
	last := lines[len(lines)-1]
	if len(lines) != 3 || lines[0]["serving"] == nil || last["stopped"] == nil || last["requests"] != 1.0 || last["replies"] != 1.0 || stderr.Len() != 0 {
		t.Fatalf("serve-echo --json: stdout %q, stderr %q", stdout.String(), stderr.String())
	}
}
