package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/internal/awserr"
	"github.com/tempqueues/tempqueues/sqstest"
)

// runOK runs the built tempq against ep with no endpoint in the environment
// and fails the test unless it exits 0 with nothing on stderr.
func runOK(t *testing.T, ep []string, args ...string) string {
	t.Helper()
	out, errOut, code := tempq(t, noEnvEndpoint, append(args, ep...)...)
	if code != 0 || errOut != "" {
		t.Fatalf("%v: code %d, stdout %q, stderr %q", args, code, out, errOut)
	}
	return out
}

// An emulator user makes, fills, reads, empties and removes a queue with
// tempq alone.
func TestQueueVerbs(t *testing.T) {
	t.Parallel()
	clock := sqstest.NewClock(time.Time{}) // the server's: receives here are short polls
	client, ep, _ := server(t, func(o *sqstest.Options) { o.Clock = clock })
	ctx := context.Background()

	u := strings.TrimSpace(runOK(t, ep, "create-queue", "--queue", "orders", "--visibility-timeout", "45s", "--retention", "1h", "--delay", "0s"))
	if !strings.HasSuffix(u, "/orders") {
		t.Fatalf("create-queue printed %q, want the queue URL", u)
	}
	a, err := client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(u), AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameAll}})
	if err != nil || a.Attributes["VisibilityTimeout"] != "45" || a.Attributes["MessageRetentionPeriod"] != "3600" || a.Attributes["DelaySeconds"] != "0" {
		t.Fatalf("orders attributes %v (%v)", a, err)
	}
	var made struct {
		QueueURL string `json:"queue_url"`
	}
	if err := json.Unmarshal([]byte(runOK(t, ep, "create-queue", "--queue", "jobs.fifo", "--content-dedup", "--json")), &made); err != nil || !strings.HasSuffix(made.QueueURL, "/jobs.fifo") {
		t.Fatalf("create-queue --json: %+v (%v)", made, err)
	}
	a, err = client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(made.QueueURL), AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameAll}})
	if err != nil || a.Attributes["FifoQueue"] != "true" || a.Attributes["ContentBasedDeduplication"] != "true" {
		t.Fatalf("jobs.fifo attributes %v (%v)", a, err)
	}

	// Sending prints the message id; receiving prints bodies, one a line.
	if id := strings.TrimSpace(runOK(t, ep, "send", "--queue", "orders", "--attr", "tenant=acme", "first")); id == "" {
		t.Fatal("send printed no message id")
	}
	var sent struct {
		MessageID string `json:"message_id"`
	}
	if err := json.Unmarshal([]byte(runOK(t, ep, "send", "second", "--queue", u, "--json")), &sent); err != nil || sent.MessageID == "" {
		t.Fatalf("send --json: %+v (%v)", sent, err)
	}
	out := runOK(t, ep, "receive", "--queue", "orders", "--max", "10", "--visibility", "1s")
	if lines := strings.Fields(out); len(lines) != 2 || !strings.Contains(out, "first\n") || !strings.Contains(out, "second\n") {
		t.Fatalf("receive printed %q", out)
	}
	clock.Advance(time.Second) // --visibility 1s: visible again
	var got []received
	if err := json.Unmarshal([]byte(runOK(t, ep, "receive", "--queue", "orders", "--max", "10", "--json", "--delete")), &got); err != nil || len(got) != 2 {
		t.Fatalf("receive --json --delete: %+v (%v)", got, err)
	}
	for _, m := range got {
		if m.ID == "" || m.ReceiptHandle == "" || m.ReceiveCount != 2 || (m.Body == "first") != (m.Attributes["tenant"] == "acme") {
			t.Errorf("received %+v", m)
		}
	}
	// Empty: nothing, or [] with --json, and exit 0.
	if out := runOK(t, ep, "receive", "--queue", "orders"); out != "" {
		t.Fatalf("receive on an empty queue printed %q", out)
	}
	if out := runOK(t, ep, "receive", "--queue", "orders", "--json"); out != "[]\n" {
		t.Fatalf("receive --json on an empty queue printed %q", out)
	}

	// A delayed message waits; FIFO sends get the default group, and
	// content-based deduplication is left to the queue.
	runOK(t, ep, "send", "--queue", "orders", "--delay", "60s", "later")
	if n := visible(t, client, u); n != 0 {
		t.Errorf("a message sent with --delay 60s is visible (%d)", n)
	}
	runOK(t, ep, "send", "--queue", "jobs.fifo", "same")
	runOK(t, ep, "send", "--queue", "jobs.fifo", "same")
	runOK(t, ep, "send", "--queue", "jobs.fifo", "--group-id", "g2", "--dedup-id", "d1", "other")
	got = nil
	if err := json.Unmarshal([]byte(runOK(t, ep, "receive", "--queue", "jobs.fifo", "--max", "10", "--json")), &got); err != nil || len(got) != 2 ||
		got[0].GroupID == got[1].GroupID || (got[0].GroupID != defaultGroupID && got[1].GroupID != defaultGroupID) {
		t.Fatalf("receive from jobs.fifo: %+v (%v)", got, err)
	}
	// Without content-based deduplication, each send is a message of its own.
	runOK(t, ep, "create-queue", "--queue", "plain.fifo")
	runOK(t, ep, "send", "--queue", "plain.fifo", "same")
	runOK(t, ep, "send", "--queue", "plain.fifo", "same")
	if out := runOK(t, ep, "receive", "--queue", "plain.fifo", "--max", "10"); out != "same\nsame\n" {
		t.Fatalf("receive from plain.fifo printed %q", out)
	}

	// list-queues lists every queue; --prefix narrows.
	out = runOK(t, ep, "list-queues")
	if strings.Count(out, "\n") != 3 || !strings.Contains(out, u+"\n") || !strings.Contains(out, made.QueueURL+"\n") {
		t.Fatalf("list-queues printed %q", out)
	}
	var listed []struct{ Name, URL string }
	if err := json.Unmarshal([]byte(runOK(t, ep, "list-queues", "--prefix", "ord", "--json")), &listed); err != nil || len(listed) != 1 || listed[0].Name != "orders" || listed[0].URL != u {
		t.Fatalf("list-queues --prefix ord --json: %+v (%v)", listed, err)
	}

	if out := runOK(t, ep, "purge-queue", "--queue", "orders"); out != "purged "+u+"\n" {
		t.Fatalf("purge-queue printed %q", out)
	}
	if n := visible(t, client, u); n != 0 {
		t.Errorf("%d messages visible after the purge", n)
	}
	if out := runOK(t, ep, "delete-queue", "--queue", u, "--json"); out != `{"deleted":"`+u+`"}`+"\n" {
		t.Fatalf("delete-queue --json printed %q", out)
	}
	if _, err := client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(u)}); !awserr.IsQueueDoesNotExist(err) {
		t.Fatalf("orders survived delete-queue: %v", err)
	}
	_, errOut, code := tempq(t, noEnvEndpoint, append([]string{"delete-queue", "--queue", "orders"}, ep...)...)
	if code != exitFailure || !strings.Contains(errOut, `queue "orders" does not exist`) {
		t.Fatalf("delete-queue of a missing queue: code %d, stderr %q", code, errOut)
	}
}

// Bad input to the queue verbs is a usage error naming the flag or
// argument, found before any call: the server counts none.
func TestQueueVerbsBadInput(t *testing.T) {
	t.Parallel()
	srv := sqstest.Start(t)
	ep := []string{"--endpoint-url", srv.URL()}
	big := strings.Repeat("x", 1<<20+1)
	elevenAttrs := []string{}
	for _, k := range strings.Split("a b c d e f g h i j k", " ") {
		elevenAttrs = append(elevenAttrs, "--attr", k+"=v")
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"create-queue"}, "--queue is required"},
		{[]string{"create-queue", "orders"}, "name the queue with --queue"},
		{[]string{"create-queue", "--queue", "bad name"}, "--queue"},
		{[]string{"create-queue", "--queue", "http://127.0.0.1/000000000000/q"}, "--queue"},
		{[]string{"create-queue", "--queue", "q", "--content-dedup"}, "--content-dedup"},
		{[]string{"create-queue", "--queue", "q", "--retention", "30s"}, "--retention"},
		{[]string{"create-queue", "--queue", "q", "--visibility-timeout", "13h"}, "--visibility-timeout"},
		{[]string{"create-queue", "--queue", "q", "--delay", "1500ms"}, "--delay"},
		{[]string{"delete-queue"}, "--queue is required"},
		{[]string{"delete-queue", "--queue", "a b"}, "--queue"},
		{[]string{"purge-queue", "--queue", ""}, "--queue"},
		{[]string{"purge-queue", "q"}, "name the queue with --queue"},
		{[]string{"list-queues", "--prefix", "a/b"}, "--prefix"},
		{[]string{"list-queues", "extra"}, "unexpected arguments"},
		{[]string{"send", "x"}, "--queue is required"},
		{[]string{"send", "--queue", "q"}, "BODY"},
		{[]string{"send", "--queue", "q", ""}, "BODY is empty"},
		{[]string{"send", "--queue", "q", "-"}, "BODY"}, // big on stdin
		{[]string{"send", "--queue", "q", "a\x01b"}, "BODY"},
		{[]string{"send", "--queue", "q", "--attr", "novalue", "x"}, "-attr"},
		{[]string{"send", "--queue", "q", "--attr", "k=", "x"}, "-attr"},
		{append(append([]string{"send", "--queue", "q"}, elevenAttrs...), "x"), "--attr"},
		{[]string{"send", "--queue", "q", "--delay", "16m", "x"}, "--delay"},
		{[]string{"send", "--queue", "q", "--delay", "-1s", "x"}, "--delay"},
		{[]string{"send", "--queue", "q", "--group-id", "g", "x"}, "--group-id is for FIFO queues"},
		{[]string{"send", "--queue", "q", "--dedup-id", "d", "x"}, "--dedup-id is for FIFO queues"},
		{[]string{"send", "--queue", "q.fifo", "--delay", "1s", "x"}, "--delay"},
		{[]string{"send", "--queue", "q.fifo", "--group-id", "has space", "x"}, "--group-id"},
		{[]string{"send", "--queue", "q.fifo", "--dedup-id", strings.Repeat("d", 129), "x"}, "--dedup-id"},
		{[]string{"receive"}, "--queue is required"},
		{[]string{"receive", "--queue", "q", "--max", "0"}, "--max"},
		{[]string{"receive", "--queue", "q", "--max", "11"}, "--max"},
		{[]string{"receive", "--queue", "q", "--wait", "21s"}, "--wait"},
		{[]string{"receive", "--queue", "q", "--visibility", "0s"}, "--visibility"},
		{[]string{"receive", "--queue", "q", "--visibility", "13h"}, "--visibility"},
	} {
		_, stderr, code := tempqStdin(t, big, noEnvEndpoint, append(tc.args, ep...)...)
		if code != exitUsage || !strings.Contains(stderr, tc.want) {
			t.Errorf("%.120q: code %d, stderr %.300q; want 2 and %q", tc.args, code, stderr, tc.want)
		}
	}
	if calls := srv.Calls(); len(calls) != 0 {
		t.Errorf("bad input made calls: %v", calls)
	}
}
