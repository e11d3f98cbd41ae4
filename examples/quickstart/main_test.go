package main

import (
	"bytes"
	"context"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/tempqueues/tempqueues/sqsapi"
	"github.com/tempqueues/tempqueues/sqstest"
)

// The program prints the three replies in order and stops everything it
// started.
func TestQuickstart(t *testing.T) {
	before := runtime.NumGoroutine()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out bytes.Buffer
	if err := run(ctx, false, &out); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	if got, want := out.String(), "hello, alice\nhello, bob\nhello, carol\n"; got != want {
		t.Errorf("output %q, want %q", got, want)
	}
	checkGoroutines(t, before) // not the server, not a poller
}

// greet leaves no host queue behind: the requester deleted it when it
// closed, after the responder had stopped. (The fleet's sweeper lease
// queue, <prefix>sweeper.fifo, stays, as it should.)
func TestGreetDeletesTheHostQueue(t *testing.T) {
	srv := sqstest.Start(t)
	var out bytes.Buffer
	if err := greet(context.Background(), srv.Client(), &out); err != nil {
		t.Fatal(err)
	}
	for _, u := range srv.QueueURLs() {
		name := u[strings.LastIndex(u, "/")+1:]
		if strings.HasPrefix(name, sqsapi.DefaultQueuePrefix) && !strings.HasSuffix(name, "sweeper.fifo") {
			t.Errorf("host queue left behind: %s", u)
		}
	}
	if n := srv.Calls()["DeleteQueue"]; n != 1 {
		t.Errorf("%d DeleteQueue calls, want 1 (the host queue)", n)
	}
	if strings.Count(out.String(), "\n") != 3 {
		t.Errorf("output %q", out.String())
	}
}

// The README's quick start is this program, verbatim, between two marker
// comments, so the two cannot drift apart.
func TestReadmeShowsThisProgram(t *testing.T) {
	const begin, end = "<!-- begin examples/quickstart/main.go -->\n", "<!-- end examples/quickstart/main.go -->"
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	program, err := os.ReadFile("main.go")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(readme), begin)
	block, _, ok2 := strings.Cut(rest, end)
	if !ok || !ok2 {
		t.Fatalf("README.md lacks the markers %q and %q", begin, end)
	}
	if want := "```go\n" + string(program) + "```\n"; block != want {
		t.Errorf("README.md's quick start differs from examples/quickstart/main.go; copy the file between the markers.\nREADME:\n%s", block)
	}
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
