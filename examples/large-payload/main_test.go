package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	"google.golang.org/grpc"
	testpb "google.golang.org/grpc/interop/grpc_testing"

	"github.com/tempqueues/tempqueues/requester"
	"github.com/tempqueues/tempqueues/s3payload"
	"github.com/tempqueues/tempqueues/sqsclient"
	"github.com/tempqueues/tempqueues/sqsgrpc"
	"github.com/tempqueues/tempqueues/sqshttp"
	"github.com/tempqueues/tempqueues/sqstest"
)

// The program as `go run .` runs it: a 50 MiB reply and a 50 MiB upload
// through S3, and an empty bucket after.
func TestRun(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), nil, &out); err != nil {
		t.Fatal(err)
	}
	const want = `reply through S3: 52428800 bytes, intact
upload through S3 (sqshttp): 52428800 bytes, intact
objects left in the bucket: 0
`
	if out.String() != want {
		t.Fatalf("output:\n%s\nwant:\n%s", out.String(), want)
	}
}

// size is the one size the tests send: the 50 MiB of issue 34's target.
const size = 50 << 20

// servers are the SQS and S3 servers a test runs on.
type servers struct {
	sqs *sqs.Client
	s3  *s3.Client
}

// A 50 MiB sqshttp upload echoed back as a 50 MiB download, and a 50 MiB
// gRPC message as a unary request and its response and on a stream both
// ways, arrive byte-exact through S3, on sqstest with gofakes3 and on
// fauxqs (SQS and S3 on one port); nothing is left in the bucket.
func TestFiftyMiBThroughS3(t *testing.T) {
	t.Run("sqstest+gofakes3", func(t *testing.T) {
		srv := sqstest.NewServer()
		t.Cleanup(func() { _ = srv.Close(context.Background()) })
		s3srv := httptest.NewServer(gofakes3.New(s3mem.New()).Server())
		t.Cleanup(s3srv.Close)
		testFiftyMiB(t, servers{sqs: srv.Client(), s3: newS3Client(s3srv.URL)})
	})
	t.Run("fauxqs", func(t *testing.T) {
		endpoint := startFauxqs(t)
		client := sqs.New(sqs.Options{
			Region: "us-east-1", BaseEndpoint: aws.String(endpoint),
			Credentials: credentials.NewStaticCredentialsProvider("test", "test", ""),
		}, sqsclient.BufferRequestBodies)
		testFiftyMiB(t, servers{sqs: client, s3: newS3Client(endpoint)})
	})
}

func testFiftyMiB(t *testing.T, s servers) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	name := strings.ToLower(strings.NewReplacer("/", "-", "+", "-").Replace(t.Name()))
	if _, err := s.s3.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(name)}); err != nil {
		t.Fatal(err)
	}
	store, err := s3payload.New(s.s3, name)
	if err != nil {
		t.Fatal(err)
	}
	body := noise(size) // random: neither gzip nor anything else shrinks it
	httpQueue, err := createQueue(ctx, s.sqs, name+"-http")
	if err != nil {
		t.Fatal(err)
	}
	grpcQueue, err := createQueue(ctx, s.sqs, name+"-grpc")
	if err != nil {
		t.Fatal(err)
	}
	echo := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.Copy(w, r.Body) })
	stopHTTP, err := serve(ctx, s.sqs, store, httpQueue, sqshttp.Handler(echo, func(o *sqshttp.HandlerOptions) { o.PayloadStore = store }))
	if err != nil {
		t.Fatal(err)
	}
	// grpc takes messages of 4 MiB by default, and so does sqsgrpc: both
	// sides raise it, as with grpc (grpc.MaxRecvMsgSize on a
	// *grpc.Server).
	grpcSrv := sqsgrpc.NewServer(func(o *sqsgrpc.ServerOptions) {
		o.PayloadStore = store
		o.MaxRecvMsgSize = 64 << 20
	})
	testpb.RegisterTestServiceServer(grpcSrv, echoService{})
	stopGRPC, err := serve(ctx, s.sqs, store, grpcQueue, grpcSrv.Handler())
	if err != nil {
		t.Fatal(err)
	}
	r, err := requester.New(s.sqs, func(o *requester.Options) { o.DisableSweeping = true })
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		err := errors.Join(r.Close(context.Background()), stopHTTP(), stopGRPC())
		if err != nil {
			t.Error(err)
		}
		left, err := s.s3.ListObjectsV2(context.Background(), &s3.ListObjectsV2Input{Bucket: aws.String(name)})
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range left.Contents {
			t.Errorf("left in the bucket: %s", aws.ToString(o.Key))
		}
	}()

	t.Run("sqshttp", func(t *testing.T) {
		hc := &http.Client{Transport: sqshttp.NewTransport(r, httpQueue, func(o *sqshttp.TransportOptions) { o.PayloadStore = store })}
		req, _ := http.NewRequestWithContext(ctx, http.MethodPut, "http://files/echo", bytes.NewReader(body))
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if err != nil || !bytes.Equal(got, body) {
			t.Fatalf("download: %d bytes, %v; want the %d uploaded", len(got), err, len(body))
		}
	})
	t.Run("sqsgrpc", func(t *testing.T) {
		// The client's side of the 4 MiB default, raised as with grpc.
		client := testpb.NewTestServiceClient(sqsgrpc.NewClientConn(r, grpcQueue, func(o *sqsgrpc.ClientConnOptions) {
			o.PayloadStore = store
			o.CallOptions = []grpc.CallOption{grpc.MaxCallRecvMsgSize(64 << 20)}
		}))
		out, err := client.UnaryCall(ctx, &testpb.SimpleRequest{Payload: &testpb.Payload{Body: body}})
		if err != nil || !bytes.Equal(out.GetPayload().GetBody(), body) {
			t.Fatalf("unary: %d bytes back, %v; want the %d sent", len(out.GetPayload().GetBody()), err, len(body))
		}
		stream, err := client.FullDuplexCall(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := stream.Send(&testpb.StreamingOutputCallRequest{Payload: &testpb.Payload{Body: body}}); err != nil {
			t.Fatal(err)
		}
		if err := stream.CloseSend(); err != nil {
			t.Fatal(err)
		}
		got, err := stream.Recv()
		if err != nil || !bytes.Equal(got.GetPayload().GetBody(), body) {
			t.Fatalf("stream: %d bytes back, %v; want the %d sent", len(got.GetPayload().GetBody()), err, len(body))
		}
		if _, err := stream.Recv(); !errors.Is(err, io.EOF) {
			t.Fatalf("the stream's end: %v", err)
		}
	})
}

// echoService echoes a unary call's payload, and each message of a
// full-duplex stream.
type echoService struct {
	testpb.UnimplementedTestServiceServer
}

func (echoService) UnaryCall(_ context.Context, in *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
	return &testpb.SimpleResponse{Payload: in.GetPayload()}, nil
}

func (echoService) FullDuplexCall(stream grpc.BidiStreamingServer[testpb.StreamingOutputCallRequest, testpb.StreamingOutputCallResponse]) error {
	for {
		in, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := stream.Send(&testpb.StreamingOutputCallResponse{Payload: in.GetPayload()}); err != nil {
			return err
		}
	}
}

// startFauxqs starts the pinned fauxqs emulator (make emulator installs
// it), which serves SQS and S3 on one port, for the test and returns its
// URL; it skips the test when fauxqs is not installed, and fails it then
// under CI=true.
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

// noise returns n random bytes, the same each time, 8 at a time: a loop
// per byte takes seconds under the race detector.
func noise(n int) []byte {
	b := make([]byte, n+8)
	rng := rand.New(rand.NewPCG(34, 50))
	for i := 0; i < n; i += 8 {
		binary.LittleEndian.PutUint64(b[i:], rng.Uint64())
	}
	return b[:n]
}
