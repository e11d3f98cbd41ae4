package sqstestenv_test

import (
	"context"
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/internal/testkit/sqstestenv"
	"github.com/tempqueues/tempqueues/internal/wire"
)

func TestFauxqsRoundTripAndCounter(t *testing.T) {
	b := sqstestenv.Fauxqs(t)
	client, counter := b.Client(t)
	ctx := context.Background()
	name := sqstestenv.QueueName(t, "q")
	if !wire.ValidQueueName(name) {
		t.Fatalf("QueueName gave invalid name %q", name)
	}
	out, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = client.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: out.QueueUrl}) })
	if _, err := client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: out.QueueUrl, MessageBody: aws.String("hi")}); err != nil {
		t.Fatal(err)
	}
	if got := counter.Get("SendMessage"); got != 1 {
		t.Fatalf("SendMessage count = %d, want 1", got)
	}
	if got := counter.Total(); got != 2 {
		t.Fatalf("total = %d, want 2 (%v)", got, counter.Snapshot())
	}
	_, err = client.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(name + "-missing")})
	var qdne *types.QueueDoesNotExist
	if !errors.As(err, &qdne) {
		t.Fatalf("GetQueueUrl on a missing queue = %v, want *types.QueueDoesNotExist", err)
	}
}

func TestEachRunsOnEveryBackend(t *testing.T) {
	var names []string
	sqstestenv.Each(t, func(t *testing.T, b *sqstestenv.Backend) {
		names = append(names, b.Name)
		client, counter := b.Client(t)
		ctx := context.Background()
		out, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(sqstestenv.QueueName(t, "each"))})
		if err != nil {
			t.Fatal(err)
		}
		defer client.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: out.QueueUrl})
		if _, err := client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: out.QueueUrl, MessageBody: aws.String("hi")}); err != nil {
			t.Fatal(err)
		}
		if counter.Get("SendMessage") != 1 {
			t.Fatalf("counter %v", counter.Snapshot())
		}
		if (b.Name == "sqstest") != (b.Server != nil) {
			t.Fatalf("backend %s: Server set = %v", b.Name, b.Server != nil)
		}
		if b.Server != nil && b.Server.Calls()["SendMessage"] != 1 {
			t.Fatalf("server counts %v", b.Server.Calls())
		}
	})
	if sqstestenv.External(t) == nil && (len(names) == 0 || names[len(names)-1] != "sqstest") {
		t.Fatalf("backends run: %v, want sqstest last", names)
	}
}

func TestAllIncludesSQSTest(t *testing.T) {
	bs := sqstestenv.All(t)
	if sqstestenv.External(t) != nil {
		if len(bs) != 1 {
			t.Fatalf("external: %d backends", len(bs))
		}
		return
	}
	if last := bs[len(bs)-1]; last.Name != "sqstest" || last.Server == nil || last.Endpoint != last.Server.URL() {
		t.Fatalf("All = %+v", bs)
	}
}
