package main

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/tempqueues/tempqueues/reaper"
	"github.com/tempqueues/tempqueues/sqsapi"
)

// What a newcomer tripped on, in the command line.

// An explicitly empty value is refused, with the flag named, where leaving
// the flag out would pick a default: `--group-id ""` is a script's unset
// variable, not the default group.
func TestExplicitEmptyFlagRefused(t *testing.T) {
	t.Parallel()
	_, ep, create := server(t)
	create("orders.fifo", map[string]string{"FifoQueue": "true", "ContentBasedDeduplication": "true"})
	for _, args := range [][]string{
		{"call", "--queue", "orders.fifo", "--group-id", "", "--timeout", "1s", "x"},
		{"call", "--queue", "orders.fifo", "--group-id=", "--timeout", "1s", "x"},
		{"send", "--queue", "orders.fifo", "--group-id", "", "x"},
		{"send", "--queue", "orders.fifo", "--dedup-id", "", "x"},
		{"send", "--queue", "", "x"},
		{"receive", "--queue", ""},
		{"queues", "--prefix", ""},
		{"sweep", "--prefix", ""},
		{"list-queues", "--prefix", ""},
		{"serve-echo", "--queue", "orders.fifo", "--allow-reply-to", ""},
		{"redrive", "--dlq", "orders.fifo", "--parking", "parking.fifo", "--target", ""},
		{"queues", "--region", ""},
	} {
		flagName := ""
		for i, a := range args {
			if name, val, ok := strings.Cut(a, "="); ok && val == "" {
				flagName = name
			} else if strings.HasPrefix(a, "--") && i+1 < len(args) && args[i+1] == "" {
				flagName = a
			}
		}
		_, stderr, code := tempq(t, noEnvEndpoint, append(args, ep...)...)
		if code != exitUsage || !strings.Contains(stderr, flagName+" is empty") {
			t.Errorf("%q: code %d, stderr %q; want 2 naming %s", args, code, stderr, flagName)
		}
	}
	// --endpoint-url "" does not fall back to the environment's.
	_, stderr, code := tempq(t, withEnv("AWS_ENDPOINT_URL_SQS="+ep[1]), "queues", "--endpoint-url", "")
	if code != exitUsage || !strings.Contains(stderr, "--endpoint-url is empty") {
		t.Errorf("--endpoint-url \"\": code %d, stderr %q", code, stderr)
	}
	// emulator --data "" keeps the queues in memory, as its help says: the
	// error here is the account's, not --data's.
	_, stderr, code = tempq(t, bareEnv, "emulator", "--data", "", "--account", "1")
	if code != exitUsage || !strings.Contains(stderr, "--account") {
		t.Errorf("emulator --data \"\": code %d, stderr %q", code, stderr)
	}
}

// tempq sweep's summary adds up to the queues listed: the sweeper's own
// lease queue is counted as skipped, and one queue is "1 queue".
func TestSweepSummaryAddsUp(t *testing.T) {
	t.Parallel()
	client, ep, create := server(t)
	const prefix = "tq-sum-"
	create(reaper.LeaseQueueName(prefix), map[string]string{"FifoQueue": "true"})
	args := append([]string{"sweep", "--prefix", prefix, "--dry-run"}, ep...)
	out, errOut, code := tempq(t, noEnvEndpoint, args...)
	if code != 0 || !strings.HasPrefix(out, "1 queue listed: would delete 0, kept 0, skipped 1 (sweeper queues, or gone meanwhile), 0 errors, in ") {
		t.Fatalf("sweep --dry-run with the lease queue only: code %d, stdout %q, stderr %q", code, out, errOut)
	}

	idle := create(prefix+"00000000-0000-0000-0000-000000000000-0", nil)
	tags := map[string]string{sqsapi.RetentionTag: "300", sqsapi.HeartbeatTag: strconv.FormatInt(time.Now().Add(-time.Hour).UnixMilli(), 10)}
	if _, err := client.TagQueue(context.Background(), &sqs.TagQueueInput{QueueUrl: aws.String(idle), Tags: tags}); err != nil {
		t.Fatal(err)
	}
	create(prefix+"plain", nil) // kept: not temporary
	out, errOut, code = tempq(t, noEnvEndpoint, args...)
	m := regexp.MustCompile(`^(\d+) queues? listed: would delete (\d+), kept (\d+), skipped (\d+) \(.*\), (\d+) errors?, in `).FindStringSubmatch(lastLine(out))
	if code != 0 || m == nil {
		t.Fatalf("sweep --dry-run: code %d, stdout %q, stderr %q", code, out, errOut)
	}
	n := make([]int, len(m)-1)
	for i := range n {
		n[i], _ = strconv.Atoi(m[i+1])
	}
	if n[0] != 3 || n[1]+n[2]+n[3]+n[4] != n[0] || n[1] != 1 || n[2] != 1 || n[3] != 1 {
		t.Errorf("sweep --dry-run summary %q does not add up", lastLine(out))
	}
	out, _, code = tempq(t, noEnvEndpoint, append(args, "--json")...)
	rep := jsonLines(t, out)[0]
	if code != 0 || rep["listed"] != 3.0 || rep["kept"] != 1.0 || rep["skipped"] != 1.0 || len(rep["deleted"].([]any)) != 1 {
		t.Errorf("sweep --dry-run --json: code %d, %v", code, rep)
	}
}

func lastLine(s string) string {
	s = strings.TrimRight(s, "\n")
	return s[strings.LastIndexByte(s, '\n')+1:]
}

// needsBoth are the arguments each command that takes --endpoint-url and
// --aws needs besides them, so that the pair is what it would trip on.
var needsBoth = map[string][]string{
	"backlog": {"--queue", "q"}, "redrive": {"--dlq", "d", "--parking", "p"}, "call": {"--queue", "q", "x"},
	"serve-echo": {"--queue", "q"}, "create-queue": {"--queue", "q"}, "delete-queue": {"--queue", "q"},
	"purge-queue": {"--queue", "q"}, "send": {"--queue", "q", "x"}, "receive": {"--queue", "q"},
}

// --endpoint-url and --aws name two servers: every command that takes
// both refuses the pair, before connecting to either.
func TestEndpointURLWithAWSRefused(t *testing.T) {
	t.Parallel()
	env := withEnv("AWS_REGION=us-east-1", "AWS_ACCESS_KEY_ID=AKIDTEMPQ", "AWS_SECRET_ACCESS_KEY=x")
	tried := 0
	for _, c := range commands {
		help, _, _ := tempq(t, bareEnv, c.name, "--help")
		if !strings.Contains(help, "-endpoint-url") || !strings.Contains(help, "-aws") {
			continue
		}
		tried++
		args := append(append([]string{c.name}, needsBoth[c.name]...), "--endpoint-url", "http://127.0.0.1:1", "--aws")
		_, stderr, code := tempq(t, env, args...)
		if code != exitUsage || !strings.Contains(stderr, "--endpoint-url and --aws") {
			t.Errorf("%q: code %d, stderr %q", args, code, stderr)
		}
	}
	if tried < 10 {
		t.Errorf("only %d commands take --endpoint-url and --aws", tried)
	}
}

// goIdentifier matches what a Go programmer, not a command-line user,
// would recognise: a package-qualified name (requester.New) or a
// CamelCase field name (MessageBody, AllowReplyTo).
var goIdentifier = regexp.MustCompile(`\b[a-z]+\.[A-Z]\w+|\b[A-Z][a-z]+[A-Z]\w*`)

// badInput lists, for every command, command lines it must refuse as bad
// usage. "%q" and "%p" stand for two queues that exist on the test's
// server.
var badInput = map[string][][]string{
	"emulator":     {{"--account", "1", "--addr", "127.0.0.1:0"}, {"--latency", "-1s"}, {"--latency", "1ms", "--latency-p99", "1ms"}},
	"console":      {{"--addr", "0.0.0.0:0"}, {"--refresh", "1ms"}, {"--prefix", "has space"}, {"--sweep-period", "-1s"}},
	"call":         {{"--queue", "%q"}, {"--queue", "%q", "--timeout", "0s", "x"}, {"--queue", "%q", "--group-id", "g", "x"}, {"--queue", "%q", "BIG"}, {"--queue", "%q", "ATTRS", "x"}, {"--queue", "%q", "--attr", "bad", "x"}, {"--queue", "%q", "\x01"}},
	"create-queue": {{"--queue", "bad name"}, {"--queue", "q", "--retention", "1s"}, {"--queue", "q", "--content-dedup"}},
	"delete-queue": {{"--queue", "bad name"}, {"x"}},
	"purge-queue":  {{}, {"--queue", "bad name"}},
	"list-queues":  {{"--prefix", "a b"}},
	"send":         {{"--queue", "%q", "BIG"}, {"--queue", "%q", "ATTRS", "x"}, {"--queue", "%q", "--delay", "1h", "x"}, {"--queue", "%q", "--group-id", "g", "x"}, {"--queue", "q.fifo", "--group-id", "a b", "x"}},
	"receive":      {{"--queue", "%q", "--max", "20"}, {"--queue", "%q", "--wait", "1m"}},
	"queues":       {{"--prefix", "has space"}, {"extra"}},
	"sweep":        {{"--prefix", "has space"}, {"--retire", "--dry-run"}},
	"redrive":      {{"--dlq", "%q", "--parking", "%p", "--max-attempts", "0"}, {"--dlq", "%q", "--parking", "%p", "--base", "-1s"}, {"--dlq", "%q", "--parking", "%p", "--rate", "-1"}, {"--dlq", "%q", "--parking", "%p", "--dry-run", "--follow"}, {"--dlq", "%q", "--parking", "%q"}},
	"backlog":      {{"--queue", "%q", "--workers", "-1"}, {"--queue", "%q", "--watch", "1ms"}, {"--queue", "%q", "--min", "3", "--max", "2"}},
	"bench":        {{"--idle-scale", "0"}, {"--contenders", "nope"}, {"--rounds", "0"}},
	"version":      {{"extra"}},
	"serve-echo":   {{"--queue", "%q", "--concurrency", "0"}, {"--queue", "%q", "--allow-reply-to", "has space"}},
}

// Every command's bad input gets a message that names the flag or
// argument at fault and no Go identifier: the library's typed errors are
// translated to the command line's names, not shown as they are.
func TestErrorsSpeakFlagsNotGo(t *testing.T) {
	t.Parallel()
	_, ep, create := server(t)
	create("q", nil)
	create("p", nil)
	attrs := []string{}
	for i := range 11 { // SQS allows 10
		attrs = append(attrs, "--attr", fmt.Sprintf("a%d=v", i))
	}
	for _, c := range commands {
		cases, ok := badInput[c.name]
		if !ok {
			t.Errorf("no bad-input cases for tempq %s", c.name)
			continue
		}
		for _, tc := range cases {
			args, stdin := []string{c.name}, ""
			for _, a := range tc {
				switch a {
				case "%q", "%p":
					args = append(args, a[1:])
				case "BIG": // a body one byte over, through stdin
					args, stdin = append(args, "-"), strings.Repeat("x", sqsapi.MaxMessageSize+1)
				case "ATTRS":
					args = append(args, attrs...)
				default:
					args = append(args, a)
				}
			}
			if c.name != "emulator" && c.name != "version" {
				args = append(args, ep...)
			}
			if c.name == "bench" {
				args = append(args, "--idle-window", "0", "--stop-idle", "0", "--memory-queues", "0")
			}
			_, stderr, code := tempqStdin(t, stdin, noEnvEndpoint, args...)
			first, _, _ := strings.Cut(stderr, "\n")
			t.Logf("%s", first)
			if code != exitUsage || !namesInput(first) {
				t.Errorf("%.100q: code %d, stderr %.300q; want 2 and a flag or argument named", args, code, stderr)
			}
			if id := goIdentifier.FindString(stderr); id != "" {
				t.Errorf("%.100q: stderr %.300q names Go's %q", args, stderr, id)
			}
		}
	}
}

// namesInput reports whether msg names a flag (--x or -x) or an argument
// (BODY, "unexpected arguments").
func namesInput(msg string) bool {
	return regexp.MustCompile(`(^|[ "(])--?[a-z]|BODY|arguments`).MatchString(msg)
}

// A call that times out says what is likely wrong: no responder, or one
// that will not reply to this requester.
func TestCallTimeoutSaysWhy(t *testing.T) {
	t.Parallel()
	_, ep, create := server(t)
	create("nobody", nil)
	_, stderr, code := tempq(t, noEnvEndpoint, append([]string{"call", "--queue", "nobody", "--timeout", "1s", "x"}, ep...)...)
	if code != exitTimeout || !strings.Contains(stderr, "no responder serves nobody") || !strings.Contains(stderr, "allow-reply-to") {
		t.Errorf("call timeout: code %d, stderr %q", code, stderr)
	}
}

// tempq --help tells queues from list-queues.
func TestHelpTellsQueuesFromListQueues(t *testing.T) {
	t.Parallel()
	out, _, code := tempq(t, bareEnv, "--help")
	if code != 0 || !strings.Contains(out, "queues and list-queues differ") {
		t.Errorf("tempq --help: code %d, %q", code, out)
	}
}

// docs/cli.md's walkthrough builds tempq before running it: `go run`
// turns every exit code into 1 and prints "exit status N".
func TestCLIDocBuildsFirst(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../../docs/cli.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	build := strings.Index(doc, "go build -o bin/tempq ./cmd/tempq")
	first := strings.Index(doc, "tempq emulator --addr")
	runs := regexp.MustCompile(`(?m)^(\$ )?go run \./cmd/tempq`).MatchString(doc)
	if build < 0 || first < 0 || build > first || runs || !strings.Contains(doc, "exit status") {
		t.Errorf("docs/cli.md: build at %d, first use at %d; want the build first, and why", build, first)
	}
	for _, verb := range []string{"create-queue", "send", "receive", "purge-queue", "list-queues", "delete-queue"} {
		if !strings.Contains(doc, "tempq "+verb) {
			t.Errorf("docs/cli.md does not show tempq %s", verb)
		}
	}
}
