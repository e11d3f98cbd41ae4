package sqsgrpc_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/tempqueues/tempqueues/internal/testkit/leakcheck"
	"github.com/tempqueues/tempqueues/internal/testkit/sqstestenv"
	"github.com/tempqueues/tempqueues/internal/testkit/testbody"
	"github.com/tempqueues/tempqueues/requester"
	"github.com/tempqueues/tempqueues/responder"
	"github.com/tempqueues/tempqueues/sqsapi"
	"github.com/tempqueues/tempqueues/sqsgrpc"
)

// testService implements grpc.testing.TestService, the interop service
// that ships with grpc, for what the health service cannot show: binary
// payloads, metadata both ways, status details, sizes.
type testService struct {
	testpb.UnimplementedTestServiceServer
	step      chan struct{} // StreamingOutputCall waits on it after each message, when set
	deadlines chan time.Time
	release   chan struct{}
}

func (s *testService) UnaryCall(ctx context.Context, in *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	_ = grpc.SetHeader(ctx, metadata.Pairs("x-user", strings.Join(md.Get("x-user"), ",")))
	_ = grpc.SetTrailer(ctx, metadata.Pairs("x-sig-bin", strings.Join(md.Get("x-sig-bin"), ",")))
	if string(in.GetPayload().GetBody()) == "block" {
		d, _ := ctx.Deadline()
		s.deadlines <- d
		<-ctx.Done()
		<-s.release
		return nil, ctx.Err()
	}
	if string(in.GetPayload().GetBody()) == "deadline?" {
		d, ok := ctx.Deadline()
		return &testpb.SimpleResponse{Payload: &testpb.Payload{Body: []byte(fmt.Sprint(ok && time.Until(d) > 20*time.Second))}}, nil
	}
	if st := in.GetResponseStatus(); st != nil {
		sts, _ := status.New(codes.Code(st.Code), st.Message).WithDetails(&testpb.Payload{Body: []byte("detail\x00")})
		return nil, sts.Err()
	}
	body := in.GetPayload().GetBody()
	if in.ResponseSize > 0 {
		body = make([]byte, in.ResponseSize)
	}
	return &testpb.SimpleResponse{Payload: &testpb.Payload{Body: body}}, nil
}

func (s *testService) StreamingOutputCall(in *testpb.StreamingOutputCallRequest, stream grpc.ServerStreamingServer[testpb.StreamingOutputCallResponse]) error {
	if err := stream.SetHeader(metadata.Pairs("x-stream", "yes")); err != nil {
		return err
	}
	for _, p := range in.ResponseParameters {
		if err := stream.Send(&testpb.StreamingOutputCallResponse{Payload: &testpb.Payload{Body: bytes.Repeat([]byte{0xfe}, int(p.Size))}}); err != nil {
			return err
		}
		if s.step != nil {
			select {
			case <-s.step:
			case <-stream.Context().Done():
				return stream.Context().Err()
			}
		}
	}
	stream.SetTrailer(metadata.Pairs("x-count", "n"))
	if st := in.GetResponseStatus(); st != nil {
		return status.Error(codes.Code(st.Code), st.Message)
	}
	return nil
}

type env struct {
	cc     *sqsgrpc.ClientConn
	req    *requester.Requester
	queue  string
	health *health.Server
	svc    *testService
	log    *callLog
}

// callLog records interceptor calls.
type callLog struct {
	mu    sync.Mutex
	calls []string
}

func (l *callLog) add(s string) {
	l.mu.Lock()
	l.calls = append(l.calls, s)
	l.mu.Unlock()
}

func (l *callLog) get() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.calls...)
}

func newEnv(t *testing.T, b *sqstestenv.Backend) *env {
	t.Helper()
	e := &env{health: health.NewServer(), svc: &testService{deadlines: make(chan time.Time, 1), release: make(chan struct{})}, log: &callLog{}}
	srv := sqsgrpc.NewServer(func(o *sqsgrpc.ServerOptions) {
		o.UnaryInterceptors = []grpc.UnaryServerInterceptor{
			func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
				e.log.add("server unary " + info.FullMethod)
				return h(ctx, req)
			},
		}
		o.StreamInterceptors = []grpc.StreamServerInterceptor{
			func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
				e.log.add("server stream " + info.FullMethod)
				return h(srv, ss)
			},
		}
	})
	healthpb.RegisterHealthServer(srv, e.health)
	testpb.RegisterTestServiceServer(srv, e.svc)
	raw, queue, prefix := serve(t, b, srv)
	e.queue = queue
	// Runs after the requester's Close, before the responder's Shutdown.
	t.Cleanup(e.health.Shutdown) // ends Watch handlers' waits with a last update
	e.req = newRequester(t, raw, prefix)
	e.cc = sqsgrpc.NewClientConn(e.req, e.queue, func(o *sqsgrpc.ClientConnOptions) {
		o.UnaryInterceptors = []grpc.UnaryClientInterceptor{
			func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
				e.log.add("client unary " + method)
				return invoker(ctx, method, req, reply, cc, opts...)
			},
		}
		o.StreamInterceptors = []grpc.StreamClientInterceptor{
			func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
				e.log.add("client stream " + method)
				return streamer(ctx, desc, cc, method, opts...)
			},
		}
	})
	return e
}

// serve creates a request queue on b and serves srv from it with a
// responder until the test ends, then checks for leaks. It returns the
// client, the queue's URL and the host queue prefix the responder sends
// replies to (newRequester's).
func serve(t *testing.T, b *sqstestenv.Backend, srv *sqsgrpc.Server, optFns ...func(*responder.Options)) (raw *sqs.Client, queue, prefix string) {
	t.Helper()
	raw, _ = b.Client(t)
	ctx := context.Background()
	out, err := raw.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(sqstestenv.QueueName(t, "grpc"))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = raw.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: out.QueueUrl}) })
	name := sqstestenv.QueueName(t, "")
	prefix = "tq" + strings.ReplaceAll(name[len(name)-8:], "-", "") + "_"
	resp, err := responder.New(raw, append([]func(*responder.Options){func(o *responder.Options) {
		o.PollWaitTime = time.Second
		o.AllowReplyTo = []string{prefix}    // the requester's Prefix
		o.SessionQueuePrefix = prefix + "s_" // its sessions' host queue
	}}, optFns...)...)
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- resp.Serve(ctx, *out.QueueUrl, srv.Handler()) }()
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		_ = resp.Shutdown(sctx)
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
		leakcheck.Check(t)
	})
	return raw, *out.QueueUrl, prefix
}

// newRequester returns a requester whose host queues start with prefix,
// closed when the test ends.
func newRequester(t *testing.T, raw *sqs.Client, prefix string) *requester.Requester {
	t.Helper()
	r, err := requester.New(raw, func(o *requester.Options) {
		o.Prefix = prefix
		o.DisableSweeping = true
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close(context.Background()) })
	return r
}

func timeout(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func TestUnaryCarriesMessagesMetadataAndInterceptors(t *testing.T) {
	sqstestenv.Each(t, func(t *testing.T, b *sqstestenv.Backend) {
		e := newEnv(t, b)
		payload := make([]byte, 256)
		for i := range payload {
			payload[i] = byte(i)
		}
		ctx := metadata.AppendToOutgoingContext(timeout(t, 20*time.Second), "x-user", "alice", "x-sig-bin", "\x00\xff")
		var header, trailer metadata.MD
		resp, err := testpb.NewTestServiceClient(e.cc).UnaryCall(ctx, &testpb.SimpleRequest{Payload: &testpb.Payload{Body: payload}},
			grpc.Header(&header), grpc.Trailer(&trailer))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(resp.GetPayload().GetBody(), payload) {
			t.Fatalf("payload changed: % x", resp.GetPayload().GetBody()[:16])
		}
		if got := header.Get("x-user"); len(got) != 1 || got[0] != "alice" {
			t.Fatalf("header %v", header)
		}
		if got := trailer.Get("x-sig-bin"); len(got) != 1 || got[0] != "\x00\xff" {
			t.Fatalf("trailer %v", trailer)
		}
		const m = "/grpc.testing.TestService/UnaryCall"
		if got := strings.Join(e.log.get(), "; "); got != "client unary "+m+"; server unary "+m {
			t.Fatalf("interceptors: %s", got)
		}

		// A call without a deadline gets the ClientConn's default timeout,
		// and so does its handler.
		resp, err = testpb.NewTestServiceClient(e.cc).UnaryCall(context.Background(), &testpb.SimpleRequest{Payload: &testpb.Payload{Body: []byte("deadline?")}})
		if err != nil || string(resp.GetPayload().GetBody()) != "true" {
			t.Fatalf("handler deadline without the caller's: %v, %v", resp, err)
		}

		check, err := healthpb.NewHealthClient(e.cc).Check(timeout(t, 20*time.Second), &healthpb.HealthCheckRequest{})
		if err != nil || check.Status != healthpb.HealthCheckResponse_SERVING {
			t.Fatalf("health check: %v, %v", check, err)
		}
	})
}

func TestStatusesAndDetailsRoundTrip(t *testing.T) {
	sqstestenv.Each(t, func(t *testing.T, b *sqstestenv.Backend) {
		e := newEnv(t, b)
		var trailer metadata.MD
		_, err := testpb.NewTestServiceClient(e.cc).UnaryCall(timeout(t, 20*time.Second),
			&testpb.SimpleRequest{ResponseStatus: &testpb.EchoStatus{Code: int32(codes.FailedPrecondition), Message: "not yet: é"}}, grpc.Trailer(&trailer))
		st := status.Convert(err)
		if st.Code() != codes.FailedPrecondition || st.Message() != "not yet: é" || len(st.Details()) != 1 {
			t.Fatalf("status %v, details %v", st, st.Details())
		}
		if p, ok := st.Details()[0].(*testpb.Payload); !ok || string(p.Body) != "detail\x00" {
			t.Fatalf("detail %v", st.Details()[0])
		}
		if len(trailer.Get("x-sig-bin")) != 1 {
			t.Fatalf("trailer of a failed call: %v", trailer)
		}

		_, err = testpb.NewTestServiceClient(e.cc).UnimplementedCall(timeout(t, 20*time.Second), &testpb.Empty{})
		if status.Code(err) != codes.Unimplemented {
			t.Fatalf("unimplemented method: %v", err)
		}
		err = e.cc.Invoke(timeout(t, 20*time.Second), "/no.Such/Service", &testpb.Empty{}, &testpb.Empty{})
		if status.Code(err) != codes.Unimplemented {
			t.Fatalf("unknown service: %v", err)
		}
	})
}

// The handler sends a message and waits until the client has read it: the
// test passes only if messages arrive while the handler runs.
func TestServerStreamingArrivesAsSent(t *testing.T) {
	sqstestenv.Each(t, func(t *testing.T, b *sqstestenv.Backend) {
		e := newEnv(t, b)
		e.svc.step = make(chan struct{})
		var trailer metadata.MD
		stream, err := testpb.NewTestServiceClient(e.cc).StreamingOutputCall(timeout(t, 20*time.Second), &testpb.StreamingOutputCallRequest{
			ResponseParameters: []*testpb.ResponseParameters{{Size: 1}, {Size: 2}, {Size: 3}},
			ResponseStatus:     &testpb.EchoStatus{Code: int32(codes.Aborted), Message: "after three"},
		}, grpc.Trailer(&trailer))
		if err != nil {
			t.Fatal(err)
		}
		h, err := stream.Header()
		if err != nil || h.Get("x-stream")[0] != "yes" {
			t.Fatalf("header %v, %v", h, err)
		}
		for i := 1; i <= 3; i++ {
			m, err := stream.Recv()
			if err != nil || !bytes.Equal(m.GetPayload().GetBody(), bytes.Repeat([]byte{0xfe}, i)) {
				t.Fatalf("message %d: %v, %v", i, m, err)
			}
			e.svc.step <- struct{}{}
		}
		_, err = stream.Recv()
		if st := status.Convert(err); st.Code() != codes.Aborted || st.Message() != "after three" {
			t.Fatalf("end: %v", err)
		}
		if stream.Trailer().Get("x-count")[0] != "n" || trailer.Get("x-count")[0] != "n" {
			t.Fatalf("trailer %v / %v", stream.Trailer(), trailer)
		}
		const m = "/grpc.testing.TestService/StreamingOutputCall"
		if got := strings.Join(e.log.get(), "; "); got != "client stream "+m+"; server stream "+m {
			t.Fatalf("interceptors: %s", got)
		}
	})
}

// The health service's Watch, a generated server-streaming RPC, follows
// status changes until the caller's deadline.
func TestHealthWatchStreams(t *testing.T) {
	sqstestenv.Each(t, func(t *testing.T, b *sqstestenv.Backend) {
		e := newEnv(t, b)
		e.health.SetServingStatus("orders", healthpb.HealthCheckResponse_SERVING)
		w, err := healthpb.NewHealthClient(e.cc).Watch(timeout(t, 3*time.Second), &healthpb.HealthCheckRequest{Service: "orders"})
		if err != nil {
			t.Fatal(err)
		}
		m, err := w.Recv()
		if err != nil || m.Status != healthpb.HealthCheckResponse_SERVING {
			t.Fatalf("first: %v, %v", m, err)
		}
		e.health.SetServingStatus("orders", healthpb.HealthCheckResponse_NOT_SERVING)
		m, err = w.Recv()
		if err != nil || m.Status != healthpb.HealthCheckResponse_NOT_SERVING {
			t.Fatalf("second: %v, %v", m, err)
		}
		// Nothing more until the deadline, which ends both sides: the
		// caller's own timeout, or the handler's status when it ends
		// first (Watch answers Canceled then) and its reply comes in time.
		_, err = w.Recv()
		switch status.Code(err) {
		case codes.DeadlineExceeded:
			if !errors.Is(err, requester.ErrTimeout) {
				t.Fatalf("end: %v does not wrap requester.ErrTimeout", err)
			}
		case codes.Canceled:
		default:
			t.Fatalf("end: %v", err)
		}
	})
}

func TestDeadlinesPropagate(t *testing.T) {
	sqstestenv.Each(t, func(t *testing.T, b *sqstestenv.Backend) {
		e := newEnv(t, b)
		defer close(e.svc.release)
		deadline := time.Now().Add(2 * time.Second)
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		defer cancel()
		_, err := testpb.NewTestServiceClient(e.cc).UnaryCall(ctx, &testpb.SimpleRequest{Payload: &testpb.Payload{Body: []byte("block")}})
		if status.Code(err) != codes.DeadlineExceeded || !errors.Is(err, requester.ErrTimeout) {
			t.Fatalf("err = %v", err)
		}
		// The caller's, to the millisecond, less its reply's travel:
		// never later, so that the reply can arrive in time.
		if d, caller := <-e.svc.deadlines, deadline.Truncate(time.Millisecond); d.After(caller) || caller.Sub(d) > time.Second {
			t.Fatalf("handler deadline %v, want at most the caller's %v, by less than a second", d, caller)
		}
	})
}

func TestBadCallsFailBeforeAnyCall(t *testing.T) {
	sqstestenv.Each(t, func(t *testing.T, b *sqstestenv.Backend) {
		e := newEnv(t, b)
		calls := func() (n int64) {
			for _, c := range e.req.Stats().Calls {
				n += c
			}
			return n
		}
		before := calls()
		ctx := timeout(t, 20*time.Second)
		big := &testpb.SimpleRequest{Payload: &testpb.Payload{Body: make([]byte, sqsapi.MaxMessageSize)}}
		if _, err := testpb.NewTestServiceClient(e.cc).UnaryCall(ctx, big); status.Code(err) != codes.ResourceExhausted || !errors.Is(err, sqsapi.ErrInvalidInput) {
			t.Errorf("oversized request: %v", err)
		}
		for name, cc := range map[string]*sqsgrpc.ClientConn{"nil requester": sqsgrpc.NewClientConn(nil, e.queue), "empty queue": sqsgrpc.NewClientConn(e.req, "")} {
			if _, err := testpb.NewTestServiceClient(cc).EmptyCall(ctx, &testpb.Empty{}); status.Code(err) != codes.InvalidArgument || !errors.Is(err, sqsapi.ErrInvalidInput) {
				t.Errorf("%s: %v", name, err)
			}
		}
		if n := calls() - before; n != 0 {
			t.Fatalf("%d calls for bad calls", n)
		}

		// A client stream's message too large for SQS fails before its
		// send; the host polls for the stream meanwhile, so count sends.
		stream, err := testpb.NewTestServiceClient(e.cc).FullDuplexCall(ctx)
		if err != nil {
			t.Fatal(err)
		}
		sends := func() int64 { c := e.req.Stats().Calls; return c["SendMessage"] + c["SendMessageBatch"] }
		before = sends()
		err = stream.Send(&testpb.StreamingOutputCallRequest{Payload: &testpb.Payload{Body: make([]byte, sqsapi.MaxMessageSize)}})
		if status.Code(err) != codes.ResourceExhausted || !errors.Is(err, sqsapi.ErrInvalidInput) {
			t.Errorf("oversized stream message: %v", err)
		}
		if n := sends() - before; n != 0 {
			t.Errorf("%d sends for an oversized stream message", n)
		}
		if err := stream.CloseSend(); err != nil {
			t.Fatal(err)
		}
		// The test service has no FullDuplexCall: its status ends the call.
		if _, err := stream.Recv(); status.Code(err) != codes.Unimplemented {
			t.Errorf("the stream after CloseSend: %v, want codes.Unimplemented", err)
		}
	})
}

// TestRequestsFitCompressed: a request too large for one message goes
// when it fits compressed (requester.Options.CompressRequests): the size
// that counts is what is sent. One too large even compressed fails with
// codes.ResourceExhausted before any send.
func TestRequestsFitCompressed(t *testing.T) {
	srv := sqsgrpc.NewServer()
	testpb.RegisterTestServiceServer(srv, &testService{})
	raw, queue, prefix := serve(t, sqstestenv.SQSTest(t), srv)
	r, err := requester.New(raw, func(o *requester.Options) {
		o.Prefix = prefix
		o.DisableSweeping = true
		o.CompressRequests = true
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close(context.Background()) })
	client := testpb.NewTestServiceClient(sqsgrpc.NewClientConn(r, queue))
	ctx := timeout(t, 20*time.Second)
	big := bytes.Repeat([]byte("compressible "), 2<<20/13) // 2 MiB, 2.7 in base64
	out, err := client.UnaryCall(ctx, &testpb.SimpleRequest{Payload: &testpb.Payload{Body: big}, ResponseSize: 1})
	if err != nil || len(out.GetPayload().GetBody()) != 1 {
		t.Fatalf("a 2 MiB request that compresses: %v", err)
	}
	sends := func() int64 { c := r.Stats().Calls; return c["SendMessage"] + c["SendMessageBatch"] }
	before := sends()
	noise := []byte(testbody.Random(2<<20, 1))
	_, err = client.UnaryCall(ctx, &testpb.SimpleRequest{Payload: &testpb.Payload{Body: noise}, ResponseSize: 1})
	if status.Code(err) != codes.ResourceExhausted || !errors.Is(err, sqsapi.ErrInvalidInput) {
		t.Errorf("a 2 MiB request that does not compress enough: %v", err)
	}
	if n := sends() - before; n != 0 {
		t.Errorf("%d sends for a request too large", n)
	}
}

func TestTransportErrorsWrapTheLibrarysErrors(t *testing.T) {
	sqstestenv.Each(t, func(t *testing.T, b *sqstestenv.Backend) {
		e := newEnv(t, b)
		ctx := timeout(t, 20*time.Second)
		_, err := testpb.NewTestServiceClient(sqsgrpc.NewClientConn(e.req, e.queue+"-gone")).EmptyCall(ctx, &testpb.Empty{})
		if status.Code(err) != codes.Unavailable {
			t.Fatalf("unreachable queue: %v", err)
		}
		if err := e.req.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		_, err = testpb.NewTestServiceClient(e.cc).EmptyCall(ctx, &testpb.Empty{})
		if status.Code(err) != codes.Unavailable || !errors.Is(err, sqsapi.ErrClosed) {
			t.Fatalf("closed requester: %v", err)
		}
		w, err := healthpb.NewHealthClient(e.cc).Watch(ctx, &healthpb.HealthCheckRequest{})
		if err == nil {
			_, err = w.Recv()
		}
		if status.Code(err) != codes.Unavailable || !errors.Is(err, sqsapi.ErrClosed) {
			t.Fatalf("stream on a closed requester: %v", err)
		}
	})
}

// jsonCodec is a codec other than proto, registered under its name so
// that the server finds it.
type jsonCodec struct{}

func (jsonCodec) Marshal(v any) ([]byte, error) { return protojson.Marshal(v.(proto.Message)) }
func (jsonCodec) Unmarshal(data []byte, v any) error {
	if !json.Valid(data) {
		return errors.New("not JSON")
	}
	return protojson.Unmarshal(data, v.(proto.Message))
}
func (jsonCodec) Name() string { return "testjson" }

func init() { encoding.RegisterCodec(jsonCodec{}) }

func TestCallOptionsChooseTheCodec(t *testing.T) {
	sqstestenv.Each(t, func(t *testing.T, b *sqstestenv.Backend) {
		e := newEnv(t, b)
		for name, opt := range map[string]grpc.CallOption{
			"ForceCodec":         grpc.ForceCodec(jsonCodec{}),
			"CallContentSubtype": grpc.CallContentSubtype("testjson"),
		} {
			resp, err := testpb.NewTestServiceClient(e.cc).UnaryCall(timeout(t, 20*time.Second),
				&testpb.SimpleRequest{Payload: &testpb.Payload{Body: []byte("json")}}, opt)
			if err != nil || string(resp.GetPayload().GetBody()) != "json" {
				t.Errorf("%s: %v, %v", name, resp, err)
			}
		}
		_, err := testpb.NewTestServiceClient(e.cc).UnaryCall(timeout(t, 20*time.Second), &testpb.SimpleRequest{}, grpc.CallContentSubtype("nosuch"))
		if status.Code(err) != codes.Internal {
			t.Errorf("unknown codec: %v", err)
		}
	})
}
