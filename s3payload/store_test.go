package s3payload_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/tempqueues/tempqueues/internal/testkit/sqstestenv"
	"github.com/tempqueues/tempqueues/internal/testkit/testtime"
	"github.com/tempqueues/tempqueues/requester"
	"github.com/tempqueues/tempqueues/responder"
	"github.com/tempqueues/tempqueues/s3payload"
	"github.com/tempqueues/tempqueues/sqsapi"
)

// s3Client returns an S3 client for a local endpoint, path-style, with
// dummy credentials.
func s3Client(endpoint string) *s3.Client {
	return s3.New(s3.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(endpoint),
		UsePathStyle: true,
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: "test", SecretAccessKey: "test"}, nil
		}),
		RetryMaxAttempts: 1,
	})
}

// fakeS3 starts gofakes3, an S3 server in process, and returns its URL.
func fakeS3(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(gofakes3.New(s3mem.New()).Server())
	t.Cleanup(srv.Close)
	return srv.URL
}

// s3For returns an S3 client beside backend b: fauxqs's own S3 on its
// newRequester returns a requester with store as its PayloadStore, host
// queues of the test's own prefix and no sweeps, closed when the test ends.
func newRequester(t *testing.T, sqsClient *sqs.Client, store *s3payload.Store) *requester.Requester {
	t.Helper()
	r, err := requester.New(sqsClient, func(o *requester.Options) {
		o.PayloadStore = store
		o.Prefix = "tq" + sqstestenv.QueueName(t, "h")[:8]
		o.DisableSweeping = true
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close(context.Background()) })
	return r
}

// port, or gofakes3 beside sqstest; and a new bucket on it.
func s3For(t *testing.T, b *sqstestenv.Backend) (*s3.Client, string) {
	t.Helper()
	endpoint := b.Endpoint
	if b.Name != "fauxqs" {
		endpoint = fakeS3(t)
	}
	client := s3Client(endpoint)
	bucket := strings.ToLower(strings.ReplaceAll(sqstestenv.QueueName(t, "tq"), "_", "-"))
	bucket = bucket[max(0, len(bucket)-63):]
	bucket = strings.Trim(bucket, "-.")
	if _, err := client.CreateBucket(context.Background(), &s3.CreateBucketInput{Bucket: &bucket}); err != nil {
		t.Fatalf("CreateBucket %s: %v", bucket, err)
	}
	return client, bucket
}

// objects lists the bucket's keys.
func objects(t *testing.T, client *s3.Client, bucket string) []string {
	t.Helper()
	out, err := client.ListObjectsV2(context.Background(), &s3.ListObjectsV2Input{Bucket: &bucket})
	if err != nil {
		t.Fatalf("ListObjectsV2: %v", err)
	}
	var keys []string
	for _, o := range out.Contents {
		keys = append(keys, aws.ToString(o.Key))
	}
	return keys
}

// waitNoObjects fails unless the bucket is empty within a few seconds: a
// request's object goes once the request is deleted, asynchronously.
func waitNoObjects(t *testing.T, client *s3.Client, bucket string) {
	t.Helper()
	var keys []string
	if !testtime.Until(15*time.Second, func() bool { keys = objects(t, client, bucket); return len(keys) == 0 }) {
		t.Errorf("objects left in s3://%s: %v", bucket, keys)
	}
}

// body returns n bytes of text that gzip barely shrinks (base64 of
// pseudo-random bytes), so that it cannot fit in a message compressed.
func body(n int, seed uint64) string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	b := make([]byte, n)
	x := seed*0x9E3779B97F4A7C15 + 1
	for i := range b {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		b[i] = alphabet[x&63]
	}
	return string(b)
}

// TestLargeBodiesThroughS3: a 10 MiB request and a 50 MiB reply through
// SendMessageAndGetResponse arrive byte-exact with the store on S3; the
// bucket is empty once the call is done.
func TestLargeBodiesThroughS3(t *testing.T) {
	sqstestenv.Each(t, func(t *testing.T, b *sqstestenv.Backend) {
		sqsClient, _ := b.Client(t)
		s3c, bucket := s3For(t, b)
		store, err := s3payload.New(s3c, bucket)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		qout, err := sqsClient.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(sqstestenv.QueueName(t, "req"))})
		if err != nil {
			t.Fatal(err)
		}
		queue := aws.ToString(qout.QueueUrl)
		t.Cleanup(func() { _, _ = sqsClient.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: &queue}) })

		request, reply := body(10<<20, 1), body(50<<20, 2)
		resp, err := responder.New(sqsClient, func(o *responder.Options) {
			o.PayloadStore = store
			o.PollWaitTime = time.Second
			o.AllowReplyTo = []string{"tq"}
		})
		if err != nil {
			t.Fatal(err)
		}
		served := make(chan error, 1)
		go func() {
			served <- resp.Serve(context.Background(), queue, responder.HandlerFunc(func(_ context.Context, req *responder.Request) (*responder.Reply, error) {
				if req.Body() != request {
					return nil, fmt.Errorf("request of %d bytes, want %d", len(req.Body()), len(request))
				}
				return &responder.Reply{Body: reply}, nil
			}))
		}()
		defer func() {
			sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer scancel()
			_ = resp.Shutdown(sctx)
			if err := <-served; err != nil {
				t.Errorf("Serve: %v", err)
			}
		}()
		r := newRequester(t, sqsClient, store)

		start := time.Now()
		m, err := r.SendMessageAndGetResponse(ctx, &sqs.SendMessageInput{QueueUrl: &queue, MessageBody: &request})
		if err != nil {
			t.Fatal(err)
		}
		if got := aws.ToString(m.Body); got != reply {
			t.Fatalf("reply of %d bytes, not the %d sent", len(got), len(reply))
		}
		t.Logf("%s: 10 MiB request, 50 MiB reply in %v", b.Name, time.Since(start).Round(time.Millisecond))
		waitNoObjects(t, s3c, bucket)
	})
}

// TestExtendedClientFixtures: a request written as the Java 2.x and the
// Python extended clients write one (the object in S3 under a key of
// theirs, the pointer body, ExtendedPayloadSize a Number) is read by a
// responder, and its object deleted after.
func TestExtendedClientFixtures(t *testing.T) {
	b := sqstestenv.SQSTest(t)
	sqsClient, _ := b.Client(t)
	s3c, bucket := s3For(t, b)
	store, err := s3payload.New(s3c, "other-bucket")
	if err != nil {
		t.Fatal(err)
	}
	resp, err := responder.New(sqsClient, func(o *responder.Options) { o.PayloadStore = store })
	if err != nil {
		t.Fatal(err)
	}
	payload := body(300<<10, 3)
	for i, format := range []string{
		`["software.amazon.payloadoffloading.PayloadS3Pointer",{"s3BucketName":"%s","s3Key":"%s"}]`,     // Java 2.x (Jackson)
		`["software.amazon.payloadoffloading.PayloadS3Pointer", {"s3BucketName": "%s", "s3Key": "%s"}]`, // Python (json.dumps)
	} {
		key := fmt.Sprintf("4f1c2b3a-5d6e-4f70-8192-a3b4c5d6e7f%d", i)
		if _, err := s3c.PutObject(context.Background(), &s3.PutObjectInput{Bucket: &bucket, Key: &key, Body: strings.NewReader(payload)}); err != nil {
			t.Fatal(err)
		}
		m := types.Message{
			MessageId: aws.String(fmt.Sprint("m", i)), ReceiptHandle: aws.String("h"),
			Body: aws.String(fmt.Sprintf(format, bucket, key)),
			MessageAttributes: map[string]types.MessageAttributeValue{
				"ExtendedPayloadSize": {DataType: aws.String("Number"), StringValue: aws.String(fmt.Sprint(len(payload)))},
			},
		}
		var got string
		err := resp.Process(context.Background(), "https://sqs.example/1/q", m, responder.HandlerFunc(func(_ context.Context, req *responder.Request) (*responder.Reply, error) {
			got = req.Body()
			return nil, nil
		}))
		if err != nil || got != payload {
			t.Fatalf("fixture %d: %v; the handler got %d bytes, want %d", i, err, len(got), len(payload))
		}
	}
	waitNoObjects(t, s3c, bucket)
}

// TestStoreErrors: a bad bucket name or nil client fails New; a store
// that cannot be reached fails with an error naming the bucket; a
// missing object is ErrPayloadNotFound; a delete of one is no error.
func TestStoreErrors(t *testing.T) {
	if _, err := s3payload.New(nil, "bucket"); !errors.Is(err, sqsapi.ErrInvalidInput) {
		t.Errorf("nil client: %v", err)
	}
	for _, name := range []string{"", "ab", "Upper", "-lead", "trail.", strings.Repeat("a", 64), "under_score"} {
		if _, err := s3payload.New(s3Client("http://127.0.0.1:1"), name); !errors.Is(err, sqsapi.ErrInvalidInput) {
			t.Errorf("bucket %q: %v", name, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	// A port nobody listens on.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + l.Addr().String()
	_ = l.Close()
	down, _ := s3payload.New(s3Client(closed), "tq-unreachable")
	if _, err := down.Put(ctx, "k", []byte("x")); err == nil || !strings.Contains(err.Error(), "tq-unreachable") {
		t.Errorf("Put to a store out of reach: %v, want an error naming the bucket", err)
	}
	if _, err := down.Get(ctx, "tq-unreachable", "k"); err == nil || errors.Is(err, sqsapi.ErrPayloadNotFound) || !strings.Contains(err.Error(), "tq-unreachable") {
		t.Errorf("Get from a store out of reach: %v", err)
	}

	s3c, bucket := s3For(t, sqstestenv.SQSTest(t))
	store, _ := s3payload.New(s3c, bucket)
	if _, err := store.Get(ctx, bucket, "missing"); !errors.Is(err, sqsapi.ErrPayloadNotFound) {
		t.Errorf("Get of a missing object: %v", err)
	}
	if err := store.Delete(ctx, bucket, "missing"); err != nil {
		t.Errorf("Delete of a missing object: %v", err)
	}
	got, err := store.Put(ctx, "tempqueues/0/k", []byte("hello"))
	if err != nil || got != bucket {
		t.Fatalf("Put: %q, %v", got, err)
	}
	if b, err := store.Get(ctx, bucket, "tempqueues/0/k"); err != nil || string(b) != "hello" {
		t.Errorf("Get: %q, %v", b, err)
	}
	if err := store.Delete(ctx, bucket, "tempqueues/0/k"); err != nil {
		t.Error(err)
	}
	if keys := objects(t, s3c, bucket); len(keys) != 0 {
		t.Errorf("left: %v", keys)
	}
}
