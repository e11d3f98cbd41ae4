package integration_test

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tempqueues/tempqueues/internal/testkit/sqstestenv"
	"github.com/tempqueues/tempqueues/responder"
)

// The test binary doubles as a responder process: with TEMPQUEUES_CHILD set
// it serves the queue named by the environment and prints one line per
// handled request, so tests can run responders as separate processes and
// kill them.
func TestMain(m *testing.M) {
	switch os.Getenv("TEMPQUEUES_CHILD") {
	case "responder":
		os.Exit(childResponder())
	case "session-responder":
		os.Exit(childSessionResponder())
	case "session-caller":
		os.Exit(childSessionCaller())
	}
	flag.Parse()
	if !flagSet("test.parallel") {
		// These tests spend their time waiting on real servers and child
		// processes, not on a CPU: four at a time rather than GOMAXPROCS.
		_ = flag.Set("test.parallel", "4")
	}
	os.Exit(m.Run())
}

// flagSet reports whether the command line set the flag name.
func flagSet(name string) (set bool) {
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

func childResponder() int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	client := sqstestenv.NewClient(os.Getenv("CHILD_ENDPOINT"), nil)
	r, err := responder.New(client, func(o *responder.Options) {
		o.VisibilityTimeout = 2 * time.Second
		o.PollWaitTime = time.Second
		o.Store = responder.NewMemoryStore()
		o.AllowReplyTo = []string{replyPrefix}
	})
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	fmt.Println("ready")
	err = r.Serve(ctx, os.Getenv("CHILD_QUEUE"), responder.HandlerFunc(func(ctx context.Context, req *responder.Request) (*responder.Reply, error) {
		fmt.Println("start", req.ID)
		if d, err := time.ParseDuration(req.Body()); err == nil {
			select {
			case <-time.After(d):
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		fmt.Println("done", req.ID)
		return &responder.Reply{Body: "handled " + req.Body() + " by " + fmt.Sprint(os.Getpid())}, nil
	}))
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	return 0
}

// child is a responder process.
type child struct {
	cmd   *exec.Cmd
	lines chan string
}

// startChild runs a responder process on queueURL at endpoint and waits
// until it is serving.
func startChild(t *testing.T, endpoint, queueURL string) *child {
	t.Helper()
	return startChildAs(t, "responder", "CHILD_ENDPOINT="+endpoint, "CHILD_QUEUE="+queueURL)
}

// startChildAs runs the test binary as the child process of kind mode
// (TestMain) with env added to this process's environment, and waits
// until it prints "ready".
func startChildAs(t *testing.T, mode string, env ...string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), "TEMPQUEUES_CHILD="+mode), env...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &child{cmd: cmd, lines: make(chan string, 100)}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
		_, _ = io.Copy(io.Discard, out)
		close(c.lines)
	}()
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	if l := c.expect(t, "ready", 20*time.Second); l == "" {
		t.Fatalf("child %s did not start", mode)
	}
	return c
}

// expect waits for a line starting with prefix and returns it.
func (c *child) expect(t *testing.T, prefix string, within time.Duration) string {
	t.Helper()
	timeout := time.After(within)
	for {
		select {
		case l, ok := <-c.lines:
			if !ok {
				t.Fatalf("child exited while waiting for %q", prefix)
			}
			if strings.HasPrefix(l, "error") {
				t.Fatalf("child: %s", l)
			}
			if strings.HasPrefix(l, prefix) {
				return l
			}
		case <-timeout:
			t.Fatalf("child printed no %q within %v", prefix, within)
			return ""
		}
	}
}

// kill ends the process abruptly, as a crash would.
func (c *child) kill() {
	_ = c.cmd.Process.Signal(syscall.SIGKILL)
	_ = c.cmd.Wait()
}
