package main

import (
	"encoding/json"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/tempqueues/tempqueues/sqstest"
)

// bareEnv is an environment with no AWS configuration at all: a new user's
// laptop. Later entries of cmd.Env win, so these override the test's own.
var bareEnv = []string{
	"AWS_ENDPOINT_URL_SQS=", "AWS_ENDPOINT_URL=", "AWS_REGION=", "AWS_DEFAULT_REGION=", "AWS_PROFILE=", "AWS_DEFAULT_PROFILE=",
	"AWS_ACCESS_KEY_ID=", "AWS_SECRET_ACCESS_KEY=", "AWS_SESSION_TOKEN=", "AWS_WEB_IDENTITY_TOKEN_FILE=", "AWS_ROLE_ARN=",
	"AWS_CONTAINER_CREDENTIALS_RELATIVE_URI=", "AWS_CONTAINER_CREDENTIALS_FULL_URI=",
	"AWS_CONFIG_FILE=/nonexistent/tempq-test/config", "AWS_SHARED_CREDENTIALS_FILE=/nonexistent/tempq-test/credentials",
}

func withEnv(extra ...string) []string { return append(append([]string(nil), bareEnv...), extra...) }

// A loopback AWS_ENDPOINT_URL_SQS is all a new user sets: no region, no
// credentials, and no wait for EC2 instance metadata; -v says what stood in.
func TestLoopbackEnvEndpointNeedsNothingElse(t *testing.T) {
	t.Parallel()
	srv := sqstest.Start(t)
	port := srv.URL()[strings.LastIndexByte(srv.URL(), ':')+1:]
	for _, host := range []string{"127.0.0.1", "localhost"} {
		start := time.Now()
		stdout, stderr, code := tempq(t, withEnv("AWS_ENDPOINT_URL_SQS=http://"+host+":"+port), "queues", "-v")
		if code != 0 || !strings.Contains(stdout, "no queues with prefix") {
			t.Fatalf("%s: code %d, stdout %q, stderr %q", host, code, stdout, stderr)
		}
		if !strings.Contains(stderr, "level=DEBUG") || !strings.Contains(stderr, "dummy static credentials") || !strings.Contains(stderr, "using us-east-1") {
			t.Errorf("%s: -v does not say which credentials and region stood in: %q", host, stderr)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("%s: took %v", host, d)
		}
	}
	// Without -v, nothing is logged.
	_, stderr, code := tempq(t, withEnv("AWS_ENDPOINT_URL_SQS="+srv.URL()), "queues")
	if code != 0 || stderr != "" {
		t.Fatalf("without -v: code %d, stderr %q", code, stderr)
	}
	// A configured region and credentials are used, not replaced.
	_, stderr, code = tempq(t, withEnv("AWS_ENDPOINT_URL_SQS="+srv.URL(), "AWS_REGION=eu-west-1", "AWS_ACCESS_KEY_ID=AKIDTEMPQ", "AWS_SECRET_ACCESS_KEY=x"), "queues", "-v")
	if code != 0 || strings.Contains(stderr, "dummy") || strings.Contains(stderr, "using us-east-1") || !strings.Contains(stderr, "region=eu-west-1") {
		t.Fatalf("configured: code %d, stderr %q", code, stderr)
	}
	// A remote endpoint gets no emulator defaults: the region is missing.
	_, stderr, code = tempq(t, withEnv("AWS_ENDPOINT_URL_SQS=http://sqs.example.invalid:4566"), "queues")
	if code != exitUsage || !strings.Contains(stderr, "no AWS region") {
		t.Fatalf("remote endpoint without a region: code %d, stderr %q", code, stderr)
	}
}

func TestHelpGoesToStdout(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"--help"}, {"-h"}, {"help"}} {
		stdout, stderr, code := tempq(t, bareEnv, args...)
		if code != 0 || stderr != "" || !strings.Contains(stdout, "usage: tempq") || !strings.Contains(stdout, "3  timeout") {
			t.Errorf("tempq %v: code %d, stdout %q, stderr %q", args, code, stdout, stderr)
		}
	}
	for _, c := range commands {
		for _, h := range []string{"--help", "-h"} {
			stdout, stderr, code := tempq(t, bareEnv, c.name, h)
			if code != 0 || stderr != "" || !strings.Contains(stdout, "usage: tempq "+c.name) {
				t.Errorf("tempq %s %s: code %d, stdout %q, stderr %q", c.name, h, code, stdout, stderr)
			}
		}
	}
	stdout, _, code := tempq(t, bareEnv, "help", "call")
	if code != 0 || !strings.Contains(stdout, "usage: tempq call") {
		t.Errorf("tempq help call: code %d, stdout %q", code, stdout)
	}
}

func TestVersion(t *testing.T) {
	t.Parallel()
	bin, err := tempqBinary()
	if err != nil {
		t.Fatal(err)
	}
	// go version -m reads the same build information from the binary.
	out, err := exec.Command("go", "version", "-m", bin).Output()
	if err != nil {
		t.Fatal(err)
	}
	var want, goVersion string
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) >= 3 && f[0] == "mod" {
			want = f[2]
		}
		if strings.HasPrefix(line, bin+": ") {
			goVersion = strings.TrimPrefix(line, bin+": ")
		}
	}
	if want == "" || goVersion == "" {
		t.Fatalf("go version -m printed %q", out)
	}
	for _, args := range [][]string{{"version"}, {"--version"}} {
		stdout, stderr, code := tempq(t, bareEnv, args...)
		if f := strings.Fields(stdout); code != 0 || stderr != "" || len(f) < 3 || f[0] != "tempq" || f[1] != want || f[2] != goVersion {
			t.Errorf("tempq %v: code %d, stdout %q, stderr %q; want tempq %s %s", args, code, stdout, stderr, want, goVersion)
		}
	}
	stdout, _, code := tempq(t, bareEnv, "version", "--json")
	var v map[string]string
	if err := json.Unmarshal([]byte(stdout), &v); err != nil || code != 0 || v["version"] != want || v["go"] != goVersion {
		t.Errorf("version --json: code %d, %q (%v)", code, stdout, err)
	}
}

// jsonError parses the one JSON error object tempq --json writes to stderr.
func jsonError(t *testing.T, stdout, stderr string) (msg string, code int) {
	t.Helper()
	if stdout != "" {
		t.Errorf("stdout %q, want nothing: results only", stdout)
	}
	var e struct {
		Error *string `json:"error"`
		Code  *int    `json:"code"`
	}
	d := json.NewDecoder(strings.NewReader(stderr))
	d.DisallowUnknownFields()
	if err := d.Decode(&e); err != nil || e.Error == nil || e.Code == nil || strings.Count(stderr, "\n") != 1 {
		t.Fatalf("stderr %q is not one JSON error object: %v", stderr, err)
	}
	return *e.Error, *e.Code
}

func TestUsageErrorsAndJSONErrors(t *testing.T) {
	t.Parallel()
	srv := sqstest.Start(t)
	ep := []string{"--endpoint-url", srv.URL()}

	// An invalid endpoint is a usage error at once, by flag or environment.
	for _, tc := range []struct {
		env  []string
		args []string
	}{
		{bareEnv, []string{"queues", "--endpoint-url", "not-a-url"}},
		{bareEnv, []string{"queues", "--endpoint-url", "127.0.0.1:4566"}},
		{withEnv("AWS_ENDPOINT_URL_SQS=ftp://127.0.0.1"), []string{"queues"}},
	} {
		start := time.Now()
		_, stderr, code := tempq(t, tc.env, tc.args...)
		// Retrying a bad endpoint took 3 s; the bound leaves room for a
		// loaded machine starting the binary.
		if code != exitUsage || !strings.Contains(stderr, "is not a URL") || time.Since(start) > 2500*time.Millisecond {
			t.Errorf("%v: code %d after %v, stderr %q", tc.args, code, time.Since(start), stderr)
		}
	}
	// --aws with no region anywhere: usage, like naming no server.
	_, stderr, code := tempq(t, bareEnv, "sweep", "--aws")
	if code != exitUsage || !strings.Contains(stderr, "no AWS region") {
		t.Errorf("--aws without a region: code %d, stderr %q", code, stderr)
	}
	_, stderr, code = tempq(t, bareEnv, "sweep", "--profile", "no-such-profile")
	if code != exitUsage || !strings.Contains(stderr, `profile "no-such-profile" does not exist`) {
		t.Errorf("missing profile: code %d, stderr %q", code, stderr)
	}

	// With --json, every kind of error is one JSON object on stderr.
	for _, tc := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"call", "--json", "--queue", "missing", "x"}, exitFailure, `queue "missing" does not exist`},
		{append([]string{"call", "--queue", srv.URL() + "/000000000000/missing", "x", "--json"}, ep...), exitFailure, `/000000000000/missing" does not exist`},
		{[]string{"queues", "--json", "--no-such-flag"}, exitUsage, "no-such-flag"},
		{[]string{"backlog", "--json=true", "--queue", "q", "--watch", "1ms"}, exitUsage, "--watch"},
		{[]string{"sweep", "--json", "--endpoint-url", "::"}, exitUsage, "is not a URL"},
		{[]string{"frobnicate", "--json"}, exitUsage, "unknown command"},
	} {
		if tc.code == exitFailure && tc.args[len(tc.args)-1] == "x" {
			tc.args = append(tc.args, ep...)
		}
		stdout, stderr, code := tempq(t, bareEnv, tc.args...)
		msg, jcode := jsonError(t, stdout, stderr)
		if code != tc.code || jcode != tc.code || !strings.Contains(msg, tc.msg) {
			t.Errorf("%v: exit %d, JSON %q code %d; want %d and %q", tc.args, code, msg, jcode, tc.code, tc.msg)
		}
	}
	// --json=false, or --json as call's body after "--", is no --json.
	_, stderr, code = tempq(t, bareEnv, append(append([]string{"call", "--json=false", "--queue", "missing"}, ep...), "--", "--json")...)
	if code != exitFailure || !strings.HasPrefix(stderr, "tempq call: ") {
		t.Errorf("--json=false: code %d, stderr %q", code, stderr)
	}
}

// A missing queue reads the same given by name or by URL, in every command
// that takes one.
func TestMissingQueueByNameOrURL(t *testing.T) {
	t.Parallel()
	_, ep, create := server(t)
	u := create("present", nil)
	missingURL := u[:strings.LastIndexByte(u, '/')+1] + "absent"
	for _, args := range [][]string{
		{"call", "--queue", "%s", "x"},
		{"backlog", "--queue", "%s"},
		{"redrive", "--dlq", "%s", "--parking", "present"},
		{"serve-echo", "--queue", "%s"},
	} {
		for _, q := range []string{"absent", missingURL} {
			if args[0] == "serve-echo" && q == "absent" {
				continue // serve-echo creates a queue it is given by name
			}
			a := append([]string(nil), args...)
			for i := range a {
				if a[i] == "%s" {
					a[i] = q
				}
			}
			_, stderr, code := tempq(t, bareEnv, append(a, ep...)...)
			want := "tempq " + args[0] + ": --" + strings.TrimPrefix(args[1], "--") + `: queue "` + q + `" does not exist` + "\n"
			if code != exitFailure || stderr != want {
				t.Errorf("%v: code %d, stderr %q, want %q", a, code, stderr, want)
			}
		}
	}
}

// A server that is not running fails at once, in one line naming it.
func TestRefusedConnectionFailsFast(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	endpoint := "http://" + addr
	for _, tc := range []struct {
		env  []string
		args []string
	}{
		{bareEnv, []string{"call", "--queue", "echo", "hi", "--endpoint-url", endpoint}},
		{withEnv("AWS_ENDPOINT_URL_SQS=" + endpoint), []string{"queues"}},
		{withEnv("AWS_ENDPOINT_URL_SQS=" + endpoint), []string{"serve-echo", "--queue", "echo"}},
	} {
		start := time.Now()
		_, stderr, code := tempq(t, tc.env, tc.args...)
		took := time.Since(start)
		if code != exitFailure || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, endpoint) || !strings.Contains(stderr, "connection refused") {
			t.Errorf("%v: code %d, stderr %q", tc.args, code, stderr)
		}
		// Within 1 s on an idle machine; the SDK's retries took 5 s. The
		// bound leaves room for a loaded one starting the binary.
		if took > 2500*time.Millisecond {
			t.Errorf("%v: failed after %v, want about 1s at most", tc.args, took)
		}
	}
}

// An endpoint behind an HTTP proxy is not dialled directly: the proxy
// reaches it (here sqstest plays the proxy, answering the proxied requests
// itself), and a direct check would fail on a name only the proxy resolves.
func TestProxiedEndpointIsNotDialled(t *testing.T) {
	t.Parallel()
	srv := sqstest.Start(t)
	env := withEnv("AWS_ENDPOINT_URL_SQS=http://sqs.example.invalid:4566", "AWS_REGION=us-east-1",
		"AWS_ACCESS_KEY_ID=AKIDTEMPQ", "AWS_SECRET_ACCESS_KEY=x", "HTTP_PROXY="+srv.URL(), "http_proxy="+srv.URL(), "NO_PROXY=", "no_proxy=")
	stdout, stderr, code := tempq(t, env, "queues")
	if code != 0 || !strings.Contains(stdout, "no queues with prefix") {
		t.Fatalf("through a proxy: code %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}
