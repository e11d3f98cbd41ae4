package main

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/internal/child"
	"github.com/tempqueues/tempqueues/internal/sqstestenv"
	"github.com/tempqueues/tempqueues/sqstest"
)

// --queue creates queues with attributes before the ready line; --account
// and --region shape the URLs and ARNs; a bad --queue is a usage error and
// the server never says it is ready.
func TestEmulatorQueuesAccountRegion(t *testing.T) {
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

// TestEmulatorDataSurvivesKill is the crash test of --data: concurrent
// senders and deleters load the emulator, it is killed with SIGKILL in the
// middle, and a restart on the same directory must hold every message
// whose send was acknowledged and none whose delete was.
func TestEmulatorDataSurvivesKill(t *testing.T) {
	dir := t.TempDir()
	cmd, url, stop := startDataEmulator(t, dir)
	defer stop()
	client := sqstestenv.NewClient(url, nil)
	ctx := context.Background()
	q, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("crash")})
	if err != nil {
		t.Fatal(err)
	}
	one := func(o *sqs.Options) { o.RetryMaxAttempts = 1 } // a retry could reach no server

	var mu sync.Mutex
	tried := map[string]bool{}    // every body a send was attempted for
	acked := map[string]bool{}    // sends the server acknowledged
	deleting := map[string]bool{} // every body a delete was attempted for
	deleted := map[string]bool{}  // deletes the server acknowledged
	var wg sync.WaitGroup
	loadCtx, stopLoad := context.WithCancel(ctx)
	defer stopLoad()
	for w := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; loadCtx.Err() == nil; i++ {
				body := fmt.Sprintf("w%d-%d", w, i)
				mu.Lock()
				tried[body] = true
				mu.Unlock()
				if _, err := client.SendMessage(loadCtx, &sqs.SendMessageInput{QueueUrl: q.QueueUrl, MessageBody: &body}, one); err != nil {
					return // the server is gone
				}
				mu.Lock()
				acked[body] = true
				mu.Unlock()
				if i%3 != 2 {
					continue
				}
				out, err := client.ReceiveMessage(loadCtx, &sqs.ReceiveMessageInput{QueueUrl: q.QueueUrl,
					MaxNumberOfMessages: 2, VisibilityTimeout: 3600}, one)
				if err != nil {
					return
				}
				for _, m := range out.Messages {
					mu.Lock()
					deleting[*m.Body] = true
					mu.Unlock()
					if _, err := client.DeleteMessage(loadCtx, &sqs.DeleteMessageInput{QueueUrl: q.QueueUrl, ReceiptHandle: m.ReceiptHandle}, one); err != nil {
						return
					}
					mu.Lock()
					deleted[*m.Body] = true
					mu.Unlock()
				}
			}
		}()
	}
	// Kill once the load is well under way.
	deadline := time.Now().Add(20 * time.Second)
	for {
		mu.Lock()
		n, d := len(acked), len(deleted)
		mu.Unlock()
		if n >= 300 && d >= 50 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("only %d sends and %d deletes acknowledged in 20 s", n, d)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := cmd.Process.Kill(); err != nil { // SIGKILL
		t.Fatal(err)
	}
	wg.Wait()
	stopLoad()

	// The command starts on the journal the killed one left and serves it.
	_, url2, stop2 := startDataEmulator(t, dir)
	c2 := sqstestenv.NewClient(url2, nil)
	attrs, err := c2.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url2 + "/000000000000/crash"),
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameAll}})
	if err != nil {
		t.Fatalf("queue after restart: %v", err)
	}
	stop2()

	// Read the state itself, in flight messages included.
	srv := sqstest.Start(t, func(o *sqstest.Options) { o.DataDir = dir })
	msgs, err := srv.Messages("crash")
	if err != nil {
		t.Fatal(err)
	}
	present := map[string]bool{}
	for _, m := range msgs {
		present[m.Body] = true
	}
	mu.Lock()
	defer mu.Unlock()
	lost, resurrected, unknown := 0, 0, 0
	for b := range acked {
		// A delete the crash left unanswered may or may not have been
		// done: only a message nobody tried to delete must be there.
		if !deleting[b] && !present[b] {
			lost++
		}
	}
	for b := range deleted {
		if present[b] {
			resurrected++
		}
	}
	for b := range present {
		if !tried[b] {
			unknown++
		}
	}
	t.Logf("killed after %d acknowledged sends and %d acknowledged deletes; %d messages after restart (ApproximateNumberOfMessages %s + NotVisible %s); lost %d, resurrected %d",
		len(acked), len(deleted), len(msgs), attrs.Attributes["ApproximateNumberOfMessages"], attrs.Attributes["ApproximateNumberOfMessagesNotVisible"], lost, resurrected)
	if lost != 0 || resurrected != 0 || unknown != 0 {
		t.Fatalf("lost %d acknowledged sends, resurrected %d acknowledged deletes, %d messages nobody sent", lost, resurrected, unknown)
	}
	if got := fmt.Sprint(len(msgs)); fmt.Sprint(atoi(attrs.Attributes["ApproximateNumberOfMessages"])+atoi(attrs.Attributes["ApproximateNumberOfMessagesNotVisible"])) != got {
		t.Fatalf("the restarted command counts %s + %s messages, the journal holds %s", attrs.Attributes["ApproximateNumberOfMessages"],
			attrs.Attributes["ApproximateNumberOfMessagesNotVisible"], got)
	}
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

// With --data, a --queue that exists from a previous run gets the
// attributes the flags give now, and keeps its messages.
func TestEmulatorQueueFlagUpdatesKeptQueue(t *testing.T) {
	dir := t.TempDir()
	runOnce := func(vt string, body string) map[string]string {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var stdout, stderr lockedBuffer
		errc := make(chan error, 1)
		go func() {
			errc <- runEmulator(ctx, []string{"--addr", "127.0.0.1:0", "--data", dir, "--queue", "jobs:VisibilityTimeout=" + vt}, &stdout, &stderr)
		}()
		waitFor(t, &stdout, "\n")
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
