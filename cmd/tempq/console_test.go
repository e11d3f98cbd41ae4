package main

import (
	"context"
	"io"
	"net/http"
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

// runTestEmulator runs tempq emulator with args in process until the test
// ends, and returns its URL and its stderr.
func runTestEmulator(t *testing.T, args ...string) (string, *lockedBuffer) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var stdout, stderr lockedBuffer
	errc := make(chan error, 1)
	go func() { errc <- runEmulator(ctx, append([]string{"--addr", "127.0.0.1:0"}, args...), &stdout, &stderr) }()
	t.Cleanup(func() {
		cancel()
		if err := <-errc; err != nil {
			t.Errorf("emulator: %v", err)
		}
	})
	waitFor(t, &stdout, "\n")
	return strings.TrimSpace(strings.TrimPrefix(stdout.String(), readyPrefix)), &stderr
}

// The emulator serves its console at /ui/ beside the SQS API, and says
// where; --no-console turns it off.
func TestEmulatorServesConsole(t *testing.T) {
	url, stderr := runTestEmulator(t, "--queue", "jobs")
	waitFor(t, stderr, "console at "+url+"/ui/")
	status, page := getPage(t, url+"/ui/")
	if status != http.StatusOK || !strings.Contains(page, `data-queue="jobs"`) {
		t.Fatalf("GET /ui/: status %d, page %q", status, page)
	}
	if status, _ := getPage(t, url+"/ui/static/console.js"); status != http.StatusOK {
		t.Fatalf("GET console.js: status %d", status)
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
	url, _ := runTestEmulator(t, "--queue", "jobs", "--no-console")
	ctx, cancel := context.WithCancel(context.Background())
	var stdout, stderr lockedBuffer
	errc := make(chan error, 1)
	go func() {
		errc <- runConsole(ctx, []string{"--addr", "127.0.0.1:0", "--endpoint-url", url}, &stdout, &stderr)
	}()
	defer func() {
		cancel()
		if err := <-errc; err != nil {
			t.Errorf("console: %v", err)
		}
	}()
	waitFor(t, &stdout, "/ui/\n")
	line := strings.TrimSpace(stdout.String())
	ui := line[strings.LastIndex(line, " ")+1:]
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

func TestConsoleListensOnLoopbackOnly(t *testing.T) {
	_, stderr, code := tempq(t, nil, "console", "--addr", "0.0.0.0:0", "--endpoint-url", "http://127.0.0.1:1")
	if code != exitUsage || !strings.Contains(stderr, "loopback only") {
		t.Fatalf("--addr 0.0.0.0: code %d, stderr %q", code, stderr)
	}
}

func TestAWSEndpointURL(t *testing.T) {
	for endpoint, want := range map[string]bool{
		"":                                    true,
		"https://sqs.us-east-1.amazonaws.com": true,
		"https://sqs.cn-north-1.amazonaws.com.cn": true,
		"http://127.0.0.1:4566":                   false,
		"http://localhost:9324":                   false,
		"https://amazonaws.com.example.org":       false,
	} {
		if got := awsEndpointURL(endpoint); got != want {
			t.Errorf("awsEndpointURL(%q) = %v, want %v", endpoint, got, want)
		}
	}
}
