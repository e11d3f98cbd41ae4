package redisstore_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/redis/go-redis/v9"

	"github.com/tempqueues/tempqueues/observe"
	"github.com/tempqueues/tempqueues/redisstore"
	"github.com/tempqueues/tempqueues/responder"
	"github.com/tempqueues/tempqueues/sqsapi"
	"github.com/tempqueues/tempqueues/sqstest"
)

// The multi-process tests re-run this test binary as responder processes:
// with childEnv set, TestMain runs a responder instead of the tests.
const (
	childEnv      = "REDISSTORE_TEST_CHILD" // the child's name
	childSQS      = "REDISSTORE_TEST_SQS_URL"
	childQueue    = "REDISSTORE_TEST_QUEUE_URL"
	childRedis    = "REDISSTORE_TEST_REDIS_ADDR"
	childPrefix   = "REDISSTORE_TEST_PREFIX"
	childHandler  = "REDISSTORE_TEST_HANDLER" // "block", or a duration to work
	childLinePref = "CHILD "                  // marks the child's reports on stdout
)

func TestMain(m *testing.M) {
	if name := os.Getenv(childEnv); name != "" {
		os.Exit(childMain(name))
	}
	os.Exit(m.Run())
}

// Responder settings of the children: short, so that redeliveries happen
// within seconds.
const (
	childVisibility = 2 * time.Second
	childDeferral   = time.Second
)

// childMain serves the request queue with a Redis-backed Store until its
// standard input closes (the parent closes it, or dies), then reports its
// counters. Reports are lines "CHILD <name> <event> [fields]" on stdout;
// logs go to stderr.
func childMain(name string) int {
	var outMu sync.Mutex
	report := func(format string, args ...any) {
		outMu.Lock()
		defer outMu.Unlock()
		fmt.Printf(childLinePref+name+" "+format+"\n", args...)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})).With("child", name)
	fail := func(err error) int {
		log.Error("child failed", "error", err)
		report("error %v", err)
		return 1
	}

	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	stdinClosed := make(chan struct{})
	go func() {
		defer close(stdinClosed)
		_, _ = io.Copy(io.Discard, os.Stdin)
		stop()
	}()

	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv(childRedis)})
	defer rdb.Close()
	client := sqs.New(sqs.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(os.Getenv(childSQS)),
		Credentials:  credentials.NewStaticCredentialsProvider("test", "test", ""),
	})
	store, err := redisstore.New(rdb, func(o *redisstore.Options) {
		o.Prefix = os.Getenv(childPrefix)
		o.Logger = log
	})
	if err != nil {
		return fail(err)
	}
	var deduplicated, deferred atomic.Int64
	r, err := responder.New(client, func(o *responder.Options) {
		o.Observer = observe.Func(func(_ context.Context, e observe.Event) func(*types.Message, error) {
			switch {
			case e.Kind == observe.Dropped && e.Reason == "duplicate":
				deduplicated.Add(1)
			case e.Kind == observe.Released && e.Reason == "in-progress":
				deferred.Add(1)
			}
			return nil
		})
		o.Logger = log
		o.MaxConcurrency = 1 // a busy child leaves the next delivery to the other
		o.PollWaitTime = time.Second
		o.VisibilityTimeout = childVisibility
		o.InProgressDelay = childDeferral
		o.DrainTimeout = 5 * time.Second
		o.Store = store
		o.AllowReplyTo = []string{"replies"} // the fleet's plain reply queue
	})
	if err != nil {
		return fail(err)
	}

	var work time.Duration // zero: block until cancelled
	if h := os.Getenv(childHandler); h != "block" {
		if work, err = time.ParseDuration(h); err != nil {
			return fail(err)
		}
	}
	h := responder.HandlerFunc(func(ctx context.Context, req *responder.Request) (*responder.Reply, error) {
		report("handling %s", req.ID)
		if work == 0 {
			<-ctx.Done()
			return nil, context.Cause(ctx)
		}
		select {
		case <-time.After(work):
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
		return &responder.Reply{Body: "answer to " + aws.ToString(req.Message.Body) + " from " + name}, nil
	})

	report("ready")
	serveErr := r.Serve(ctx, os.Getenv(childQueue), h)
	st := r.Stats()
	report("stats received=%d handled=%d deduplicated=%d deferred=%d errors=%d",
		st.Received, st.Handled, deduplicated.Load(), deferred.Load(), st.Errors)
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := r.Shutdown(sctx); err != nil {
		return fail(err)
	}
	if serveErr != nil {
		return fail(serveErr)
	}
	<-stdinClosed
	return 0
}

// child is a responder process started by a test.
type child struct {
	name   string
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stderr bytes.Buffer // its logs, shown when the test fails
	lines  chan string  // its reports, without the prefix; closed at exit
	done   chan struct{}
}

// fleet is what the children share: an SQS server, a request queue, a
// reply queue and a Redis.
type fleet struct {
	t        *testing.T
	sqs      *sqs.Client
	sqsURL   string
	requests string
	replies  string
	redis    *redisServer
	prefix   string
}

func newFleet(t *testing.T) *fleet {
	if testing.Short() {
		t.Skip("starts responder processes")
	}
	t.Parallel() // each fleet has its own servers; the tests mostly wait
	f := &fleet{t: t, redis: startRedis(t), prefix: "fleet:" + t.Name() + ":"}
	srv := sqstest.Start(t)
	f.sqs, f.sqsURL = srv.Client(), srv.URL()
	ctx := context.Background()
	for name, url := range map[string]*string{"requests": &f.requests, "replies": &f.replies} {
		out, err := f.sqs.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name)})
		if err != nil {
			t.Fatal(err)
		}
		*url = aws.ToString(out.QueueUrl)
	}
	return f
}

// start runs a responder process whose handler works for handler ("block":
// until the process stops), and waits until it serves.
func (f *fleet) start(name, handler string) *child {
	t := f.t
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	c := &child{name: name, lines: make(chan string, 64), done: make(chan struct{})}
	c.cmd = exec.Command(exe, "-test.run=^$")
	c.cmd.Env = append(os.Environ(),
		childEnv+"="+name, childSQS+"="+f.sqsURL, childQueue+"="+f.requests,
		childRedis+"="+f.redis.Addr, childPrefix+"="+f.prefix, childHandler+"="+handler)
	c.cmd.Stderr = &c.stderr
	c.cmd.SysProcAttr = sysProcAttr()
	if c.stdin, err = c.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := c.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(c.done)
		defer close(c.lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if rest, ok := strings.CutPrefix(sc.Text(), childLinePref+name+" "); ok {
				c.lines <- rest
			}
		}
		_ = c.cmd.Wait() // after the last read, as Wait closes the pipe
	}()
	t.Cleanup(func() {
		c.kill()
		if t.Failed() {
			t.Logf("child %s logs:\n%s", name, c.stderr.String())
		}
	})
	c.expect(t, "ready", 30*time.Second)
	return c
}

// expect waits for the child's next report and checks it starts with want.
func (c *child) expect(t *testing.T, want string, timeout time.Duration) string {
	t.Helper()
	select {
	case line, ok := <-c.lines:
		if !ok {
			t.Fatalf("child %s exited while the test waited for %q", c.name, want)
		}
		if !strings.HasPrefix(line, want) {
			t.Fatalf("child %s reported %q, want %q", c.name, line, want)
		}
		return line
	case <-time.After(timeout):
		t.Fatalf("child %s did not report %q within %v", c.name, want, timeout)
	}
	return ""
}

// stop ends the child gracefully and returns its remaining reports.
func (c *child) stop(t *testing.T) []string {
	t.Helper()
	_ = c.stdin.Close()
	var lines []string
	timeout := time.After(30 * time.Second)
	for {
		select {
		case line, ok := <-c.lines:
			if !ok {
				if c.cmd.ProcessState == nil || !c.cmd.ProcessState.Success() {
					t.Errorf("child %s: %v", c.name, c.cmd.ProcessState)
				}
				return lines
			}
			lines = append(lines, line)
		case <-timeout:
			t.Fatalf("child %s did not stop", c.name)
		}
	}
}

// kill ends the child at once, as a crash would, and waits for it.
func (c *child) kill() {
	_ = c.cmd.Process.Kill()
	for range c.lines { // drain so the reader can finish
	}
	<-c.done
}

// send sends a request with the given request id, asking for a reply.
func (f *fleet) send(id, body string) {
	f.t.Helper()
	_, err := f.sqs.SendMessage(context.Background(), &sqs.SendMessageInput{
		QueueUrl:    aws.String(f.requests),
		MessageBody: aws.String(body),
		MessageAttributes: map[string]types.MessageAttributeValue{
			sqsapi.RequestIDAttribute:        {DataType: aws.String("String"), StringValue: aws.String(id)},
			sqsapi.ResponseQueueURLAttribute: {DataType: aws.String("String"), StringValue: aws.String(f.replies)},
		},
	})
	if err != nil {
		f.t.Fatal(err)
	}
}

// collectReplies receives replies until want arrived and then for quiet
// more, or until timeout; it returns the bodies by correlation id.
func (f *fleet) collectReplies(want int, quiet, timeout time.Duration) map[string][]string {
	f.t.Helper()
	ctx := context.Background()
	got := make(map[string][]string)
	n := 0
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if end := time.Now().Add(quiet); n >= want && end.Before(deadline) {
			deadline = end
		}
		out, err := f.sqs.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(f.replies), WaitTimeSeconds: 1, MaxNumberOfMessages: 10,
			MessageAttributeNames: []string{"All"},
		})
		if err != nil {
			f.t.Fatal(err)
		}
		for _, m := range out.Messages {
			id := aws.ToString(m.MessageAttributes[sqsapi.CorrelationIDAttribute].StringValue)
			got[id] = append(got[id], aws.ToString(m.Body))
			n++
			if _, err := f.sqs.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(f.replies), ReceiptHandle: m.ReceiptHandle}); err != nil {
				f.t.Fatal(err)
			}
		}
	}
	return got
}

// stats parses a child's final "stats" report.
func stats(t *testing.T, lines []string) map[string]int {
	t.Helper()
	for _, l := range lines {
		if rest, ok := strings.CutPrefix(l, "stats "); ok {
			m := make(map[string]int)
			for _, kv := range strings.Fields(rest) {
				var v int
				k, s, _ := strings.Cut(kv, "=")
				if _, err := fmt.Sscan(s, &v); err != nil {
					t.Fatalf("bad stats %q", l)
				}
				m[k] = v
			}
			return m
		}
	}
	t.Fatalf("no stats in %q", lines)
	return nil
}

// Two responder processes receive the same request (SQS delivers a
// message more than once; here the request is sent twice under one
// request id): the handler runs once, and the second delivery is answered
// with the stored reply.
func TestSeparateProcessesHandleOnce(t *testing.T) {
	f := newFleet(t)
	a := f.start("a", "1500ms")
	b := f.start("b", "1500ms")

	f.send("order-1", "order 1")
	f.send("order-1", "order 1")
	replies := f.collectReplies(2, 3*time.Second, 60*time.Second)

	ra, rb := a.stop(t), b.stop(t)
	var handled []string
	for _, l := range append(ra, rb...) {
		if strings.HasPrefix(l, "handling ") {
			handled = append(handled, l)
		}
	}
	if len(handled) != 1 || handled[0] != "handling order-1" {
		t.Fatalf("handler runs %q, want one", handled)
	}
	got := replies["order-1"]
	if len(replies) != 1 || len(got) != 2 || got[0] != got[1] || !strings.HasPrefix(got[0], "answer to order 1 from ") {
		t.Fatalf("replies %q, want the same answer twice", replies)
	}

	sa, sb := stats(t, ra), stats(t, rb)
	t.Logf("a: %v; b: %v", sa, sb)
	if sa["received"] == 0 || sb["received"] == 0 {
		t.Fatalf("a process received nothing: a %v, b %v", sa, sb)
	}
	if sa["handled"]+sb["handled"] != 1 || sa["deduplicated"]+sb["deduplicated"] != 1 {
		t.Fatalf("want one handled and one deduplicated: a %v, b %v", sa, sb)
	}
	if sa["deferred"]+sb["deferred"] == 0 {
		t.Fatalf("the second delivery arrived during the first and was not deferred: a %v, b %v", sa, sb)
	}
	if sa["errors"]+sb["errors"] != 0 {
		t.Fatalf("store errors: a %v, b %v", sa, sb)
	}
}

// A responder dies while its handler runs and holds the lease; once the
// lease and the request's visibility run out, another process takes the
// request over and answers it, once.
func TestLeaseExpiresAfterResponderDies(t *testing.T) {
	f := newFleet(t)
	ctx := context.Background()
	a := f.start("a", "block")
	f.send("order-2", "order 2")
	a.expect(t, "handling order-2", 30*time.Second)

	rdb := f.redis.client(t)
	key := f.prefix + "order-2"
	lease := rdb.Get(ctx, key).Val()
	if !strings.HasPrefix(lease, "L:") {
		t.Fatalf("while a handles the request its key holds %q, want a lease", lease)
	}
	// a keeps the lease alive past its first length.
	time.Sleep(childVisibility + childVisibility/2) // real: the responders are child processes
	if v := rdb.Get(ctx, key).Val(); v != lease {
		t.Fatalf("a's lease was not renewed: the key holds %q", v)
	}

	b := f.start("b", "10ms")
	a.kill()

	replies := f.collectReplies(1, 3*time.Second, 60*time.Second)
	if got := replies["order-2"]; len(replies) != 1 || len(got) != 1 || got[0] != "answer to order 2 from b" {
		t.Fatalf("replies %q, want one answer from b", replies)
	}
	lines := b.stop(t)
	if len(lines) == 0 || lines[0] != "handling order-2" {
		t.Fatalf("b reported %q", lines)
	}
	s := stats(t, lines)
	t.Logf("b: %v", s)
	if s["handled"] != 1 || s["errors"] != 0 {
		t.Fatalf("b stats %v", s)
	}
	if v := rdb.Get(ctx, key).Val(); !strings.HasPrefix(v, `D{"v":1,"reply":{"body":"answer to order 2 from b"`) {
		t.Fatalf("after the take-over the key holds %q", v)
	}
}
