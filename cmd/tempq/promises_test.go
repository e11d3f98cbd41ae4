package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/reaper"
	"github.com/tempqueues/tempqueues/sqsapi"
)

// serveEcho starts `tempq serve-echo` with args and waits for its first
// line; the returned function stops it.
func serveEcho(t *testing.T, args ...string) func() {
	t.Helper()
	bin, err := tempqBinary()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, append([]string{"serve-echo"}, args...)...)
	cmd.Env = append(os.Environ(), noEnvEndpoint...)
	pipe, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(pipe)
	if !sc.Scan() || !strings.HasPrefix(sc.Text(), "serving echo on ") {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("serve-echo %v printed %q, stderr %q", args, sc.Text(), stderr.String())
	}
	go func() {
		for sc.Scan() {
		}
	}()
	return func() {
		_ = cmd.Process.Signal(syscall.SIGINT)
		_ = cmd.Wait()
	}
}

// serve-echo serves a FIFO queue by name, existing (with attributes of its
// own) or missing, and call reaches it with --group-id or its default.
func TestServeAndCallFIFO(t *testing.T) {
	t.Parallel()
	client, ep, create := server(t)
	create("orders.fifo", map[string]string{"FifoQueue": "true", "ContentBasedDeduplication": "true"})
	for _, queue := range []string{"orders.fifo", "fresh.fifo"} {
		stop := serveEcho(t, append([]string{"--queue", queue}, ep...)...)
		for _, extra := range [][]string{{"--group-id", "customer-42"}, nil} {
			args := append(append([]string{"call", "--queue", queue}, extra...), append(ep, "hello")...)
			if out, errOut, code := tempq(t, noEnvEndpoint, args...); code != 0 || out != "hello\n" {
				t.Errorf("call %s %v: code %d, stdout %q, stderr %q", queue, extra, code, out, errOut)
			}
		}
		stop()
	}
	fresh, err := client.GetQueueUrl(context.Background(), &sqs.GetQueueUrlInput{QueueName: aws.String("fresh.fifo")})
	if err != nil {
		t.Fatal(err)
	}
	a, err := client.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{QueueUrl: fresh.QueueUrl, AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameFifoQueue}})
	if err != nil || a.Attributes["FifoQueue"] != "true" {
		t.Errorf("serve-echo made fresh.fifo with attributes %v (%v), want a FIFO queue", a, err)
	}
	create("plain", nil)
	if _, errOut, code := tempq(t, noEnvEndpoint, append([]string{"call", "--queue", "plain", "--group-id", "g"}, append(ep, "x")...)...); code != exitUsage || !strings.Contains(errOut, "--group-id is for FIFO queues") {
		t.Errorf("--group-id on a standard queue: code %d, stderr %q", code, errOut)
	}
}

// Input the library rejects before any call is bad usage: exit 2, as the
// docs say, not 1.
func TestRejectedInputExitsUsage(t *testing.T) {
	t.Parallel()
	_, ep, create := server(t)
	create("big", nil)
	args := []string{"call", "--queue", "big", "--timeout", "1s"}
	for i := range 10 { // with the requester's own, more than SQS's 10
		args = append(args, "--attr", fmt.Sprintf("a%d=v", i))
	}
	_, errOut, code := tempq(t, noEnvEndpoint, append(args, append(ep, "x")...)...)
	if code != exitUsage || !strings.Contains(errOut, "--attr: 10 attributes plus 2 added by tempqueues") {
		t.Errorf("too many attributes: code %d, stderr %q", code, errOut)
	}
}

// An unknown command that a real one starts with gets pointed to it.
func TestUnknownCommandSuggests(t *testing.T) {
	t.Parallel()
	_, stderr, code := tempq(t, bareEnv, "serve")
	if code != exitUsage || !strings.Contains(stderr, "did you mean serve-echo?") {
		t.Errorf("tempq serve: code %d, stderr %q", code, stderr)
	}
	if _, stderr, _ := tempq(t, bareEnv, "frobnicate"); strings.Contains(stderr, "did you mean") {
		t.Errorf("tempq frobnicate suggests: %q", stderr)
	}
}

// Errors name the command's flags, not the library's fields: redrive
// without a source queue says --target.
func TestRedriveErrorsNameFlags(t *testing.T) {
	t.Parallel()
	client, ep, create := server(t)
	create("lonely-dlq", nil)
	create("lonely-parking", nil)
	_, errOut, code := tempq(t, noEnvEndpoint, append([]string{"redrive", "--dlq", "lonely-dlq", "--parking", "lonely-parking"}, ep...)...)
	if code != exitUsage || !strings.Contains(errOut, "pass --target QUEUE") || strings.Contains(errOut, "set the target") {
		t.Errorf("no source queue: code %d, stderr %q", code, errOut)
	}
	// Two source queues: both are named.
	dlq := create("shared-dlq", nil)
	arn, err := client.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{QueueUrl: aws.String(dlq), AttributeNames: []types.QueueAttributeName{"QueueArn"}})
	if err != nil {
		t.Fatal(err)
	}
	policy := map[string]string{"RedrivePolicy": `{"deadLetterTargetArn":"` + arn.Attributes["QueueArn"] + `","maxReceiveCount":"3"}`}
	create("orders-eu", policy)
	create("orders-us", policy)
	_, errOut, code = tempq(t, noEnvEndpoint, append([]string{"redrive", "--dlq", "shared-dlq", "--parking", "lonely-parking"}, ep...)...)
	if code != exitUsage || !strings.Contains(errOut, "shared-dlq is the dead-letter queue of several queues (orders-") ||
		!strings.Contains(errOut, "orders-eu") || !strings.Contains(errOut, "orders-us") || !strings.Contains(errOut, "pass --target QUEUE") {
		t.Errorf("two source queues: code %d, stderr %q", code, errOut)
	}
}

// With no workers there is no per-worker figure to report.
func TestBacklogWithoutWorkers(t *testing.T) {
	t.Parallel()
	_, ep, create := server(t)
	create("idle-requests", nil)
	out, errOut, code := tempq(t, noEnvEndpoint, append([]string{"backlog", "--queue", "idle-requests", "--workers", "0"}, ep...)...)
	if code != 0 || !strings.Contains(out, "backlog/worker    - (no workers running)") {
		t.Errorf("backlog --workers 0: code %d, stdout %q, stderr %q", code, out, errOut)
	}
}

// sweep --retire removes a retired fleet's lease queue, and keeps it
// while a temporary queue of the prefix is live; a Java sweeper's queue,
// never temporary, does not count.
func TestSweepRetireDeletesTheLeaseQueue(t *testing.T) {
	t.Parallel()
	client, ep, create := server(t)
	const prefix = "tq-retire-"
	lease := create(reaper.LeaseQueueName(prefix), map[string]string{"FifoQueue": "true"})
	create(prefix, nil) // the Java client's sweeper queue is named by the prefix
	live := create(prefix+"22222222-2222-2222-2222-222222222222-0", nil)
	tags := map[string]string{sqsapi.RetentionTag: "300", sqsapi.HeartbeatTag: strconv.FormatInt(time.Now().UnixMilli(), 10)}
	if _, err := client.TagQueue(context.Background(), &sqs.TagQueueInput{QueueUrl: aws.String(live), Tags: tags}); err != nil {
		t.Fatal(err)
	}
	args := append([]string{"sweep", "--prefix", prefix, "--retire"}, ep...)
	if _, errOut, code := tempq(t, noEnvEndpoint, args...); code != exitFailure || !strings.Contains(errOut, "1 temporary queue with prefix") {
		t.Fatalf("retire with a live queue: code %d, stderr %q", code, errOut)
	}
	if _, err := client.GetQueueUrl(context.Background(), &sqs.GetQueueUrlInput{QueueName: aws.String(reaper.LeaseQueueName(prefix))}); err != nil {
		t.Fatalf("lease queue gone while the fleet lives: %v", err)
	}
	if _, err := client.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: aws.String(live)}); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := tempq(t, noEnvEndpoint, args...)
	if code != 0 || !strings.Contains(out, "deleted the lease queue "+reaper.LeaseQueueName(prefix)) {
		t.Fatalf("retire: code %d, stdout %q, stderr %q", code, out, errOut)
	}
	if _, err := client.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{QueueUrl: aws.String(lease)}); err == nil {
		t.Error("the lease queue still exists")
	}
}

// The emulator has no authentication: listening beyond loopback, it says
// so.
func TestEmulatorWarnsBeyondLoopback(t *testing.T) {
	t.Parallel()
	for addr, want := range map[string]bool{
		"127.0.0.1:4566": true, "[::1]:4566": true, "localhost:0": true,
		"0.0.0.0:4566": false, ":4566": false, "192.168.1.10:4566": false, "nonsense": false,
	} {
		if got := loopbackAddr(addr); got != want {
			t.Errorf("loopbackAddr(%q) = %v, want %v", addr, got, want)
		}
	}
}

// serve-echo replies to requesters with the default prefix; a requester
// with its own prefix needs --allow-reply-to, which is checked like any
// flag.
func TestServeEchoAllowReplyToIsAFlag(t *testing.T) {
	t.Parallel()
	_, ep, create := server(t)
	create("echo-allow", nil)
	args := append([]string{"serve-echo", "--queue", "echo-allow", "--allow-reply-to", "has space"}, ep...)
	if _, errOut, code := tempq(t, noEnvEndpoint, args...); code != exitUsage || !strings.Contains(errOut, "--allow-reply-to") {
		t.Fatalf("bad --allow-reply-to: code %d, stderr %q", code, errOut)
	}
}
