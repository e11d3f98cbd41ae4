package main

import (
	"bufio"
	"context"
	"encoding/json"
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

	"github.com/tempqueues/tempqueues/internal/awserr"
	"github.com/tempqueues/tempqueues/internal/testkit/testtime"
	"github.com/tempqueues/tempqueues/sqsapi"
	"github.com/tempqueues/tempqueues/sqstest"
)

// noEnvEndpoint keeps the environment from naming a server.
var noEnvEndpoint = []string{"AWS_ENDPOINT_URL_SQS="}

// server starts an sqstest server for a test and returns a client, the
// --endpoint-url flag pair and a queue creator.
func server(t *testing.T, optFns ...func(*sqstest.Options)) (*sqs.Client, []string, func(name string, attrs map[string]string) string) {
	t.Helper()
	srv := sqstest.Start(t, optFns...)
	client := srv.Client()
	create := func(name string, attrs map[string]string) string {
		t.Helper()
		out, err := client.CreateQueue(context.Background(), &sqs.CreateQueueInput{QueueName: aws.String(name), Attributes: attrs})
		if err != nil {
			t.Fatal(err)
		}
		return aws.ToString(out.QueueUrl)
	}
	return client, []string{"--endpoint-url", srv.URL()}, create
}

func jsonLines(t *testing.T, s string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(s), "\n") {
		var v map[string]any
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			t.Fatalf("not JSON: %q: %v", line, err)
		}
		out = append(out, v)
	}
	return out
}

func visible(t *testing.T, client *sqs.Client, u string) int {
	t.Helper()
	out, err := client.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{QueueUrl: aws.String(u), AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameApproximateNumberOfMessages}})
	if err != nil {
		t.Fatal(err)
	}
	n, _ := strconv.Atoi(out.Attributes["ApproximateNumberOfMessages"])
	return n
}

func TestCommandsNeedANamedServer(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"queues"}, {"sweep"}, {"backlog", "--queue", "q"}, {"redrive", "--dlq", "d", "--parking", "p"}, {"call", "--queue", "q", "hi"}, {"serve-echo", "--queue", "q"},
	} {
		_, stderr, code := tempq(t, noEnvEndpoint, args...)
		if code != 2 || !strings.Contains(stderr, "no SQS server named") {
			t.Errorf("%v: code %d, stderr %q", args, code, stderr)
		}
		stdout, stderr, code := tempq(t, noEnvEndpoint, append(args[:1:1], "--help")...)
		if code != 0 || !strings.Contains(stdout, "endpoint-url") || !strings.Contains(stdout, "usage: tempq "+args[0]) || stderr != "" {
			t.Errorf("%s --help: code %d, stdout %q, stderr %q", args[0], code, stdout, stderr)
		}
	}
}

// TestCallAndServeEcho runs serve-echo as a process, calls it, calls a
// queue nobody serves (exit code 3), and stops the server with SIGINT.
func TestCallAndServeEcho(t *testing.T) {
	t.Parallel()
	_, ep, create := server(t)
	bin, err := tempqBinary()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, append([]string{"serve-echo", "--queue", "echo"}, ep...)...)
	cmd.Env = append(os.Environ(), noEnvEndpoint...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill() }()
	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	if first := <-lines; !strings.HasPrefix(first, "serving echo on ") {
		t.Fatalf("serve-echo printed %q, stderr %q", first, stderr.String())
	}

	out, errOut, code := tempq(t, noEnvEndpoint, append([]string{"call", "--queue", "echo", "hello, world"}, ep...)...)
	if code != 0 || out != "hello, world\n" {
		t.Fatalf("call: code %d, stdout %q, stderr %q", code, out, errOut)
	}
	out, errOut, code = tempq(t, noEnvEndpoint, append([]string{"call", "--queue", "echo", "--json", "--attr", "tenant=acme", `{"n":1}`}, ep...)...)
	var reply struct {
		Body       string            `json:"body"`
		Attributes map[string]string `json:"attributes"`
		RequestID  string            `json:"request_id"`
		RTT        float64           `json:"rtt_ms"`
	}
	if err := json.Unmarshal([]byte(out), &reply); code != 0 || err != nil || reply.Body != `{"n":1}` || reply.RequestID == "" ||
		reply.Attributes[sqsapi.CorrelationIDAttribute] != reply.RequestID || reply.RTT <= 0 {
		t.Fatalf("call --json: code %d, %q (%v), stderr %q", code, out, err, errOut)
	}
	create("silent", nil)
	start := time.Now()
	_, errOut, code = tempq(t, noEnvEndpoint, append([]string{"call", "--queue", "silent", "--timeout", "1s", "anyone?"}, ep...)...)
	if code != exitTimeout || !strings.Contains(errOut, "no reply to request") || time.Since(start) > 15*time.Second {
		t.Fatalf("call without a server: code %d, stderr %q", code, errOut)
	}
	_, errOut, code = tempq(t, noEnvEndpoint, append([]string{"call", "--queue", "missing", "x"}, ep...)...)
	if code != 1 || !strings.Contains(errOut, `queue "missing" does not exist`) {
		t.Fatalf("call to a missing queue: code %d, stderr %q", code, errOut)
	}

	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	var served []string
	for l := range lines {
		served = append(served, l)
	}
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	select {
	case err := <-waited:
		if err != nil {
			t.Fatalf("serve-echo after SIGINT: %v, stderr %q", err, stderr.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("serve-echo did not stop within 10s of SIGINT")
	}
	if len(served) != 2 || !strings.Contains(served[0], "echo request") || !strings.Contains(stderr.String(), "2 requests, 2 replies") {
		t.Fatalf("serve-echo output %q, stderr %q", served, stderr.String())
	}
}

func TestQueuesAndSweep(t *testing.T) {
	t.Parallel()
	client, ep, create := server(t)
	const prefix = "tq-ops-"
	hb := func(age time.Duration) map[string]string {
		return map[string]string{sqsapi.RetentionTag: "300", sqsapi.HeartbeatTag: strconv.FormatInt(time.Now().Add(-age).UnixMilli(), 10)}
	}
	idle := create(prefix+"00000000-0000-0000-0000-000000000000-0", nil)
	live := create(prefix+"11111111-1111-1111-1111-111111111111-0", nil)
	plain := create(prefix+"plain", nil)
	for u, tags := range map[string]map[string]string{idle: hb(time.Hour), live: hb(30 * time.Second)} {
		if _, err := client.TagQueue(context.Background(), &sqs.TagQueueInput{QueueUrl: aws.String(u), Tags: tags}); err != nil {
			t.Fatal(err)
		}
	}
	out, errOut, code := tempq(t, noEnvEndpoint, append([]string{"queues", "--prefix", prefix}, ep...)...)
	t.Logf("tempq queues:\n%s", out)
	if code != 0 || !strings.Contains(out, "HEARTBEAT AGE") || !strings.Contains(out, `3 queues with prefix "tq-ops-": 1 live, 1 idle, 1 without heartbeat tags`) {
		t.Fatalf("queues: code %d, stdout %q, stderr %q", code, out, errOut)
	}
	out, _, code = tempq(t, noEnvEndpoint, append([]string{"queues", "--prefix", prefix, "--json"}, ep...)...)
	verdicts := map[string]any{}
	lines := jsonLines(t, out)
	for _, v := range lines[:len(lines)-1] {
		verdicts[v["queue_url"].(string)] = v["verdict"]
	}
	if code != 0 || verdicts[idle] != "idle" || verdicts[live] != "live" || verdicts[plain] != "not-temporary" {
		t.Fatalf("queues --json: %v", verdicts)
	}
	// The last line: the fleet's figures, over the one live queue.
	fl, _ := lines[len(lines)-1]["fleet"].(map[string]any)
	age, _ := fl["heartbeat_age_seconds"].(map[string]any)
	tagging, _ := fl["tagging_per_second"].(map[string]any)
	if fl["temporary"] != 2.0 || fl["live"] != 1.0 || age["max"].(float64) < 30 || age["max"].(float64) > 300 ||
		tagging["heartbeats"] != 0.01 || tagging["quota"] != 30.0 {
		t.Fatalf("queues --json fleet figures: %v", fl)
	}

	out, _, code = tempq(t, noEnvEndpoint, append([]string{"sweep", "--prefix", prefix, "--dry-run"}, ep...)...)
	t.Logf("tempq sweep --dry-run:\n%s", out)
	if code != 0 || !strings.Contains(out, "would delete "+queueNameOf(idle)) || strings.Contains(out, queueNameOf(live)) {
		t.Fatalf("sweep --dry-run: code %d, %q", code, out)
	}
	if _, err := client.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{QueueUrl: aws.String(idle)}); err != nil {
		t.Fatalf("the dry run deleted the idle queue: %v", err)
	}
	out, _, code = tempq(t, noEnvEndpoint, append([]string{"sweep", "--prefix", prefix, "--json"}, ep...)...)
	rep := jsonLines(t, out)[0]
	if code != 0 || fmt.Sprint(rep["deleted"]) != "["+idle+"]" || rep["dry_run"] != false {
		t.Fatalf("sweep --json: code %d, %v", code, rep)
	}
	if _, err := client.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{QueueUrl: aws.String(idle)}); !awserr.IsQueueDoesNotExist(err) {
		t.Fatalf("the idle queue survived the sweep: %v", err)
	}
}

func TestRedriveCommand(t *testing.T) {
	t.Parallel()
	client, ep, create := server(t)
	dlq := create("orders-dlq", nil)
	arn, err := client.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{QueueUrl: aws.String(dlq), AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameQueueArn}})
	if err != nil {
		t.Fatal(err)
	}
	src := create("orders", map[string]string{"RedrivePolicy": `{"deadLetterTargetArn":"` + arn.Attributes["QueueArn"] + `","maxReceiveCount":"3"}`})
	parking := create("orders-parking", nil)
	send := func(body, attempt string) {
		in := &sqs.SendMessageInput{QueueUrl: aws.String(dlq), MessageBody: aws.String(body), MessageAttributes: map[string]types.MessageAttributeValue{
			sqsapi.RequestIDAttribute: {DataType: aws.String("String"), StringValue: aws.String("req-" + body)},
		}}
		if attempt != "" {
			in.MessageAttributes[sqsapi.RedriveAttemptAttribute] = types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(attempt)}
		}
		if _, err := client.SendMessage(context.Background(), in); err != nil {
			t.Fatal(err)
		}
	}
	send("a", "")
	send("b", "1")
	send("c", "3")
	base := append([]string{"redrive", "--dlq", "orders-dlq", "--parking", "orders-parking", "--max-attempts", "3", "--base", "1ms", "--cap", "1ms"}, ep...)

	out, errOut, code := tempq(t, noEnvEndpoint, append(base, "--dry-run")...)
	t.Logf("tempq redrive --dry-run:\n%s", out)
	if code != 0 || strings.Count(out, "(dry run)") != 3 || !strings.Contains(out, "dry run of orders-dlq -> orders ") ||
		!strings.Contains(out, "3 messages: dry run, would have: replayed 2, scheduled 0, waiting 0, parked 1") {
		t.Fatalf("dry run: code %d, stdout %q, stderr %q", code, out, errOut)
	}
	if n := visible(t, client, dlq); n != 3 {
		t.Fatalf("after the dry run the dead-letter queue shows %d messages, want 3", n)
	}

	out, errOut, code = tempq(t, noEnvEndpoint, append(base, "--json")...)
	lines := jsonLines(t, out)
	if code != 0 || len(lines) != 4 {
		t.Fatalf("redrive --json: code %d, stdout %q, stderr %q", code, out, errOut)
	}
	actions := map[string]string{}
	for _, l := range lines[:3] {
		actions[l["request_id"].(string)] = fmt.Sprint(l["action"], "/", l["attempt"])
	}
	rep := lines[3]
	if fmt.Sprint(actions) != "map[req-a:replay/1 req-b:replay/2 req-c:park/3]" || rep["type"] != "report" || rep["replayed"] != float64(2) || rep["parked"] != float64(1) || rep["target"] != src {
		t.Fatalf("redrive --json: %v, report %v", actions, rep)
	}
	// The 0-second delays pass.
	testtime.Until(5*time.Second, func() bool { return visible(t, client, src) == 2 && visible(t, client, parking) == 1 })
	if a, b, c := visible(t, client, dlq), visible(t, client, src), visible(t, client, parking); a != 0 || b != 2 || c != 1 {
		t.Fatalf("after the redrive: dlq %d, source %d, parking %d messages", a, b, c)
	}

	_, errOut, code = tempq(t, noEnvEndpoint, append([]string{"redrive", "--dlq", "orders-dlq", "--parking", "orders-dlq"}, ep...)...)
	if code != 2 || !strings.Contains(errOut, "--parking: must differ from the dead-letter queue") || strings.Contains(errOut, "ParkingQueue") {
		t.Fatalf("parking = dlq: code %d, stderr %q", code, errOut)
	}
	_, errOut, code = tempq(t, noEnvEndpoint, append([]string{"redrive", "--dlq", "nope", "--parking", "orders-parking"}, ep...)...)
	if code != 1 || !strings.Contains(errOut, `queue "nope" does not exist`) {
		t.Fatalf("missing dlq: code %d, stderr %q", code, errOut)
	}
}

func TestBacklogCommand(t *testing.T) {
	t.Parallel()
	client, ep, create := server(t)
	q := create("requests", nil)
	for i := range 30 {
		if _, err := client.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: aws.String(q), MessageBody: aws.String(fmt.Sprint(i))}); err != nil {
			t.Fatal(err)
		}
	}
	args := append([]string{"backlog", "--queue", "requests", "--workers", "2", "--latency", "1s", "--processing", "100ms"}, ep...)
	out, errOut, code := tempq(t, noEnvEndpoint, args...)
	t.Logf("tempq backlog:\n%s", out)
	if code != 0 || !strings.Contains(out, "messages          30 visible") || !strings.Contains(out, "backlog/worker    15.0") || !strings.Contains(out, "desired workers   3\n") {
		t.Fatalf("backlog: code %d, stdout %q, stderr %q", code, out, errOut)
	}
	out, _, code = tempq(t, noEnvEndpoint, append(args, "--json", "--max", "2")...)
	f := jsonLines(t, out)[0]
	if code != 0 || f["desired_workers"] != float64(2) || f["target_backlog_per_worker"] != float64(10) || f["has_target"] != true {
		t.Fatalf("backlog --json: %v", f)
	}
	_, errOut, code = tempq(t, noEnvEndpoint, append(args, "--min", "5", "--max", "2")...)
	if code != 2 || !strings.Contains(errOut, "--min: 5 exceeds") || strings.Contains(errOut, "MinWorkers") {
		t.Fatalf("min > max: code %d, stderr %q", code, errOut)
	}
}
