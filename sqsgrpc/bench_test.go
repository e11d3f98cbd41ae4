package sqsgrpc_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	testpb "google.golang.org/grpc/interop/grpc_testing"

	"github.com/tempqueues/tempqueues/internal/callcount"
	"github.com/tempqueues/tempqueues/internal/testkit/rpcbench"
	"github.com/tempqueues/tempqueues/internal/testkit/sqstestenv"
	"github.com/tempqueues/tempqueues/requester"
	"github.com/tempqueues/tempqueues/responder"
	"github.com/tempqueues/tempqueues/sqsgrpc"
	"github.com/tempqueues/tempqueues/sqstest"
)

// BenchmarkOverhead measures what the adapter adds to a plain
// SendMessageAndGetResponse round trip: a small echo at 1, 8 and 64
// concurrent callers, directly and as a unary gRPC call (UnaryCall of the
// interop TestService). It reports the process's CPU time per RPC (client,
// responder and the in-process sqstest server together) and API calls per
// RPC.
func BenchmarkOverhead(b *testing.B) {
	be := sqstestenv.SQSTest(b)
	for _, callers := range []int{1, 8, 64} {
		for _, mode := range []string{"direct", "sqsgrpc"} {
			b.Run(mode+"/callers="+strconv.Itoa(callers), func(b *testing.B) { benchOverhead(b, be, mode, callers) })
		}
	}
}

func benchOverhead(b *testing.B, be *sqstestenv.Backend, mode string, callers int) {
	client, counter := be.Client(b)
	ctx := context.Background()
	q, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(sqstestenv.QueueName(b, "bench"))})
	if err != nil {
		b.Fatal(err)
	}
	defer client.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: q.QueueUrl})
	resp, err := responder.New(client, func(o *responder.Options) { o.MaxConcurrency = 64; o.PollWaitTime = time.Second })
	if err != nil {
		b.Fatal(err)
	}
	var h responder.Handler = responder.HandlerFunc(func(_ context.Context, req *responder.Request) (*responder.Reply, error) {
		return &responder.Reply{Body: req.Body()}, nil
	})
	if mode != "direct" {
		srv := sqsgrpc.NewServer()
		testpb.RegisterTestServiceServer(srv, echoService{})
		h = srv.Handler()
	}
	serveCtx, stop := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- resp.Serve(serveCtx, *q.QueueUrl, h) }()
	defer func() { stop(); <-served }()
	r, err := requester.New(client, func(o *requester.Options) { o.DisableSweeping = true })
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close(ctx)
	tc := testpb.NewTestServiceClient(sqsgrpc.NewClientConn(r, *q.QueueUrl))
	call := func() error {
		cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		if mode == "direct" {
			_, err := r.SendMessageAndGetResponse(cctx, &sqs.SendMessageInput{QueueUrl: q.QueueUrl, MessageBody: aws.String("ping")})
			return err
		}
		_, err := tc.UnaryCall(cctx, &testpb.SimpleRequest{Payload: &testpb.Payload{Body: []byte("ping")}})
		return err
	}
	rpcbench.Run(b, callers, counter, call)
}

// echoService answers UnaryCall with the request's payload, and does
// nothing else.
type echoService struct {
	testpb.UnimplementedTestServiceServer
}

func (echoService) UnaryCall(_ context.Context, in *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
	return &testpb.SimpleResponse{Payload: in.Payload}, nil
}

// bidiLen is the number of messages a benchmarked stream carries each
// way, as in the requester's BenchmarkSession.
const bidiLen = 100

// BenchmarkBidi measures a bidirectional RPC (FullDuplexCall of the
// interop TestService, against an echo) at 1, 8 and 64 concurrent streams,
// over three transports: sqsgrpc on the in-process sqstest server
// (sqsgrpc), the same with 10 ms added to every SQS call as the
// requester's benchmarks add it (sqsgrpc-10ms), and, for scale, grpc-go
// over loopback TCP (grpc-tcp). It measures what the requester's
// BenchmarkSession measures, the same way, in the same two modes:
//
// stream: each stream sends 100 messages while it reads the 100 echoes,
// then CloseSend; one op is one stream. It reports messages per second
// each way, the p50 and p99 one-way latency up (from the client's Send to
// the handler's Recv) and down (from the handler's Send to the client's
// Recv), which include waiting for flow control; the process's CPU time
// per message (client, server and, over SQS, the sqstest server); and
// over SQS the API calls per message (both sides, both ways: 200 messages
// per stream; the session's opening, credit, end marks, the status and
// empty receives included).
//
// pingpong: on streams opened beforehand (each by a first exchange), the
// clients send one message and wait for its echo; one op is one round
// trip. It reports the p50 and p99 of the round trips, then, in the same
// run, makes as many unary calls (UnaryCall, same server, as many
// goroutines as streams) and reports their p50 and p99, the ratio of the
// two p50s, and the API calls and CPU time of each (the streams' opening
// and closing not counted; ns/op covers both phases). The log has the
// calls by operation and the p50 of each one-way leg.
//
// b.N must reach the number of streams for them all to run at once: a
// -benchtime of a few seconds does. The whole set takes two to three
// minutes; -bench 'BenchmarkBidi/^sqsgrpc-10ms$' runs one transport:
//
//	cd sqsgrpc && go test -run '^$' -bench BenchmarkBidi -benchtime 3s
func BenchmarkBidi(b *testing.B) {
	transports := []struct {
		name    string
		latency time.Duration // added to every SQS call
		tcp     bool          // grpc-go over loopback TCP instead of SQS
	}{
		{name: "sqsgrpc"},
		{name: "sqsgrpc-10ms", latency: 10 * time.Millisecond},
		{name: "grpc-tcp", tcp: true},
	}
	for _, tr := range transports {
		var be *sqstestenv.Backend
		if !tr.tcp {
			be = sqstestenv.SQSTest(b)
			if tr.latency > 0 {
				// The server waits before handling each call: about what
				// a call to SQS takes from its region.
				be.Server.InjectFault(sqstest.Latency("", tr.latency, 0))
			}
		}
		for _, mode := range []string{"stream", "pingpong"} {
			for _, streams := range []int{1, 8, 64} {
				b.Run(fmt.Sprintf("%s/%s/streams=%d", tr.name, mode, streams), func(b *testing.B) {
					bb := &bidiBench{streams: streams}
					if tr.tcp {
						bb.serveTCP(b)
					} else {
						bb.serveSQS(b, be)
					}
					if mode == "stream" {
						bb.stream(b)
					} else {
						bb.pingPong(b)
					}
				})
			}
		}
	}
}

// bidiBench is one run of BenchmarkBidi.
type bidiBench struct {
	tc      testpb.TestServiceClient
	counter *callcount.Counter // the SQS client's, both sides; nil over TCP
	streams int
	svc     stampEcho
}

// serveSQS serves the echo through sqsgrpc on a new queue of be until the
// benchmark ends, with a handler for each of the 64 streams, and points
// bb.tc at it from a requester on the same SQS client, whose counter then
// counts the calls of both sides.
func (bb *bidiBench) serveSQS(b *testing.B, be *sqstestenv.Backend) {
	ctx := context.Background()
	client, counter := be.Client(b)
	bb.counter = counter
	q, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(sqstestenv.QueueName(b, "bidi"))})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _, _ = client.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: q.QueueUrl}) })
	resp, err := responder.New(client, func(o *responder.Options) { o.MaxConcurrency = 64; o.PollWaitTime = time.Second })
	if err != nil {
		b.Fatal(err)
	}
	srv := sqsgrpc.NewServer()
	testpb.RegisterTestServiceServer(srv, &bb.svc)
	served := make(chan error, 1)
	go func() { served <- resp.Serve(ctx, *q.QueueUrl, srv.Handler()) }()
	r, err := requester.New(client, func(o *requester.Options) { o.DisableSweeping = true })
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		_ = resp.Shutdown(sctx)
		<-served
		_ = r.Close(sctx)
	})
	bb.tc = testpb.NewTestServiceClient(sqsgrpc.NewClientConn(r, *q.QueueUrl))
}

// serveTCP serves the echo with grpc-go on loopback TCP until the
// benchmark ends, and points bb.tc at it.
func (bb *bidiBench) serveTCP(b *testing.B) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	gs := grpc.NewServer()
	testpb.RegisterTestServiceServer(gs, &bb.svc)
	go func() { _ = gs.Serve(lis) }() // returns when stopped
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = conn.Close()
		gs.Stop()
	})
	bb.tc = testpb.NewTestServiceClient(conn)
}

// stampEcho answers each message of FullDuplexCall, and UnaryCall, with a
// message stamped with the time, and measures how long the client's
// messages took to reach it.
type stampEcho struct {
	testpb.UnimplementedTestServiceServer
	// up has the latency of each streamed message, from the client's Send
	// to Recv; request that of each unary request, from the client's call
	// to the handler.
	up, request rpcbench.Latencies
}

func (e *stampEcho) FullDuplexCall(stream testpb.TestService_FullDuplexCallServer) error {
	for {
		in, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		e.up.Add(rpcbench.SinceStamp(string(in.GetPayload().GetBody())))
		if err := stream.Send(&testpb.StreamingOutputCallResponse{Payload: stampPayload()}); err != nil {
			return err
		}
	}
}

func (e *stampEcho) UnaryCall(_ context.Context, in *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
	e.request.Add(rpcbench.SinceStamp(string(in.GetPayload().GetBody())))
	return &testpb.SimpleResponse{Payload: stampPayload()}, nil
}

func stampPayload() *testpb.Payload { return &testpb.Payload{Body: []byte(rpcbench.Stamp())} }

// streamOnce runs one stream of the stream mode, adding the latency of
// each echo to down.
func (bb *bidiBench) streamOnce(ctx context.Context, down *rpcbench.Latencies) error {
	// Ending the context ends the stream when it fails half way.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	st, err := bb.tc.FullDuplexCall(ctx)
	if err != nil {
		return err
	}
	sent := make(chan error, 1)
	go func() {
		for range bidiLen {
			if err := st.Send(&testpb.StreamingOutputCallRequest{Payload: stampPayload()}); err != nil {
				sent <- fmt.Errorf("send: %w", err)
				return
			}
		}
		sent <- st.CloseSend()
	}()
	got := make([]time.Duration, 0, bidiLen)
	for len(got) < bidiLen {
		m, err := st.Recv()
		if err != nil {
			return fmt.Errorf("after %d echoes: %w", len(got), err)
		}
		got = append(got, rpcbench.SinceStamp(string(m.GetPayload().GetBody())))
	}
	if err := <-sent; err != nil {
		return err
	}
	down.Add(got...)
	if _, err := st.Recv(); !errors.Is(err, io.EOF) {
		return fmt.Errorf("after the echoes: %v, want io.EOF", err)
	}
	return nil
}

func (bb *bidiBench) stream(b *testing.B) {
	var down rpcbench.Latencies
	if err := bb.streamOnce(context.Background(), &down); err != nil { // warm up: connections, host queues, pollers
		b.Fatal(err)
	}
	down.Reset()
	bb.svc.up.Reset()
	bb.resetCalls()
	b.ResetTimer()
	cpu0 := rpcbench.ProcessCPU()
	rpcbench.RunOps(b, bb.streams, func(ctx context.Context, _ int) error { return bb.streamOnce(ctx, &down) })
	b.StopTimer()
	msgs := float64(2 * b.N * bidiLen)
	rpcbench.ReportTwoWay(b, cpu0, msgs)
	if bb.counter != nil {
		b.Logf("N=%d: calls per msg: %s", b.N, rpcbench.ReportCalls(b, bb.counter.Snapshot(), msgs, "msg"))
	}
	bb.svc.up.Report(b, "up")
	down.Report(b, "down")
}

// exchange sends one message on st and waits for its echo, adding the
// echo's latency to down, when not nil.
func exchange(st testpb.TestService_FullDuplexCallClient, down *rpcbench.Latencies) error {
	if err := st.Send(&testpb.StreamingOutputCallRequest{Payload: stampPayload()}); err != nil {
		return fmt.Errorf("send: %w", err)
	}
	m, err := st.Recv()
	if err != nil {
		return fmt.Errorf("echo: %w", err)
	}
	if down != nil {
		down.Add(rpcbench.SinceStamp(string(m.GetPayload().GetBody())))
	}
	return nil
}

func (bb *bidiBench) pingPong(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	// Open the streams, each by a first exchange: over SQS it waits for
	// the responder to name the session's queue.
	ss := make([]testpb.TestService_FullDuplexCallClient, bb.streams)
	errs := make(chan error, bb.streams)
	for i := range ss {
		go func() {
			st, err := bb.tc.FullDuplexCall(ctx)
			if err == nil {
				ss[i] = st
				err = exchange(st, nil)
			}
			errs <- err
		}()
	}
	for range ss {
		if err := <-errs; err != nil {
			b.Fatal(err)
		}
	}
	var rts, down, unary, reply rpcbench.Latencies
	bb.svc.up.Reset()
	bb.resetCalls()
	b.ResetTimer()
	cpu0 := rpcbench.ProcessCPU()
	rpcbench.RunOps(b, bb.streams, func(_ context.Context, w int) error {
		start := time.Now()
		if err := exchange(ss[w], &down); err != nil {
			return err
		}
		rts.Add(time.Since(start))
		return nil
	})
	cpu1 := rpcbench.ProcessCPU()
	calls := bb.snapshotCalls()
	b.StopTimer()
	for _, st := range ss {
		if err := st.CloseSend(); err != nil {
			b.Fatal(err)
		}
		if _, err := st.Recv(); !errors.Is(err, io.EOF) {
			b.Fatalf("after CloseSend: %v, want io.EOF", err)
		}
	}
	// As many unary calls from as many goroutines.
	bb.resetCalls()
	bb.svc.request.Reset()
	cpu2 := rpcbench.ProcessCPU()
	b.StartTimer()
	rpcbench.RunOps(b, bb.streams, func(ctx context.Context, _ int) error {
		start := time.Now()
		m, err := bb.tc.UnaryCall(ctx, &testpb.SimpleRequest{Payload: stampPayload()})
		if err != nil {
			return err
		}
		unary.Add(time.Since(start))
		reply.Add(rpcbench.SinceStamp(string(m.GetPayload().GetBody())))
		return nil
	})
	b.StopTimer()
	cpu3 := rpcbench.ProcessCPU()
	if cpu1 > cpu0 {
		b.ReportMetric(float64((cpu1-cpu0).Microseconds())/float64(b.N), "cpu-us/rt")
		b.ReportMetric(float64((cpu3-cpu2).Microseconds())/float64(b.N), "cpu-us/unary")
	}
	byRT, byUnary := "-", "-"
	if bb.counter != nil {
		byRT = rpcbench.ReportCalls(b, calls, float64(b.N), "rt")
		byUnary = rpcbench.ReportCalls(b, bb.counter.Snapshot(), float64(b.N), "unary")
	}
	rts.Report(b, "rt")
	unary.Report(b, "unary")
	if rts.Len() == 0 || unary.Len() == 0 {
		return // failed
	}
	b.ReportMetric(rts.Percentile(50)/unary.Percentile(50), "rt/unary-p50")
	// One line per run: the testing package keeps 10 lines of a
	// benchmark's log, over all its runs.
	b.Logf("N=%d: p50 one way: stream up %.2f ms, down %.2f ms; unary request %.2f ms, reply %.2f ms; calls per rt: %s; per unary: %s",
		b.N, bb.svc.up.Percentile(50), down.Percentile(50), bb.svc.request.Percentile(50), reply.Percentile(50), byRT, byUnary)
}

func (bb *bidiBench) resetCalls() {
	if bb.counter != nil {
		bb.counter.Reset()
	}
}

func (bb *bidiBench) snapshotCalls() map[string]int64 {
	if bb.counter == nil {
		return nil
	}
	return bb.counter.Snapshot()
}
