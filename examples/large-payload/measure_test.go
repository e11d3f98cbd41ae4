package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/tempqueues/tempqueues/requester"
	"github.com/tempqueues/tempqueues/s3payload"
	"github.com/tempqueues/tempqueues/sqsclient"
	"github.com/tempqueues/tempqueues/sqshttp"
	"github.com/tempqueues/tempqueues/sqstest"
)

// BenchmarkSQSHTTP50MiB measures what decided how sqshttp carries a body
// too large for one message (docs/wire.md, "HTTP and gRPC over SQS"): a
// 50 MiB upload and a 50 MiB download streamed in parts (no store), and
// the same through S3 (sqshttp's PayloadStore), on sqstest and gofakes3
// in process, with no latency added: the time per exchange, the SQS
// requests billed (each started 64 KiB) and the S3 requests; for CSV
// text and for random bytes.
//
//	go test -run '^$' -bench SQSHTTP50MiB -benchtime 3x
func BenchmarkSQSHTTP50MiB(b *testing.B) {
	for _, kind := range []string{"csv", "binary"} {
		for _, via := range []string{"parts", "store"} {
			for _, dir := range []string{"upload", "download"} {
				b.Run(kind+"/"+via+"/"+dir, func(b *testing.B) { benchSQSHTTP(b, kind == "binary", via == "store", dir == "upload") })
			}
		}
	}
}

func benchSQSHTTP(b *testing.B, binary, viaStore, upload bool) {
	ctx := context.Background()
	srv := sqstest.NewServer()
	defer func() { _ = srv.Close(ctx) }()
	var s3Requests atomic.Int64
	fake := gofakes3.New(s3mem.New()).Server()
	s3srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s3Requests.Add(1)
		fake.ServeHTTP(w, r)
	}))
	defer s3srv.Close()
	s3c := newS3Client(s3srv.URL)
	if _, err := s3c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		b.Fatal(err)
	}
	store, err := s3payload.New(s3c, bucket)
	if err != nil {
		b.Fatal(err)
	}
	counter := new(sqsclient.CallCounter)
	client := srv.Client(sqs.WithAPIOptions(counter.Register))
	queue, err := createQueue(ctx, client, "measure")
	if err != nil {
		b.Fatal(err)
	}
	// CSV text, which parts carry as it is and gzip shrinks to a third;
	// or random bytes, which parts carry in base64.
	body := []byte(report(size))
	if binary {
		body = noise(size)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("PUT /", func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		fmt.Fprint(w, n)
	})
	mux.HandleFunc("GET /", func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write(body) })
	hopts, topts := func(*sqshttp.HandlerOptions) {}, func(*sqshttp.TransportOptions) {}
	if viaStore {
		hopts = func(o *sqshttp.HandlerOptions) { o.PayloadStore = store }
		topts = func(o *sqshttp.TransportOptions) { o.PayloadStore = store }
	}
	stop, err := serve(ctx, client, store, queue, sqshttp.Handler(mux, hopts))
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = stop() }()
	r, err := requester.New(client, func(o *requester.Options) { o.DisableSweeping = true })
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = r.Close(ctx) }()
	hc := &http.Client{Transport: sqshttp.NewTransport(r, queue, topts), Timeout: 2 * time.Minute}
	exchange := func() {
		var req *http.Request
		if upload {
			req, _ = http.NewRequest(http.MethodPut, "http://x/", bytes.NewReader(body))
		} else {
			req, _ = http.NewRequest(http.MethodGet, "http://x/", nil)
		}
		resp, err := hc.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		n, err := io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		if err != nil || !upload && n != size {
			b.Fatalf("%d bytes, %v", n, err)
		}
	}
	exchange() // the host queues, the session queue
	billed, calls, s3n := counter.Billed(), counter.Total(), s3Requests.Load()
	b.ResetTimer()
	for range b.N {
		exchange()
	}
	b.StopTimer()
	// Idle polls add a few calls over a run; they are part of the cost.
	n := float64(b.N)
	b.ReportMetric(float64(counter.Billed()-billed)/n, "billed/op")
	b.ReportMetric(float64(counter.Total()-calls)/n, "calls/op")
	b.ReportMetric(float64(s3Requests.Load()-s3n)/n, "s3/op")
}
