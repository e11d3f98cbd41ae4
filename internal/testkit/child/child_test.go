package child

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestMain lets the test binary play the child: with CHILD_MODE set it
// behaves as the mode says instead of running the tests.
func TestMain(m *testing.M) {
	switch os.Getenv("CHILD_MODE") {
	case "":
		os.Exit(m.Run())
	case "serve": // a server: announce, then run until stdin closes
		fmt.Println("starting up")
		fmt.Println("listening on  http://127.0.0.1:1234 ")
		_, _ = io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	case "quit": // ends without the line
		fmt.Println("failed to listen")
		os.Exit(3)
	case "silent": // never says anything, runs until stdin closes
		_, _ = io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	}
}

func helper(t *testing.T, mode string) *exec.Cmd {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), "CHILD_MODE="+mode)
	return cmd
}

func TestStartFindsTheLineAndStopsWithStdin(t *testing.T) {
	cmd := helper(t, "serve")
	v, stdin, err := Start(cmd, "listening on", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if v != "http://127.0.0.1:1234" {
		t.Errorf("value %q, want the URL after the marker, trimmed", v)
	}
	if err := stdin.Close(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("child exited with %v after its stdin closed", err)
		}
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("child still running 10s after its stdin closed")
	}
}

func TestStartFailsWhenTheOutputEnds(t *testing.T) {
	cmd := helper(t, "quit")
	_, _, err := Start(cmd, "listening on", 10*time.Second)
	if err == nil || !strings.Contains(err.Error(), "ended its output") {
		t.Fatalf("err = %v, want the output ending without the line", err)
	}
	if cmd.ProcessState == nil {
		t.Error("the child was not waited for")
	}
}

func TestStartTimesOutAndKills(t *testing.T) {
	cmd := helper(t, "silent")
	start := time.Now()
	_, _, err := Start(cmd, "listening on", 300*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "within 300ms") {
		t.Fatalf("err = %v, want a timeout", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Start took %v", d)
	}
	if cmd.ProcessState == nil || cmd.ProcessState.Success() {
		t.Errorf("state %v, want the child killed and waited for", cmd.ProcessState)
	}
}
