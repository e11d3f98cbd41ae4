package sqshttp

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/internal/payload"
	"github.com/tempqueues/tempqueues/internal/testkit/memstore"
	"github.com/tempqueues/tempqueues/responder"
	"github.com/tempqueues/tempqueues/sqsapi"
)

func FuzzRequestEnvelope(f *testing.F) {
	f.Add("POST", "/a?b=c", "X-A", "v", []byte("body"), int64(0), false, int64(-1))
	f.Add("GET", "/", "X-B", "caf\xe9", []byte{0, 1, 2, 0xff}, int64(1700000000123), false, int64(-1))
	f.Add("PUT", "/x", "X-C", "", []byte("line\n\nTQH/1 200 t\n"), int64(-5), false, int64(-1))
	f.Add("POST", "/up", "X-D", "w", []byte{}, int64(0), true, int64(-1))
	f.Add("PUT", "/up", "X-E", "w", []byte{}, int64(1700000000123), true, int64(3<<20))
	f.Fuzz(func(t *testing.T, method, uri, name, value string, body []byte, ms int64, parts bool, length int64) {
		h := http.Header{}
		if validName(name) && !strings.ContainsAny(value, "\r\n") {
			h[http.CanonicalHeaderKey(name)] = []string{value}
		}
		var deadline time.Time
		if ms != 0 {
			deadline = time.UnixMilli(ms)
		}
		if !parts || length < 0 {
			length = -1
		}
		env, err := (&request{method: method, uri: uri, deadline: deadline, header: h, body: body, parts: parts, length: length}).encode()
		if err != nil {
			return
		}
		if !isText(env) {
			t.Fatalf("envelope is not SQS text: %q", env)
		}
		got, err := decodeRequest(env)
		if err != nil {
			t.Fatalf("decode %q: %v", env, err)
		}
		if got.method != method || got.uri != uri || !got.deadline.Equal(deadline) || !bytes.Equal(got.body, body) ||
			got.parts != parts || got.length != length {
			t.Fatalf("round trip: %+v", got)
		}
		for k, v := range h {
			if got.header.Get(k) != v[0] && k != "Host" {
				t.Fatalf("header %s: %q, want %q", k, got.header.Get(k), v[0])
			}
		}
	})
}

func TestResponseEnvelopeRoundTrips(t *testing.T) {
	for _, body := range [][]byte{nil, []byte("ok"), {0, 0xfe, 0xff}} {
		mark := bodyMark(body)
		b, err := appendResponseHead(nil, 418, mark, false, http.Header{"X-A": {"1", "2"}})
		if err != nil {
			t.Fatal(err)
		}
		r, err := decodeResponse(string(appendEncoded(b, mark, body)))
		if err != nil || r.status != 418 || r.more || !bytes.Equal(r.body, body) || len(r.header["X-A"]) != 2 {
			t.Fatalf("%q: %+v, %v", body, r, err)
		}
	}
	for _, bad := range []string{"", "TQH/1 200\n\n", "TQH/1 abc t\n\n", "TQH/1 200 t\nX-A 1\n\n", "TQH/1 200 t\n", "HTTP/1.1 200 OK\n\n", "TQH/1 200 x\n\n"} {
		if _, err := decodeResponse(bad); err == nil {
			t.Errorf("%q decoded", bad)
		}
	}
}

func sqsRequest(body string) *responder.Request {
	return &responder.Request{Message: types.Message{Body: aws.String(body)}, ID: "id-1"}
}

func TestExpiredRequestsAreNotHandled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) { // the clock stands still: now is exact
		ran := false
		h := Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { ran = true }))
		now := time.Now() // a bubble starts at a whole second, as deadlines travel in milliseconds
		env, _ := (&request{method: "GET", uri: "/", deadline: now}).encode()
		reply, err := h.HandleRequest(context.Background(), sqsRequest(env))
		if ran || reply != nil || err != nil {
			t.Fatalf("expired request: ran %v, reply %v, err %v", ran, reply, err)
		}
		env, _ = (&request{method: "GET", uri: "/", deadline: now.Add(time.Millisecond)}).encode()
		if _, err := h.HandleRequest(context.Background(), sqsRequest(env)); err != nil || !ran {
			t.Fatalf("live request: ran %v, err %v", ran, err)
		}
	})
}

func TestMalformedRequestsGet400(t *testing.T) {
	h := Handler(http.NotFoundHandler())
	for _, body := range []string{"hello", "TQH/1 GET / - t\nno header end", "TQH/1 GET / - b\n\n!!!", "TQH/1 GET / soon t\n\n",
		"TQH/1 PUT / - t x\n\n", "TQH/1 PUT / - t +-1\n\n", "TQH/1 PUT / - t +1 +\n\n"} {
		reply, err := h.HandleRequest(context.Background(), sqsRequest(body))
		if err != nil || reply == nil {
			t.Fatalf("%q: %v, %v", body, reply, err)
		}
		r, err := decodeResponse(reply.Body)
		if err != nil || r.status != http.StatusBadRequest {
			t.Fatalf("%q: %+v, %v", body, r, err)
		}
	}
}

// A request whose body is in a store it cannot read fails, so that its
// queue's redrive policy dead-letters it: no store set, or the object
// gone. The handler does not run.
func TestABodyInAStoreThatCannotBeReadFailsTheRequest(t *testing.T) {
	ran := false
	hf := http.HandlerFunc(func(http.ResponseWriter, *http.Request) { ran = true })
	env, err := (&request{method: "PUT", uri: "/", object: payload.Pointer{Bucket: "b", Key: "tempqueues/0/k"}, store: true}).encode()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(env, "\n\nb tempqueues/0/k") || !strings.Contains(env, " s store\n") {
		t.Fatalf("envelope %q", env)
	}
	if _, err := Handler(hf).HandleRequest(context.Background(), sqsRequest(env)); !errors.Is(err, sqsapi.ErrNoPayloadStore) {
		t.Errorf("no store: %v", err)
	}
	store := memstore.New("b")
	h := Handler(hf, func(o *HandlerOptions) { o.PayloadStore = store })
	if _, err := h.HandleRequest(context.Background(), sqsRequest(env)); !errors.Is(err, sqsapi.ErrPayloadNotFound) {
		t.Errorf("object gone: %v", err)
	}
	if ran {
		t.Error("the handler ran")
	}
	r, err := decodeRequest(env)
	if err != nil || !r.store || r.object.Key != "tempqueues/0/k" || r.parts {
		t.Fatalf("decoded %+v, %v", r, err)
	}
	for _, bad := range []string{"TQH/1 PUT / - s\n\nnokey", "TQH/1 PUT / - s\n\n b", "TQH/1 PUT / - t store store\n\n"} {
		if _, err := decodeRequest(bad); err == nil {
			t.Errorf("%q decoded", bad)
		}
	}
}
