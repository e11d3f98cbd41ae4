package main

import (
	"context"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
)

// getPage fetches a URL and returns its status and body.
func getPage(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// runInProcess runs a command with --addr 127.0.0.1:0 and args in
// process until the test ends, and returns its stdout and stderr once its
// first line is out.
func runInProcess(t *testing.T, run func(context.Context, []string, io.Writer, io.Writer) error, args ...string) (stdout, stderr *lockedBuffer) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	stdout, stderr = new(lockedBuffer), new(lockedBuffer)
	errc := make(chan error, 1)
	go func() { errc <- run(ctx, append([]string{"--addr", "127.0.0.1:0"}, args...), stdout, stderr) }()
	t.Cleanup(func() {
		cancel()
		if err := <-errc; err != nil {
			t.Errorf("%v: %v", args, err)
		}
	})
	waitFor(t, stdout, "\n")
	return stdout, stderr
}

// runTestEmulator runs tempq emulator in process until the test ends, and
// returns its URL and its stderr.
func runTestEmulator(t *testing.T, args ...string) (string, *lockedBuffer) {
	t.Helper()
	stdout, stderr := runInProcess(t, runEmulator, args...)
	return strings.TrimSpace(strings.TrimPrefix(stdout.String(), readyPrefix)), stderr
}

// The emulator serves its console at /ui/ beside the SQS API, and says
// where; --no-console turns it off.
func TestEmulatorServesConsole(t *testing.T) {
	t.Parallel()
	url, stderr := runTestEmulator(t, "--queue", "jobs")
	waitFor(t, stderr, "console at "+url+"/ui/")
	status, page := getPage(t, url+"/ui/")
	if status != http.StatusOK || !strings.Contains(page, `data-queue="jobs"`) {
		t.Fatalf("GET /ui/: status %d, page %q", status, page)
	}
	if status, _ := getPage(t, url+"/ui/static/console.js"); status != http.StatusOK {
		t.Fatalf("GET console.js: status %d", status)
	}
	// The rest of the port is still SQS's, GETs of the query protocol
	// included.
	if status, body := getPage(t, url+"/?Action=ListQueues"); status != http.StatusOK || !strings.Contains(body, "<ListQueuesResponse") || !strings.Contains(body, "/jobs<") {
		t.Fatalf("query-protocol GET /: status %d, body %q", status, body)
	}

	url, stderr = runTestEmulator(t, "--no-console")
	if status, page := getPage(t, url+"/ui/"); status == http.StatusOK || strings.Contains(page, "tempq console") {
		t.Fatalf("--no-console: GET /ui/ status %d, page %q", status, page)
	}
	if strings.Contains(stderr.String(), "console at") {
		t.Fatalf("--no-console: stderr %q names a console", stderr.String())
	}
}

func TestConsoleCommand(t *testing.T) {
	t.Parallel()
	url, _ := runTestEmulator(t, "--queue", "jobs", "--no-console")
	ui, line := startConsole(t, "--endpoint-url", url)
	if strings.Contains(line, "read-only") {
		t.Fatalf("a console of an emulator endpoint is read-only: %q", line)
	}
	status, page := getPage(t, ui)
	if status != http.StatusOK || !strings.Contains(page, `data-queue="jobs"`) {
		t.Fatalf("GET %s: status %d, page %q", ui, status, page)
	}
	// The root redirects to the console.
	if status, page := getPage(t, strings.TrimSuffix(ui, "/ui/")+"/"); status != http.StatusOK || !strings.Contains(page, `data-queue="jobs"`) {
		t.Fatalf("GET /: status %d", status)
	}
}

// startConsole runs tempq console in process until the test ends, and
// returns the console's URL and the line it printed.
func startConsole(t *testing.T, args ...string) (ui, line string) {
	t.Helper()
	stdout, _ := runInProcess(t, runConsole, args...)
	line = strings.TrimSpace(stdout.String())
	i := strings.Index(line, "/ui/")
	if i < 0 {
		t.Fatalf("tempq console printed %q", line)
	}
	return line[strings.LastIndex(line[:i], " ")+1 : i+len("/ui/")], line
}

// With --aws, the console is read-only: no forms, every POST refused.
func TestConsoleOnAWSIsReadOnly(t *testing.T) {
	url, _ := runTestEmulator(t, "--queue", "jobs", "--no-console")
	// AWS as the environment configures it, whose SQS endpoint happens to
	// be the emulator.
	t.Setenv("AWS_ENDPOINT_URL_SQS", url)
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	t.Setenv("AWS_REGION", "us-east-1")
	t.Setenv("AWS_CONFIG_FILE", os.DevNull)
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", os.DevNull)
	ui, line := startConsole(t, "--aws")
	if !strings.Contains(line, "read-only") {
		t.Fatalf("tempq console --aws printed %q, not read-only", line)
	}
	status, page := getPage(t, ui+"queue?url="+url+"/000000000000/jobs")
	if status != http.StatusOK || strings.Contains(page, `action="/ui/send"`) || !strings.Contains(page, "read-only") {
		t.Fatalf("read-only queue page: status %d, page %q", status, page)
	}
	resp, err := http.PostForm(ui+"send", map[string][]string{"url": {url + "/000000000000/jobs"}, "body": {"x"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("POST to a read-only console: status %d, want 403", resp.StatusCode)
	}

	ui, line = startConsole(t, "--aws", "--allow-actions")
	if strings.Contains(line, "read-only") {
		t.Fatalf("tempq console --aws --allow-actions printed %q", line)
	}
	if _, page := getPage(t, ui+"queue?url="+url+"/000000000000/jobs"); !strings.Contains(page, `action="/ui/send"`) {
		t.Fatal("--allow-actions: no send form")
	}
}

func TestConsoleListensOnLoopbackOnly(t *testing.T) {
	t.Parallel()
	_, stderr, code := tempq(t, nil, "console", "--addr", "0.0.0.0:0", "--endpoint-url", "http://127.0.0.1:1")
	if code != exitUsage || !strings.Contains(stderr, "loopback only") {
		t.Fatalf("--addr 0.0.0.0: code %d, stderr %q", code, stderr)
	}
}

func TestOnAWS(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		aws      bool
		endpoint string
		want     bool
	}{
		{false, "", true},
		{true, "http://127.0.0.1:4566", true},
		{false, "https://sqs.us-east-1.amazonaws.com", true},
		{false, "https://sqs.cn-north-1.amazonaws.com.cn", true},
		{false, "http://127.0.0.1:4566", false},
		{false, "http://localhost:9324", false},
		{false, "https://amazonaws.com.example.org", false},
	} {
		if got := onAWS(c.aws, c.endpoint); got != c.want {
			t.Errorf("onAWS(%v, %q) = %v, want %v", c.aws, c.endpoint, got, c.want)
		}
	}
}
