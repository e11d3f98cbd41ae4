package sqsgrpc_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"

	"github.com/tempqueues/tempqueues/internal/testkit/memstore"
	"github.com/tempqueues/tempqueues/internal/testkit/sqstestenv"
	"github.com/tempqueues/tempqueues/requester"
	"github.com/tempqueues/tempqueues/sqsgrpc"
)

// payloadEcho echoes payloads: a unary call's, and each message of a
// full-duplex stream.
type payloadEcho struct {
	testpb.UnimplementedTestServiceServer
}

func (payloadEcho) UnaryCall(_ context.Context, in *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
	if in.ResponseSize > 0 {
		return &testpb.SimpleResponse{Payload: &testpb.Payload{Body: make([]byte, in.ResponseSize)}}, nil
	}
	return &testpb.SimpleResponse{Payload: in.GetPayload()}, nil
}

func (payloadEcho) FullDuplexCall(stream grpc.BidiStreamingServer[testpb.StreamingOutputCallRequest, testpb.StreamingOutputCallResponse]) error {
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

// noise returns n random bytes: gzip cannot shrink them, nor their base64.
func noise(n int, seed uint64) []byte {
	b := make([]byte, n)
	rng := rand.New(rand.NewPCG(seed, seed+1))
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

// With a PayloadStore on both sides, a message too large for one SQS
// message goes through the store, raw: a unary request and its response,
// and messages of a stream both ways. The store is empty once each call
// has ended.
func TestMessagesGoThroughAPayloadStore(t *testing.T) {
	sqstestenv.Each(t, func(t *testing.T, b *sqstestenv.Backend) {
		store := memstore.New("messages")
		srv := sqsgrpc.NewServer(func(o *sqsgrpc.ServerOptions) { o.PayloadStore = store })
		testpb.RegisterTestServiceServer(srv, payloadEcho{})
		raw, queue, prefix := serve(t, b, srv)
		client := testpb.NewTestServiceClient(sqsgrpc.NewClientConn(newRequester(t, raw, prefix), queue,
			func(o *sqsgrpc.ClientConnOptions) { o.PayloadStore = store }))
		ctx := timeout(t, 90*time.Second)

		big := noise(3<<20, 1)
		out, err := client.UnaryCall(ctx, &testpb.SimpleRequest{Payload: &testpb.Payload{Body: big}})
		if err != nil || !bytes.Equal(out.GetPayload().GetBody(), big) {
			t.Fatalf("unary: %d bytes back, %v; want the %d sent", len(out.GetPayload().GetBody()), err, len(big))
		}
		if puts, gets, deletes := store.Calls(); puts != 2 || gets != 2 || deletes != 2 {
			t.Errorf("unary: %d puts, %d gets, %d deletes; want 2 each", puts, gets, deletes)
		}
		if keys := store.Keys(); len(keys) != 0 {
			t.Errorf("unary: left in the store: %v", keys)
		}

		stream, err := client.FullDuplexCall(ctx)
		if err != nil {
			t.Fatal(err)
		}
		msgs := [][]byte{noise(2<<20, 2), []byte("small"), noise(1<<20, 3)}
		for i, m := range msgs {
			if err := stream.Send(&testpb.StreamingOutputCallRequest{Payload: &testpb.Payload{Body: m}}); err != nil {
				t.Fatalf("send %d: %v", i, err)
			}
			got, err := stream.Recv()
			if err != nil || !bytes.Equal(got.GetPayload().GetBody(), m) {
				t.Fatalf("stream message %d: %d bytes back, %v; want the %d sent", i, len(got.GetPayload().GetBody()), err, len(m))
			}
		}
		if err := stream.CloseSend(); err != nil {
			t.Fatal(err)
		}
		if _, err := stream.Recv(); !errors.Is(err, io.EOF) {
			t.Fatalf("the stream's end: %v", err)
		}
		if puts, _, _ := store.Calls(); puts != 6 {
			t.Errorf("%d puts in all, want 6", puts)
		}
		if keys := store.Keys(); len(keys) != 0 {
			t.Errorf("stream: left in the store: %v", keys)
		}
	})
}

// A response larger than one message as it is, but not gzipped, reaches
// a client that reads compressed replies (the server checks the size of
// what is sent); one that does not gets codes.ResourceExhausted, as does
// a response too large even compressed with no store.
func TestCompressibleResponsesFitCompressed(t *testing.T) {
	srv := sqsgrpc.NewServer()
	testpb.RegisterTestServiceServer(srv, &testService{})
	raw, queue, prefix := serve(t, sqstestenv.SQSTest(t), srv)
	ctx := timeout(t, 30*time.Second)
	client := testpb.NewTestServiceClient(sqsgrpc.NewClientConn(newRequester(t, raw, prefix), queue))
	out, err := client.UnaryCall(ctx, &testpb.SimpleRequest{ResponseSize: 3 << 20}) // zeros: 4 MiB of "A" in base64
	if err != nil || len(out.GetPayload().GetBody()) != 3<<20 {
		t.Fatalf("a 3 MiB response that compresses: %v", err)
	}
	stream, err := client.StreamingOutputCall(ctx, &testpb.StreamingOutputCallRequest{ResponseParameters: []*testpb.ResponseParameters{{Size: 2 << 20}}})
	if err != nil {
		t.Fatal(err)
	}
	if m, err := stream.Recv(); err != nil || len(m.GetPayload().GetBody()) != 2<<20 {
		t.Fatalf("a 2 MiB stream message that compresses: %v", err)
	}
	if _, err := stream.Recv(); !errors.Is(err, io.EOF) {
		t.Fatalf("the stream's end: %v", err)
	}
	plain, err := requester.New(raw, func(o *requester.Options) {
		o.Prefix = prefix
		o.DisableSweeping = true
		o.DisableCompression = true
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = plain.Close(context.Background()) })
	_, err = testpb.NewTestServiceClient(sqsgrpc.NewClientConn(plain, queue)).UnaryCall(ctx, &testpb.SimpleRequest{ResponseSize: 3 << 20})
	if status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("a client that reads no compressed reply: %v", err)
	}
}

// The message size limits are grpc's: 4 MiB received by default on
// either side, raised with grpc.MaxCallRecvMsgSize on the client and
// ServerOptions.MaxRecvMsgSize on the server, as with grpc.
func TestMessageSizeLimitsAreGRPCs(t *testing.T) {
	store := memstore.New("messages")
	for _, limit := range []int{0, 8 << 20} {
		t.Run(fmt.Sprint(limit), func(t *testing.T) {
			srv := sqsgrpc.NewServer(func(o *sqsgrpc.ServerOptions) {
				o.PayloadStore = store
				o.MaxRecvMsgSize = limit
			})
			testpb.RegisterTestServiceServer(srv, payloadEcho{})
			raw, queue, prefix := serve(t, sqstestenv.SQSTest(t), srv)
			var callOpts []grpc.CallOption
			if limit > 0 {
				callOpts = []grpc.CallOption{grpc.MaxCallRecvMsgSize(limit)}
			}
			client := testpb.NewTestServiceClient(sqsgrpc.NewClientConn(newRequester(t, raw, prefix), queue, func(o *sqsgrpc.ClientConnOptions) {
				o.PayloadStore = store
				o.CallOptions = callOpts
			}))
			ctx := timeout(t, 60*time.Second)
			big := noise(5<<20, 4)
			_, err := client.UnaryCall(ctx, &testpb.SimpleRequest{Payload: &testpb.Payload{Body: big}})
			if limit == 0 && status.Code(err) != codes.ResourceExhausted || limit > 0 && err != nil {
				t.Errorf("limit %d: a 5 MiB request: %v", limit, err)
			}
			_, err = client.UnaryCall(ctx, &testpb.SimpleRequest{ResponseSize: 5 << 20})
			if limit == 0 && status.Code(err) != codes.ResourceExhausted || limit > 0 && err != nil {
				t.Errorf("limit %d: a 5 MiB response: %v", limit, err)
			}
			_, err = client.UnaryCall(ctx, &testpb.SimpleRequest{Payload: &testpb.Payload{Body: big}}, grpc.MaxCallSendMsgSize(1<<20))
			if status.Code(err) != codes.ResourceExhausted {
				t.Errorf("limit %d: a 5 MiB request over MaxCallSendMsgSize: %v", limit, err)
			}
		})
	}
	if keys := store.Keys(); len(keys) != 0 {
		t.Errorf("left in the store: %v", keys)
	}
}

// A request message put in the store is deleted when the call fails:
// here the server has no store, so the request fails (its queue would
// dead-letter it) and the call times out.
func TestAFailedCallLeavesNoObject(t *testing.T) {
	store := memstore.New("messages")
	srv := sqsgrpc.NewServer()
	testpb.RegisterTestServiceServer(srv, payloadEcho{})
	raw, queue, prefix := serve(t, sqstestenv.SQSTest(t), srv)
	client := testpb.NewTestServiceClient(sqsgrpc.NewClientConn(newRequester(t, raw, prefix), queue,
		func(o *sqsgrpc.ClientConnOptions) { o.PayloadStore = store }))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err := client.UnaryCall(ctx, &testpb.SimpleRequest{Payload: &testpb.Payload{Body: noise(2<<20, 5)}})
	if status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("got %v, want codes.DeadlineExceeded", err)
	}
	if puts, _, deletes := store.Calls(); puts != 1 || deletes != 1 || len(store.Keys()) != 0 {
		t.Errorf("%d puts, %d deletes, left %v", puts, deletes, store.Keys())
	}
}
