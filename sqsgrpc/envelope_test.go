package sqsgrpc

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/tempqueues/tempqueues/internal/testkit/memstore"
	"github.com/tempqueues/tempqueues/responder"
	"github.com/tempqueues/tempqueues/sqsapi"
)

func TestRequestEnvelopeRoundTrips(t *testing.T) {
	md := metadata.Pairs("a", "1", "a", "2", "b-bin", "\x00\x01", "c", "caf\xc3\xa9")
	env, err := encodeRequest("/svc.S/M", time.UnixMilli(1234), "proto", md, []byte{0, 1, 2}, false, false, object{})
	if err != nil {
		t.Fatal(err)
	}
	r, err := decodeRequest(env)
	if err != nil {
		t.Fatal(err)
	}
	if r.method != "/svc.S/M" || r.deadline.UnixMilli() != 1234 || r.subtype != "proto" || !bytes.Equal(r.msg, []byte{0, 1, 2}) ||
		len(r.md["a"]) != 2 || r.md["b-bin"][0] != "\x00\x01" || r.md["c"][0] != "caf\xc3\xa9" {
		t.Fatalf("%+v", r)
	}
	streamed, err := encodeRequest("/svc.S/Up", time.Time{}, "proto", nil, nil, true, false, object{})
	if err != nil {
		t.Fatal(err)
	}
	if r, err := decodeRequest(streamed); err != nil || !r.streamed || r.msg != nil {
		t.Fatalf("streamed request: %+v, %v", r, err)
	}
	for _, bad := range []string{"", "TQG/1 /a/b - proto", "TQG/1 nope - proto\n\n", "TQG/1 /a/b soon proto\n\n", "TQG/1 /a/b - proto\nBAD\n\n",
		"TQG/1 /a/b - proto other\n\n", "TQG/1 /a/b - proto stream\n\nAAAA"} {
		if _, err := decodeRequest(bad); err == nil {
			t.Errorf("%q decoded", bad)
		}
	}
}

func TestFramesRoundTrip(t *testing.T) {
	b, _ := appendHeaderFrames(nil, metadata.Pairs("h", "v"))
	b = appendMessageFrame(b, []byte{9, 8})
	st, _ := status.New(codes.NotFound, "gone").WithDetails(&healthpb.HealthCheckRequest{Service: "x"})
	b, err := appendEnd(b, metadata.Pairs("t-bin", "\xff"), st)
	if err != nil {
		t.Fatal(err)
	}
	f, err := decodeFrames(string(b))
	if err != nil || !f.headerDone || f.header["h"][0] != "v" || len(f.msgs) != 1 || f.trailer["t-bin"][0] != "\xff" ||
		f.status.Code() != codes.NotFound || f.status.Message() != "gone" || len(f.status.Details()) != 1 {
		t.Fatalf("%+v, %v", f, err)
	}
	if _, err := decodeFrames("x y\n"); err == nil {
		t.Fatal("unknown frame decoded")
	}
}

func TestExpiredRequestsAreNotHandled(t *testing.T) {
	hs := &countingHealth{}
	s := NewServer(func(o *ServerOptions) { o.Now = func() time.Time { return time.UnixMilli(5000) } })
	healthpb.RegisterHealthServer(s, hs)
	msg, _ := codec{name: "proto"}.withDefault().marshal(&healthpb.HealthCheckRequest{})
	for _, c := range []struct {
		deadline int64
		ran      int
	}{{5000, 0}, {4000, 0}, {5001, 1}} {
		env, _ := encodeRequest("/grpc.health.v1.Health/Check", time.UnixMilli(c.deadline), "proto", nil, msg, false, false, object{})
		reply, err := s.Handler().HandleRequest(context.Background(), &responder.Request{Message: types.Message{Body: aws.String(env)}})
		if err != nil || hs.n != c.ran || (c.ran == 0) != (reply == nil) {
			t.Fatalf("deadline %d: ran %d, reply %v, err %v", c.deadline, hs.n, reply, err)
		}
	}
}

type countingHealth struct {
	health.Server
	n int
}

func (h *countingHealth) Check(context.Context, *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	h.n++
	return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}, nil
}

func (c codec) withDefault() codec {
	c, _ = codecFor(c.name)
	return c
}

// A request whose message is in a store the server cannot read fails, so
// that its queue's redrive policy dead-letters it: no store set, or the
// object gone.
func TestAMessageInAStoreThatCannotBeReadFailsTheRequest(t *testing.T) {
	env, err := encodeRequest("/grpc.health.v1.Health/Check", time.Time{}, "proto", nil, nil, false, true, object{bucket: "b", key: "tempqueues/0/k"})
	if err != nil || !strings.HasSuffix(env, " store\n\no b tempqueues/0/k") {
		t.Fatalf("envelope %q, %v", env, err)
	}
	r, err := decodeRequest(env)
	if err != nil || !r.store || r.object.key != "tempqueues/0/k" || r.msg != nil {
		t.Fatalf("decoded %+v, %v", r, err)
	}
	req := &responder.Request{Message: types.Message{Body: aws.String(env)}, ID: "id-1"}
	if _, err := NewServer().Handler().HandleRequest(context.Background(), req); !errors.Is(err, sqsapi.ErrNoPayloadStore) {
		t.Errorf("no store: %v", err)
	}
	h := NewServer(func(o *ServerOptions) { o.PayloadStore = memstore.New("b") }).Handler()
	if _, err := h.HandleRequest(context.Background(), req); !errors.Is(err, sqsapi.ErrPayloadNotFound) {
		t.Errorf("object gone: %v", err)
	}
	f, err := decodeFrames("H\no b tempqueues/0/k\ns 0\n")
	if err != nil || len(f.msgs) != 1 || f.objects[0].bucket != "b" {
		t.Fatalf("frames %+v, %v", f, err)
	}
}
