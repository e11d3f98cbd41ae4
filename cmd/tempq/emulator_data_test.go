package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/internal/testkit/child"
	"github.com/tempqueues/tempqueues/internal/testkit/sqstestenv"
	"github.com/tempqueues/tempqueues/internal/testkit/testtime"
	"github.com/tempqueues/tempqueues/sqstest"
)

// --queue creates queues with attributes before the ready line; --account
// and --region shape the URLs and ARNs; a bad --queue is a usage error and
// the server never says it is ready.
func TestEmulatorQueuesAccountRegion(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr lockedBuffer
	errc := make(chan error, 1)
	go func() {
		errc <- runEmulator(ctx, []string{"--addr", "127.0.0.1:0", "--account", "123456789012", "--region", "eu-west-3",
			"--queue", "jobs:VisibilityTimeout=45,DelaySeconds=2", "--queue", "events.fifo"}, &stdout, &stderr)
	}()
	waitFor(t, &stdout, "\n")
	line := stdout.String()
	url := strings.TrimSpace(strings.TrimPrefix(line, "sqstest listening on "))
	if !strings.HasPrefix(line, "sqstest listening on http://") || strings.Count(line, "\n") != 1 {
		t.Fatalf("ready line %q", line)
	}
	client := sqstestenv.NewClient(url, nil)
	got, err := client.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String("jobs")})
	if err != nil {
		t.Fatal(err)
	}
	if want := url + "/123456789012/jobs"; *got.QueueUrl != want {
		t.Fatalf("QueueUrl %s, want %s", *got.QueueUrl, want)
	}
	attrs, err := client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: got.QueueUrl,
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameAll}})
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]string{"VisibilityTimeout": "45", "DelaySeconds": "2",
		"QueueArn": "arn:aws:sqs:eu-west-3:123456789012:jobs"} {
		if attrs.Attributes[k] != want {
			t.Errorf("%s = %q, want %q", k, attrs.Attributes[k], want)
		}
	}
	fifo, err := client.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String("events.fifo")})
	if err != nil {
		t.Fatalf("events.fifo: %v", err)
	}
	fattrs, err := client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: fifo.QueueUrl,
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameFifoQueue}})
	if err != nil || fattrs.Attributes["FifoQueue"] != "true" {
		t.Fatalf("events.fifo attributes %v, %v", fattrs, err)
	}
	cancel()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}

	for _, args := range [][]string{
		{"--queue", "bad:NoSuchAttribute=1"},
		{"--queue", "bad:VisibilityTimeout"},
		{"--account", "12"},
	} {
		var out, errOut lockedBuffer
		err := runEmulator(context.Background(), append([]string{"--addr", "127.0.0.1:0"}, args...), &out, &errOut)
		if code := exitCode(err); code != exitUsage {
			t.Errorf("%v: error %v (exit %d), want a usage error", args, err, code)
		}
		if out.String() != "" {
			t.Errorf("%v: printed %q, want no ready line", args, out.String())
		}
	}
}

func exitCode(err error) int {
	var ee *exitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.code
	}
	return exitFailure
}

// startDataEmulator runs the built tempq emulator on dir in a child
// process that stops when its stdin closes.
func startDataEmulator(t *testing.T, dir string) (*exec.Cmd, string, func()) {
	t.Helper()
	bin, err := tempqBinary()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "emulator", "--addr", "127.0.0.1:0", "--data", dir, "--until-stdin-eof")
	url, stdin, err := child.Start(cmd, "sqstest listening on ", 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	return cmd, url, func() {
		_ = stdin.Close()
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	}
}

// killLedger is what the clients of a killed emulator were told, across
// the rounds of TestEmulatorDataSurvivesKill.
type killLedger struct {
	mu       sync.Mutex
	tried    map[string]bool   // every body a send was attempted for
	acked    map[string]bool   // sends the server acknowledged
	deleting map[string]bool   // every body a delete was attempted for
	deleted  map[string]bool   // deletes the server acknowledged
	dedup    map[string]string // FIFO deduplication id (or body) -> MessageId acknowledged
}

// TestEmulatorDataSurvivesKill is the crash test of --data: in several
// rounds, concurrent senders, receivers and deleters load the emulator
// (a standard queue, a FIFO queue with explicit deduplication ids, one with
// content-based deduplication), it is killed with SIGKILL at a random point
// in the load, and restarted on the same directory. Every round checks the
// whole history: every message whose send was acknowledged is there unless
// a delete was attempted, none whose delete was acknowledged is, and a
// resend of any FIFO message acknowledged in the last five minutes (all of
// them) is recognized as a duplicate with the original MessageId.
func TestEmulatorDataSurvivesKill(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx := context.Background()
	one := func(o *sqs.Options) { o.RetryMaxAttempts = 1 } // a retry could reach no server
	led := &killLedger{tried: map[string]bool{}, acked: map[string]bool{}, deleting: map[string]bool{},
		deleted: map[string]bool{}, dedup: map[string]string{}}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 26))
	pad := strings.Repeat(".", 16<<10)
	for round := range 3 {
		cmd, url, stop := startDataEmulator(t, dir)
		client := sqstestenv.NewClient(url, nil)
		qurl := func(name string) *string { return aws.String(url + "/000000000000/" + name) }
		if round == 0 {
			for name, attrs := range map[string]map[string]string{"crash": nil,
				"dedup.fifo":   {"FifoQueue": "true"},
				"content.fifo": {"FifoQueue": "true", "ContentBasedDeduplication": "true"}} {
				if _, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name), Attributes: attrs}); err != nil {
					t.Fatal(err)
				}
			}
		} else {
			// Every FIFO send so far is within its five minutes: a resend
			// must get the original MessageId and add nothing.
			led.mu.Lock()
			for key, id := range led.dedup {
				in := &sqs.SendMessageInput{MessageGroupId: aws.String("g")}
				if q, b, ok := strings.Cut(key, "/"); ok && q == "content.fifo" {
					in.QueueUrl, in.MessageBody = qurl(q), aws.String(b)
				} else {
					in.QueueUrl, in.MessageBody, in.MessageDeduplicationId = qurl("dedup.fifo"), aws.String("resent "+key), aws.String(key)
				}
				out, err := client.SendMessage(ctx, in)
				if err != nil {
					t.Fatal(err)
				}
				if *out.MessageId != id {
					t.Errorf("round %d: a resend of %s after a kill got MessageId %s, the original %s", round, key, *out.MessageId, id)
				}
			}
			led.mu.Unlock()
		}

		var wg sync.WaitGroup
		loadCtx, stopLoad := context.WithCancel(ctx)
		for w := range 6 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				queue, fifo := "crash", ""
				switch w {
				case 4:
					queue, fifo = "dedup.fifo", "explicit"
				case 5:
					queue, fifo = "content.fifo", "content"
				}
				for i := 0; loadCtx.Err() == nil; i++ {
					body := fmt.Sprintf("r%d-w%d-%d", round, w, i)
					if fifo == "" {
						// Big enough that the journal passes its 4 MiB of
						// slack each round: kills land in compactions too.
						body += pad
					}
					in := &sqs.SendMessageInput{QueueUrl: qurl(queue), MessageBody: &body}
					key := queue + "/" + body
					if fifo != "" {
						in.MessageGroupId = aws.String("g")
					}
					if fifo == "explicit" {
						key = "id-" + body
						in.MessageDeduplicationId = &key
					}
					led.mu.Lock()
					led.tried[body] = true
					led.mu.Unlock()
					out, err := client.SendMessage(loadCtx, in, one)
					if err != nil {
						return // the server is gone
					}
					led.mu.Lock()
					led.acked[body] = true
					if fifo != "" {
						led.dedup[key] = *out.MessageId
					}
					led.mu.Unlock()
					if i%3 != 2 {
						continue
					}
					got, err := client.ReceiveMessage(loadCtx, &sqs.ReceiveMessageInput{QueueUrl: qurl(queue),
						MaxNumberOfMessages: 2, VisibilityTimeout: 3600}, one)
					if err != nil {
						return
					}
					for _, m := range got.Messages {
						led.mu.Lock()
						led.deleting[*m.Body] = true
						led.mu.Unlock()
						if _, err := client.DeleteMessage(loadCtx, &sqs.DeleteMessageInput{QueueUrl: qurl(queue), ReceiptHandle: m.ReceiptHandle}, one); err != nil {
							return
						}
						led.mu.Lock()
						led.deleted[*m.Body] = true
						led.mu.Unlock()
					}
				}
			}()
		}
		// Kill at a random point once the load is under way.
		sends := 100 + rng.IntN(400)
		base := func() (int, int) {
			led.mu.Lock()
			defer led.mu.Unlock()
			return len(led.acked), len(led.deleted)
		}
		n0, d0 := base()
		// The emulator is a child process: real time.
		if !testtime.Until(30*time.Second, func() bool { n, d := base(); return n-n0 >= sends && d-d0 >= sends/6 }) {
			n, d := base()
			t.Fatalf("round %d: only %d sends and %d deletes acknowledged in 30 s", round, n-n0, d-d0)
		}
		if err := cmd.Process.Kill(); err != nil { // SIGKILL
			t.Fatal(err)
		}
		wg.Wait()
		stopLoad()
		stop()
		n, d := base()
		fi, err := os.Stat(filepath.Join(dir, "sqstest.journal"))
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("round %d: killed after %d acknowledged sends and %d deletes (%d and %d in all); journal %d KiB",
			round, n-n0, d-d0, n, d, fi.Size()>>10)
		checkKilledData(t, dir, led)
	}
}

// checkKilledData reads the directory's state, in-flight messages
// included, and checks it against everything the clients were told.
func checkKilledData(t *testing.T, dir string, led *killLedger) {
	t.Helper()
	srv := sqstest.NewServer(func(o *sqstest.Options) { o.DataDir = dir })
	defer srv.Close(context.Background())
	present := map[string]bool{}
	for _, q := range []string{"crash", "dedup.fifo", "content.fifo"} {
		msgs, err := srv.Messages(q)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range msgs {
			if present[m.Body] {
				t.Errorf("%s holds %q twice", q, m.Body)
			}
			present[m.Body] = true
		}
	}
	led.mu.Lock()
	defer led.mu.Unlock()
	lost, resurrected, unknown := 0, 0, 0
	for b := range led.acked {
		// A delete the crash left unanswered may or may not have been
		// done: only a message nobody tried to delete must be there.
		if !led.deleting[b] && !present[b] {
			lost++
		}
	}
	for b := range led.deleted {
		if present[b] {
			resurrected++
		}
	}
	for b := range present {
		if !led.tried[b] {
			unknown++
		}
	}
	if lost != 0 || resurrected != 0 || unknown != 0 {
		t.Fatalf("lost %d acknowledged sends, resurrected %d acknowledged deletes, %d messages nobody sent", lost, resurrected, unknown)
	}
}

// A second emulator on a directory in use refuses to start, exits non-zero
// and names the directory and the pid of the one that has it; the first
// keeps serving, and its data is intact.
func TestEmulatorDataDirOneServer(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	first, url, stop := startDataEmulator(t, dir)
	defer stop()
	client := sqstestenv.NewClient(url, nil)
	ctx := context.Background()
	q, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("jobs")})
	if err != nil {
		t.Fatal(err)
	}
	bin, err := tempqBinary()
	if err != nil {
		t.Fatal(err)
	}
	second := exec.Command(bin, "emulator", "--addr", "127.0.0.1:0", "--data", dir)
	var out strings.Builder
	second.Stdout, second.Stderr = &out, &out
	err = second.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() == 0 {
		t.Fatalf("the second emulator: %v, want a non-zero exit\n%s", err, out.String())
	}
	for _, want := range []string{dir, "pid " + strconv.Itoa(first.Process.Pid)} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the second emulator said %q, without %q", out.String(), want)
		}
	}
	if strings.Contains(out.String(), "listening") {
		t.Errorf("the second emulator said it was ready: %q", out.String())
	}
	for i := range 10 {
		if _, err := client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: q.QueueUrl, MessageBody: aws.String(strconv.Itoa(i))}); err != nil {
			t.Fatal(err)
		}
	}
	stop()
	srv := sqstest.NewServer(func(o *sqstest.Options) { o.DataDir = dir })
	defer srv.Close(ctx)
	if msgs, err := srv.Messages("jobs"); err != nil || len(msgs) != 10 {
		t.Fatalf("after a restart: %d messages, %v; want the 10 sent after the second emulator was refused", len(msgs), err)
	}
}

// With --data, a --queue that exists from a previous run gets the
// attributes the flags give now, and keeps its messages.
func TestEmulatorQueueFlagUpdatesKeptQueue(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	runOnce := func(vt string, body string) map[string]string {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var stdout, stderr lockedBuffer
		errc := make(chan error, 1)
		go func() {
			errc <- runEmulator(ctx, []string{"--addr", "127.0.0.1:0", "--data", dir, "--queue", "jobs:VisibilityTimeout=" + vt}, &stdout, &stderr)
		}()
		if !testtime.Until(10*time.Second, func() bool { return strings.Contains(stdout.String(), "\n") }) {
			select {
			case err := <-errc:
				t.Fatalf("the emulator ended: %v\n%s", err, stderr.String())
			default:
				t.Fatalf("the emulator said nothing in 10 s\n%s", stderr.String())
			}
		}
		client := sqstestenv.NewClient(strings.TrimSpace(strings.TrimPrefix(stdout.String(), "sqstest listening on ")), nil)
		u, err := client.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String("jobs")})
		if err != nil {
			t.Fatal(err)
		}
		if body != "" {
			if _, err := client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: u.QueueUrl, MessageBody: &body}); err != nil {
				t.Fatal(err)
			}
		}
		a, err := client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: u.QueueUrl,
			AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameAll}})
		if err != nil {
			t.Fatal(err)
		}
		cancel()
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
		return a.Attributes
	}
	runOnce("45", "kept")
	a := runOnce("50", "")
	if a["VisibilityTimeout"] != "50" || a["ApproximateNumberOfMessages"] != "1" {
		t.Fatalf("after a restart with new --queue attributes: VisibilityTimeout %s, %s messages; want 50 and 1",
			a["VisibilityTimeout"], a["ApproximateNumberOfMessages"])
	}
}
