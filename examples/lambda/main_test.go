package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/lambdatempq"
	"github.com/tempqueues/tempqueues/requester"
	"github.com/tempqueues/tempqueues/sqsapi"
	"github.com/tempqueues/tempqueues/sqsclient"
	"github.com/tempqueues/tempqueues/sqstest"
)

// The functions run locally: requests are sent to a queue, received the
// way Lambda's event source mapping receives them, turned into an
// events.SQSEvent and handed to the functions' handlers; on the embedded
// SQS server and on the fauxqs emulator when it is installed (make
// emulator).
func TestFunctions(t *testing.T) {
	srv := sqstest.NewServer()
	t.Cleanup(func() { _ = srv.Close(context.Background()) })
	t.Run("sqstest", func(t *testing.T) { testFunctions(t, srv.Client()) })
	t.Run("fauxqs", func(t *testing.T) {
		endpoint := startFauxqs(t)
		client := sqs.New(sqs.Options{
			Region: "us-east-1", BaseEndpoint: aws.String(endpoint),
			Credentials: credentials.NewStaticCredentialsProvider("test", "test", ""),
		}, sqsclient.BufferRequestBodies)
		testFunctions(t, client)
	})
}

func testFunctions(t *testing.T, client *sqs.Client) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	suffix := fmt.Sprint(time.Now().UnixNano())
	arns := map[string]string{}
	queue := func(name string) (string, string) {
		out, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name + suffix)})
		if err != nil {
			t.Fatal(err)
		}
		u := aws.ToString(out.QueueUrl)
		t.Cleanup(func() { _, _ = client.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: &u}) })
		a, err := client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: &u, AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameQueueArn}})
		if err != nil {
			t.Fatal(err)
		}
		arns[a.Attributes["QueueArn"]] = u
		return u, a.Attributes["QueueArn"]
	}
	requests, requestsARN := queue("logins")
	dlq, dlqARN := queue("logins-dlq")
	parking, _ := queue("logins-parking")
	// Lambda's event source mapping: receive, with every attribute.
	receive := func(u string, n int) []types.Message {
		var got []types.Message
		for deadline := time.Now().Add(20 * time.Second); len(got) < n && time.Now().Before(deadline); {
			out, err := client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &u, MaxNumberOfMessages: 10, WaitTimeSeconds: 1,
				MessageAttributeNames: []string{"All"}, MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll}})
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, out.Messages...)
		}
		if len(got) != n {
			t.Fatalf("received %d messages from %s, want %d", len(got), u, n)
		}
		return got
	}

	fn, err := newResponder(client, func(arn string) (string, error) { return arns[arn], nil })
	if err != nil {
		t.Fatal(err)
	}
	rq, err := requester.New(client, func(o *requester.Options) { o.DisableSweeping = true })
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rq.Close(context.Background()) }()
	call, err := rq.SendMessageAndGetResponseAsync(ctx, &sqs.SendMessageInput{QueueUrl: &requests, MessageBody: aws.String("login alice")})
	if err != nil {
		t.Fatal(err)
	}
	bad, err := rq.SendMessageAndGetResponseAsync(ctx, &sqs.SendMessageInput{QueueUrl: &requests, MessageBody: aws.String("login")})
	if err != nil {
		t.Fatal(err)
	}
	bad.Cancel() // nobody waits for the failing one

	msgs := receive(requests, 2)
	resp, err := fn.HandleSQSEvent(ctx, lambdatempq.Event(requestsARN, msgs))
	if err != nil {
		t.Fatal(err)
	}
	var failed types.Message
	for _, m := range msgs {
		if aws.ToString(m.Body) == "login" {
			failed = m
		}
	}
	if len(resp.BatchItemFailures) != 1 || resp.BatchItemFailures[0].ItemIdentifier != aws.ToString(failed.MessageId) {
		t.Fatalf("batch item failures %v, want only the request without a name", resp.BatchItemFailures)
	}
	reply, err := call.Wait(ctx)
	if err != nil || aws.ToString(reply.Body) != "welcome alice" {
		t.Fatalf("reply %v, %v", reply, err)
	}

	// After maxReceiveCount deliveries SQS moves the failed request to the
	// dead-letter queue; here the test moves it.
	if _, err := client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &dlq, MessageBody: failed.Body, MessageAttributes: failed.MessageAttributes}); err != nil {
		t.Fatal(err)
	}
	for _, m := range msgs {
		_, _ = client.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: &requests, ReceiptHandle: m.ReceiptHandle})
	}
	rd, err := newRedrive(client, dlq, requests, parking, 5)
	if err != nil {
		t.Fatal(err)
	}
	resp, err = rd.HandleSQSEvent(ctx, lambdatempq.Event(dlqARN, receive(dlq, 1)))
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("redrive: %v %v", resp, err)
	}
	back := receive(requests, 1)[0] // after its jittered delay, at most 2 s
	if got := aws.ToString(back.MessageAttributes[sqsapi.RedriveAttemptAttribute].StringValue); aws.ToString(back.Body) != "login" || got != "1" {
		t.Errorf("replayed %q with attempt %q, want login with 1", aws.ToString(back.Body), got)
	}
}

// startFauxqs starts the pinned fauxqs emulator (make emulator installs
// it) for the test and returns its URL; it skips the test when it is not
// installed, and fails it then under CI=true.
func startFauxqs(t *testing.T) string {
	dir := filepath.Join("..", "..", "integration", "emulator")
	node := filepath.Join(dir, "node_modules", ".bin", "node")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "fauxqs")); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("fauxqs not installed under CI: %v", err)
		}
		t.Skipf("fauxqs not installed (make emulator): %v", err)
	}
	cmd := exec.Command(node, "--no-warnings", "start.mjs")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PORT=0")
	stdin, err := cmd.StdinPipe() // the emulator exits when it closes
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stdin.Close(); _ = cmd.Wait() })
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if url, ok := strings.CutPrefix(sc.Text(), "READY "); ok {
				ready <- url
			}
		}
		close(ready)
	}()
	select {
	case url, ok := <-ready:
		if !ok {
			t.Fatal("fauxqs exited before it was ready")
		}
		return url
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("fauxqs not ready within 30s")
	}
	return ""
}
