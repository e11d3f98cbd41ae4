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
