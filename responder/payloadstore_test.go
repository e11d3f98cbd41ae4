package responder

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/internal/testkit/memstore"
	"github.com/tempqueues/tempqueues/internal/testkit/sqstestenv"
	"github.com/tempqueues/tempqueues/sqsapi"
)

// javaPointer is a request as the Java extended client 2.x sends one for
// key in bucket: the pointer body and ExtendedPayloadSize, a Number.
func javaPointer(bucket, key string, size int) (string, map[string]types.MessageAttributeValue) {
	return fmt.Sprintf(`["software.amazon.payloadoffloading.PayloadS3Pointer",{"s3BucketName":%q,"s3Key":%q}]`, bucket, key),
		map[string]types.MessageAttributeValue{"ExtendedPayloadSize": {DataType: aws.String("Number"), StringValue: aws.String(fmt.Sprint(size))}}
}

// TestExtendedClientRequest: a request an extended client put in S3 is
// read through Options.PayloadStore; its object is deleted once the
// request is answered and deleted, not before.
func TestExtendedClientRequest(t *testing.T) {
	e := newEnv(t, sqstestenv.SQSTest(t))
	store := memstore.New("java-bucket")
	body := strings.Repeat("a large request ", 80_000)
	if _, err := store.Put(context.Background(), "0e7c9f4a-3b2d-4c1e-8f6a-5d4b3a2c1b0f", []byte(body)); err != nil {
		t.Fatal(err)
	}
	ptr, attrs := javaPointer("java-bucket", "0e7c9f4a-3b2d-4c1e-8f6a-5d4b3a2c1b0f", len(body))
	// Process: the caller deletes the request, so the object goes on its
	// return.
	r := newResponder(t, e.client, func(o *Options) { o.PayloadStore = store })
	var got string
	err := r.Process(context.Background(), "https://sqs.example/1/q", types.Message{
		MessageId: aws.String("m1"), ReceiptHandle: aws.String("h1"), Body: aws.String(ptr), MessageAttributes: attrs,
	}, HandlerFunc(func(_ context.Context, req *Request) (*Reply, error) {
		got = req.Body()
		if _, ok := req.Message.MessageAttributes["ExtendedPayloadSize"]; ok {
			t.Error("the handler sees ExtendedPayloadSize")
		}
		return nil, nil
	}))
	if err != nil || got != body {
		t.Fatalf("Process: %v; the handler got %d bytes, want %d", err, len(got), len(body))
	}
	waitFor(t, "the object deleted", func() bool { return len(store.Keys()) == 0 })

	// Serve: a request to a queue.
	q := e.queue("req", nil)
	_, _ = store.Put(context.Background(), "k2", []byte(body))
	ptr, attrs = javaPointer("java-bucket", "k2", len(body))
	if _, err := e.client.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: &q, MessageBody: &ptr, MessageAttributes: attrs}); err != nil {
		t.Fatal(err)
	}
	handled := make(chan string, 1)
	serve(t, newResponder(t, e.client, func(o *Options) { o.PayloadStore = store; o.PollWaitTime = time.Second }), q,
		HandlerFunc(func(_ context.Context, req *Request) (*Reply, error) {
			handled <- req.Body()
			return nil, nil
		}))
	select {
	case b := <-handled:
		if b != body {
			t.Fatalf("the handler got %d bytes, want %d", len(b), len(body))
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the request was not handled")
	}
	waitFor(t, "the object deleted", func() bool { return len(store.Keys()) == 0 })
	waitFor(t, "the request deleted", func() bool { v, f := e.depth(q); return v == "0" && f == "0" })
}

// TestMissingPayloadDeadLettered: a request whose object is gone, or
// that points to S3 with no store set, fails each time and its queue's
// redrive policy moves it to the dead-letter queue.
func TestMissingPayloadDeadLettered(t *testing.T) {
	for _, withStore := range []bool{true, false} {
		t.Run(fmt.Sprintf("store=%v", withStore), func(t *testing.T) {
			e := newEnv(t, sqstestenv.SQSTest(t))
			dlq := e.queue("dlq", nil)
			q := e.queue("req", map[string]string{
				"VisibilityTimeout": "1",
				"RedrivePolicy":     fmt.Sprintf(`{"deadLetterTargetArn":%q,"maxReceiveCount":"2"}`, e.queueARN(dlq)),
			})
			ptr, attrs := javaPointer("java-bucket", "gone", 300_000)
			attrs[sqsapi.RequestIDAttribute] = types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String("rid-gone")}
			if _, err := e.client.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: &q, MessageBody: &ptr, MessageAttributes: attrs}); err != nil {
				t.Fatal(err)
			}
			r := newResponder(t, e.client, func(o *Options) {
				if withStore {
					o.PayloadStore = memstore.New("java-bucket")
				}
				o.VisibilityTimeout = time.Second
				o.PollWaitTime = time.Second
				o.BackoffBase = -1 // at once
			})
			serve(t, r, q, HandlerFunc(func(context.Context, *Request) (*Reply, error) {
				t.Error("the handler ran for a request whose payload is missing")
				return nil, nil
			}))
			got := e.replies(dlq, 1, 15*time.Second)
			if len(got) != 1 || attr(got[0], sqsapi.RequestIDAttribute) != "rid-gone" {
				t.Fatalf("DLQ holds %v, want the request", got)
			}
		})
	}
}
