package console

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/tempqueues/tempqueues/internal/testkit/testtime"
)

// tempqBin is the tempq binary TestMain builds from this repository.
var tempqBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "tempq-console-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	tempqBin = filepath.Join(dir, "tempq")
	build := exec.Command("go", "build", "-o", tempqBin, "github.com/tempqueues/tempqueues/cmd/tempq")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building tempq:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// patience bounds every wait for the page: generous, for a loaded machine.
const patience = 30 * time.Second

// emulator is a tempq emulator process and an SDK client of it.
type emulator struct {
	URL    string // the SQS endpoint; the console is at URL + "/ui/"
	Client *sqs.Client
}

// startEmulator runs `tempq emulator` on a free loopback port until the
// test ends: closing its standard input stops it (--until-stdin-eof).
func startEmulator(t *testing.T, args ...string) *emulator {
	t.Helper()
	cmd := exec.Command(tempqBin, append([]string{"emulator", "--addr", "127.0.0.1:0", "--until-stdin-eof"}, args...)...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("tempq emulator: %v", err)
			}
		case <-time.After(patience):
			_ = cmd.Process.Kill()
			<-done
			t.Errorf("tempq emulator did not stop within %v of its stdin closing", patience)
		}
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("tempq emulator printed no ready line: %v", err)
	}
	go func() { _, _ = io.Copy(io.Discard, stdout) }() // ends when the process does
	url, ok := strings.CutPrefix(strings.TrimSpace(line), "sqstest listening on ")
	if !ok {
		t.Fatalf("tempq emulator: ready line %q", line)
	}
	return &emulator{URL: url, Client: sqs.New(sqs.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(url),
		Credentials:  credentials.NewStaticCredentialsProvider("test", "test", ""),
	})}
}

// browser is a headless Chromium tab that records the errors its pages
// write to the console.
type browser struct {
	ctx context.Context
	mu  sync.Mutex
	bad []string // console errors, exceptions and browser log errors
}

// chromiumPath finds Debian's chromium, which `make console` installs.
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("no chromium on PATH: `make console` installs Debian's chromium package")
	return ""
}

// newBrowser starts headless Chromium for the test, with a window of the
// size the screenshots have, and fails the test at its end if a page
// logged an error.
func newBrowser(t *testing.T) *browser {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath(t)),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 860),
		// This machine's network is closed: no call home.
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	b := &browser{}
	ctx, cancel := chromedp.NewContext(allocCtx, chromedp.WithListener(b.listen))
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
		b.mu.Lock()
		defer b.mu.Unlock()
		for _, e := range b.bad {
			t.Errorf("the page logged: %s", e)
		}
	})
	// The first action starts the browser, under ctx (no timeout).
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("starting chromium: %v", err)
	}
	b.ctx = ctx
	return b
}

// listen records console errors, uncaught exceptions and the browser's
// own error log entries (failed loads, CSP violations).
func (b *browser) listen(ev any) {
	var msg string
	switch ev := ev.(type) {
	case *runtime.EventConsoleAPICalled:
		if ev.Type != runtime.ConsoleAPICalledTypeError {
			return
		}
		var parts []string
		for _, a := range ev.Args {
			parts = append(parts, string(a.Value)+a.Description)
		}
		msg = "console.error: " + strings.Join(parts, " ")
	case *runtime.EventExceptionThrown:
		msg = "exception: " + ev.ExceptionDetails.Text
		if ex := ev.ExceptionDetails.Exception; ex != nil {
			msg += " " + ex.Description
		}
	case *log.EventEntryAdded:
		if ev.Entry.Level != log.EntryLevelError {
			return
		}
		msg = "log: " + ev.Entry.Text + " " + ev.Entry.URL
	default:
		return
	}
	b.mu.Lock()
	b.bad = append(b.bad, msg)
	b.mu.Unlock()
}

// do runs actions in the tab, failing the test on error.
func (b *browser) do(t *testing.T, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 2*patience)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// waitJS polls a JavaScript predicate in the page until it is true. It
// evaluates it afresh each time, so that it outlives a navigation (a form
// submission) under way when it starts.
func (b *browser) waitJS(t *testing.T, what, expr string) {
	t.Helper()
	// The page is in a real browser (a child process): its time is real.
	var err error
	if !testtime.Until(patience, func() bool {
		ctx, cancel := context.WithTimeout(b.ctx, patience)
		defer cancel()
		var ok bool
		ok, err = chromedp.Run(ctx, chromedp.Evaluate[bool]("!!("+expr+")"))
		return ok
	}) {
		page, _ := chromedp.Run(b.ctx, chromedp.Evaluate[string](`document.body ? document.body.innerText : ""`))
		t.Fatalf("waiting for %s (%s): %v\npage:\n%s", what, expr, err, page)
	}
}

// eval evaluates a JavaScript expression in the page.
func eval[T any](t *testing.T, b *browser, expr string) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, patience)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("evaluating %s: %v", expr, err)
	}
	return v
}

// waitFor polls cond until it holds, for conditions outside the page.
func waitFor(t *testing.T, what string, cond func() (bool, error)) {
	t.Helper()
	var err error
	if !testtime.Until(patience, func() bool {
		var ok bool
		ok, err = cond()
		return ok
	}) {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}
