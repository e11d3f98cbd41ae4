// Command large-payload sends bodies far over SQS's 1 MiB through S3,
// on an SQS server and an S3 server embedded in the process (sqstest
// and gofakes3), with no setup: a 50 MiB reply to
// SendMessageAndGetResponse, and a 50 MiB upload through sqshttp. The
// same s3payload store is set on the requester, the responder and the
// adapters' options (docs/s3.md); every object is deleted once read, so
// the bucket is empty at the end.
//
//	go run .            # 50 MiB each
//	go run . -mib 8     # another size, up to 64
package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/tempqueues/tempqueues/requester"
	"github.com/tempqueues/tempqueues/responder"
	"github.com/tempqueues/tempqueues/s3payload"
	"github.com/tempqueues/tempqueues/sqshttp"
	"github.com/tempqueues/tempqueues/sqstest"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, os.Args[1:], os.Stdout)
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "large-payload:", err)
		os.Exit(1)
	}
}

// bucket is the embedded S3 server's one bucket.
const bucket = "large-payloads"

func run(ctx context.Context, args []string, out io.Writer) (err error) {
	fs := flag.NewFlagSet("large-payload", flag.ContinueOnError)
	mib := fs.Int("mib", 50, "size of the reply and of the upload, in MiB (1 to 64)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *mib < 1 || *mib > 64 {
		return fmt.Errorf("-mib %d: from 1 to 64", *mib)
	}
	srv := sqstest.NewServer()
	defer func() { err = errors.Join(err, srv.Close(context.Background())) }()
	s3srv := httptest.NewServer(gofakes3.New(s3mem.New()).Server())
	defer s3srv.Close()
	s3c := newS3Client(s3srv.URL)
	if _, err := s3c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		return err
	}
	store, err := s3payload.New(s3c, bucket)
	if err != nil {
		return err
	}
	if err := demo(ctx, srv.Client(), store, *mib<<20, out); err != nil {
		return err
	}
	left, err := s3c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(bucket)})
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "objects left in the bucket: %d\n", len(left.Contents))
	return nil
}

// newS3Client returns an S3 client for a local S3 server (gofakes3, or
// fauxqs's S3): path-style, any credentials.
func newS3Client(endpoint string) *s3.Client {
	return s3.New(s3.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(endpoint),
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider("test", "test", ""),
	})
}

// demo serves two queues, one with a handler whose reply is size bytes,
// one with sqshttp, and calls each with a body of size bytes through
// store.
func demo(ctx context.Context, client *sqs.Client, store *s3payload.Store, size int, out io.Writer) (err error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	body := report(size)
	rpcQueue, err := createQueue(ctx, client, "large-payload-rpc")
	if err != nil {
		return err
	}
	httpQueue, err := createQueue(ctx, client, "large-payload-http")
	if err != nil {
		return err
	}

	// The services: a report too large for SQS, and an HTTP upload.
	stop, err := serve(ctx, client, store, rpcQueue, responder.HandlerFunc(func(context.Context, *responder.Request) (*responder.Reply, error) {
		return &responder.Reply{Body: body}, nil
	}))
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, stop()) }()
	mux := http.NewServeMux()
	mux.HandleFunc("PUT /upload", func(w http.ResponseWriter, r *http.Request) {
		h := sha256.New()
		n, err := io.Copy(h, r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		fmt.Fprintf(w, "%d %x", n, h.Sum(nil))
	})
	stopHTTP, err := serve(ctx, client, store, httpQueue, sqshttp.Handler(mux, func(o *sqshttp.HandlerOptions) { o.PayloadStore = store }))
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, stopHTTP()) }()

	// The caller.
	r, err := requester.New(client, func(o *requester.Options) { o.PayloadStore = store })
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, r.Close(context.Background())) }()
	reply, err := r.SendMessageAndGetResponse(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(rpcQueue), MessageBody: aws.String("the report, please")})
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "reply through S3: %d bytes, %s\n", len(aws.ToString(reply.Body)), intact(aws.ToString(reply.Body) == body))

	hc := &http.Client{Transport: sqshttp.NewTransport(r, httpQueue, func(o *sqshttp.TransportOptions) { o.PayloadStore = store })}
	upload := []byte(body)
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, "http://files/upload", bytes.NewReader(upload))
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	got, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close() // deletes the upload's object
	if err != nil {
		return err
	}
	sum := sha256.Sum256(upload)
	want := strconv.Itoa(len(upload)) + " " + hex.EncodeToString(sum[:])
	fmt.Fprintf(out, "upload through S3 (sqshttp): %d bytes, %s\n", len(upload), intact(string(got) == want))
	return nil
}

func intact(ok bool) string {
	if ok {
		return "intact"
	}
	return "DAMAGED"
}

func createQueue(ctx context.Context, client *sqs.Client, name string) (string, error) {
	q, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name)})
	if err != nil {
		return "", err
	}
	return aws.ToString(q.QueueUrl), nil
}

// serve answers queueURL with h on a responder of its own that puts
// large replies in store; stop shuts it down.
func serve(ctx context.Context, client *sqs.Client, store *s3payload.Store, queueURL string, h responder.Handler) (stop func() error, err error) {
	resp, err := responder.New(client, func(o *responder.Options) {
		o.PayloadStore = store
		o.PollWaitTime = time.Second
	})
	if err != nil {
		return nil, err
	}
	served := make(chan error, 1)
	go func() { served <- resp.Serve(ctx, queueURL, h) }()
	return func() error {
		sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		return errors.Join(resp.Shutdown(sctx), <-served)
	}, nil
}

// report returns size bytes of CSV text, the same for the same size: a
// body SQS takes as text, which gzip shrinks to about a third, still far
// over 1 MiB.
func report(size int) string {
	b := make([]byte, 0, size+64)
	x := uint64(0x9E3779B97F4A7C15)
	for row := int64(0); len(b) < size; row++ {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		b = strconv.AppendInt(b, row, 10)
		b = append(b, ',')
		b = strconv.AppendUint(b, x, 16)
		b = append(b, ',')
		b = strconv.AppendUint(b, x%1000, 10)
		b = append(b, '\n')
	}
	return string(b[:size])
}
