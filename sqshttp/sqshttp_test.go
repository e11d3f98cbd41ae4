package sqshttp_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/internal/callcount"
	"github.com/tempqueues/tempqueues/internal/testkit/leakcheck"
	"github.com/tempqueues/tempqueues/internal/testkit/sqstestenv"
	"github.com/tempqueues/tempqueues/internal/testkit/testbody"
	"github.com/tempqueues/tempqueues/requester"
	"github.com/tempqueues/tempqueues/responder"
	"github.com/tempqueues/tempqueues/sqsapi"
	"github.com/tempqueues/tempqueues/sqshttp"
)

type env struct {
	raw     *sqs.Client
	counter *callcount.Counter
	queue   string
	prefix  string // the requester's host queues'; the responder's session queue adds "s_"
	req     *requester.Requester
	resp    *responder.Responder
}

// newEnv creates a request queue served by h through sqshttp.Handler and
// a requester; both stop when the test ends.
func newEnv(t *testing.T, b *sqstestenv.Backend, h http.Handler, hopts ...func(*sqshttp.HandlerOptions)) *env {
	t.Helper()
	raw, counter := b.Client(t)
	ctx := context.Background()
	out, err := raw.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(sqstestenv.QueueName(t, "http"))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = raw.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: out.QueueUrl}) })
	name := sqstestenv.QueueName(t, "")
	prefix := "tq" + strings.ReplaceAll(name[len(name)-8:], "-", "") + "_"
	resp, err := responder.New(raw, func(o *responder.Options) {
		o.PollWaitTime = time.Second
		o.AllowReplyTo = []string{prefix} // the requester's Prefix
		o.SessionQueuePrefix = prefix + "s_"
	})
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- resp.Serve(ctx, *out.QueueUrl, sqshttp.Handler(h, hopts...)) }()
	r, err := requester.New(raw, func(o *requester.Options) {
		o.Prefix = prefix
		o.DisableSweeping = true
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = r.Close(ctx)
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		_ = resp.Shutdown(sctx)
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
		leakcheck.Check(t)
	})
	return &env{raw: raw, counter: counter, queue: *out.QueueUrl, prefix: prefix, req: r, resp: resp}
}

func (e *env) client(optFns ...func(*sqshttp.TransportOptions)) *http.Client {
	return &http.Client{Transport: sqshttp.NewTransport(e.req, e.queue, optFns...)}
}

func TestRoundTripCarriesTheRequestAndTheResponse(t *testing.T) {
	sqstestenv.Each(t, func(t *testing.T, b *sqstestenv.Backend) {
		mux := http.NewServeMux()
		mux.HandleFunc("POST /orders/{id}", func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			w.Header().Set("X-Id", r.PathValue("id"))
			w.Header()["X-Multi"] = []string{"a", "b"}
			w.Header().Set("Content-Type", "text/plain")
			w.WriteHeader(http.StatusCreated)
			d, ok := r.Context().Deadline() // the transport's default timeout: the caller set none
			fmt.Fprintf(w, "%s %s q=%s host=%s accept=%v len=%d deadline=%v body=%s", r.Method, r.URL.Path, r.URL.Query().Get("q"),
				r.Host, r.Header.Values("Accept"), r.ContentLength, ok && time.Until(d) > 20*time.Second, body)
		})
		e := newEnv(t, b, mux)
		req, _ := http.NewRequest(http.MethodPost, "http://orders.internal/orders/42?q=a%20b", strings.NewReader("héllo\nworld"))
		req.Header.Add("Accept", "text/plain")
		req.Header.Add("Accept", "application/json")
		resp, err := e.client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		want := "POST /orders/42 q=a b host=orders.internal accept=[text/plain application/json] len=12 deadline=true body=héllo\nworld"
		if resp.StatusCode != http.StatusCreated || string(body) != want {
			t.Fatalf("got %d %q, want 201 %q", resp.StatusCode, body, want)
		}
		if resp.Header.Get("X-Id") != "42" || strings.Join(resp.Header.Values("X-Multi"), ",") != "a,b" || resp.ContentLength != int64(len(want)) {
			t.Fatalf("response header %v, length %d", resp.Header, resp.ContentLength)
		}
	})
}

func TestBinaryBodiesAndHeadersSurvive(t *testing.T) {
	sqstestenv.Each(t, func(t *testing.T, b *sqstestenv.Backend) {
		payload := make([]byte, 256)
		for i := range payload {
			payload[i] = byte(i) // NUL, control characters, invalid UTF-8
		}
		e := newEnv(t, b, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			w.Header().Set("X-Raw", r.Header.Get("X-Raw"))
			w.Header().Set("Content-Type", "application/octet-stream")
			_, _ = w.Write(append(body, 0xff, 0x00))
		}))
		req, _ := http.NewRequest(http.MethodPut, "http://x/blob", bytes.NewReader(payload))
		req.Header.Set("X-Raw", "caf\xe9\x01") // not UTF-8: carried in base64
		resp, err := e.client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		got, _ := io.ReadAll(resp.Body)
		if !bytes.Equal(got, append(payload, 0xff, 0x00)) {
			t.Fatalf("body changed: got %d bytes % x", len(got), got[:min(16, len(got))])
		}
		if v := resp.Header.Get("X-Raw"); v != "caf\xe9\x01" {
			t.Fatalf("header X-Raw = %q", v)
		}
	})
}

// The handler flushes a part and waits until the client has read it: the
// test passes only if parts arrive while the handler still runs.
func TestFlushStreamsTheResponse(t *testing.T) {
	sqstestenv.Each(t, func(t *testing.T, b *sqstestenv.Backend) {
		read := make(chan struct{})
		e := newEnv(t, b, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			for i := range 3 {
				fmt.Fprintf(w, "part %d\n", i)
				w.(http.Flusher).Flush()
				select {
				case <-read:
				case <-r.Context().Done():
					return
				}
			}
			fmt.Fprint(w, "done\n")
		}))
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://x/events", nil)
		resp, err := e.client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.Header.Get("Content-Type") != "text/event-stream" || resp.ContentLength != -1 {
			t.Fatalf("header %v, length %d", resp.Header, resp.ContentLength)
		}
		buf := make([]byte, 64)
		for i := range 3 {
			n, err := io.ReadAtLeast(resp.Body, buf, len("part 0\n"))
			if err != nil || string(buf[:n]) != fmt.Sprintf("part %d\n", i) {
				t.Fatalf("part %d: %q, %v", i, buf[:n], err)
			}
			read <- struct{}{}
		}
		rest, err := io.ReadAll(resp.Body)
		if err != nil || string(rest) != "done\n" {
			t.Fatalf("rest: %q, %v", rest, err)
		}
	})
}

func TestClosingAStreamedBodyStopsIt(t *testing.T) {
	sqstestenv.Each(t, func(t *testing.T, b *sqstestenv.Backend) {
		closed := make(chan struct{})
		handlerDone := make(chan struct{})
		e := newEnv(t, b, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			defer close(handlerDone)
			fmt.Fprint(w, "first")
			w.(http.Flusher).Flush()
			<-closed
			fmt.Fprint(w, "second") // nobody reads it: a late reply
		}))
		resp, err := e.client().Get("http://x/")
		if err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 5)
		if _, err := io.ReadFull(resp.Body, buf); err != nil || string(buf) != "first" {
			t.Fatalf("first part: %q, %v", buf, err)
		}
		if err := resp.Body.Close(); err != nil {
			t.Fatal(err)
		}
		close(closed)
		if n, err := resp.Body.Read(buf); n != 0 || err == nil {
			t.Fatalf("Read after Close = %d, %v", n, err)
		}
		<-handlerDone
	})
}

func TestLargeResponsesStreamInParts(t *testing.T) {
	sqstestenv.Each(t, func(t *testing.T, b *sqstestenv.Backend) {
		big := bytes.Repeat([]byte("0123456789abcdef"), 3<<16) // 3 MiB: three messages at least
		noise := []byte(testbody.Random(3<<20, 1))
		e := newEnv(t, b, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/noise" {
				_, _ = w.Write(noise)
				return
			}
			_, _ = w.Write(big)
		}))
		// Room for a redelivery: once in about 15 runs of the package under
		// -race on a loaded machine, one part of the four did not arrive
		// within the default 30 s; a redelivered request sends the stream
		// again, and the stream drops the parts it has.
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://x/big", nil)
		resp, err := e.client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		got, err := io.ReadAll(resp.Body)
		if err != nil || !bytes.Equal(got, big) {
			t.Fatalf("got %d bytes, %v; want %d", len(got), err, len(big))
		}
		// A caller that takes one reply gets it compressed in one message
		// when it fits so, and otherwise a 413 saying why.
		oneReply := e.client(func(o *sqshttp.TransportOptions) { o.DisableStreaming = true })
		resp, err = oneReply.Get("http://x/big")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		got, err = io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != http.StatusOK || !bytes.Equal(got, big) {
			t.Fatalf("one reply, compressed: %d with %d bytes, %v; want 200 with %d", resp.StatusCode, len(got), err, len(big))
		}
		resp, err = oneReply.Get("http://x/noise")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		msg, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(string(msg), "one SQS message") {
			t.Fatalf("one reply: %d %q", resp.StatusCode, msg)
		}
	})
}

func TestDeadlineIsTheCallTimeoutAndTheHandlerDeadline(t *testing.T) {
	sqstestenv.Each(t, func(t *testing.T, b *sqstestenv.Backend) {
		handlerErr := make(chan error, 1)
		deadlines := make(chan time.Time, 1)
		release := make(chan struct{})
		e := newEnv(t, b, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			d, _ := r.Context().Deadline()
			deadlines <- d
			<-r.Context().Done()
			handlerErr <- context.Cause(r.Context())
			<-release // answers only after the caller gave up
		}))
		defer close(release)
		deadline := time.Now().Add(2 * time.Second)
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://x/slow", nil)
		_, err := e.client().Do(req)
		if !errors.Is(err, requester.ErrTimeout) {
			t.Fatalf("err = %v, want ErrTimeout", err)
		}
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err = %v, want it to match context.DeadlineExceeded", err)
		}
		// The caller's, to the millisecond, less its reply's travel:
		// never later, so that the reply can arrive in time.
		if d, caller := <-deadlines, deadline.Truncate(time.Millisecond); d.After(caller) || caller.Sub(d) > time.Second {
			t.Fatalf("handler deadline %v, want at most the caller's %v, by less than a second", d, caller)
		}
		// The caller's deadline passed: its session's cancel stops the
		// handler, or the handler's own deadline just before.
		if err := <-handlerErr; !errors.Is(err, responder.ErrCallerGone) && !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("handler context ended with %v", err)
		}
	})
}

// TestRequestBodiesFitCompressed: with DisableStreaming, the body of a
// request must travel in its message, whose size counts as sent: a
// 3 MiB JSON body fits compressed (requester.Options.CompressRequests),
// and 3 MiB of base64, or any body without compression, fails with
// ErrTooLarge before any send.
func TestRequestBodiesFitCompressed(t *testing.T) {
	e := newEnv(t, sqstestenv.SQSTest(t), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%d bytes", len(body))
	}))
	compressing, err := requester.New(e.raw, func(o *requester.Options) {
		o.Prefix = e.prefix
		o.DisableSweeping = true
		o.CompressRequests = true
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = compressing.Close(context.Background()) })
	oneReply := func(o *sqshttp.TransportOptions) { o.DisableStreaming = true }
	json := testbody.JSON(3<<20, 1)
	resp, err := (&http.Client{Transport: sqshttp.NewTransport(compressing, e.queue, oneReply)}).Post("http://x/", "application/json", strings.NewReader(json))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if got, _ := io.ReadAll(resp.Body); string(got) != fmt.Sprintf("%d bytes", len(json)) {
		t.Fatalf("the handler read %q", got)
	}
	sends := func() int64 {
		c := compressing.Stats().Calls
		d := e.req.Stats().Calls
		return c["SendMessage"] + c["SendMessageBatch"] + d["SendMessage"] + d["SendMessageBatch"]
	}
	before := sends()
	for name, c := range map[string]struct {
		r    *requester.Requester
		body string
	}{"base64, compressed": {compressing, testbody.Random(3<<20, 2)}, "JSON, not compressed": {e.req, json}} {
		_, err := (&http.Client{Transport: sqshttp.NewTransport(c.r, e.queue, oneReply)}).Post("http://x/", "text/plain", strings.NewReader(c.body))
		if !errors.Is(err, sqshttp.ErrTooLarge) || !errors.Is(err, sqsapi.ErrInvalidInput) {
			t.Errorf("%s: %v, want ErrTooLarge", name, err)
		}
	}
	if n := sends() - before; n != 0 {
		t.Errorf("%d sends for bodies too large", n)
	}
}

func TestBadInputFailsBeforeAnyCall(t *testing.T) {
	sqstestenv.Each(t, func(t *testing.T, b *sqstestenv.Backend) {
		e := newEnv(t, b, http.NotFoundHandler())
		calls := func() (n int64) {
			for _, c := range e.req.Stats().Calls {
				n += c
			}
			return n
		}
		before := calls()
		oneReply := sqshttp.NewTransport(e.req, e.queue, func(o *sqshttp.TransportOptions) { o.DisableStreaming = true })
		cases := map[string]struct {
			rt   *sqshttp.Transport
			req  func() *http.Request
			want error
		}{
			"nil requester": {sqshttp.NewTransport(nil, e.queue), get, sqsapi.ErrInvalidInput},
			"empty queue":   {sqshttp.NewTransport(e.req, ""), get, sqsapi.ErrInvalidInput},
			// A body too large for a message streams, unless streaming
			// is disabled.
			"body too large, not streaming": {oneReply, func() *http.Request {
				r, _ := http.NewRequest(http.MethodPost, "http://x/", bytes.NewReader(make([]byte, sqsapi.MaxMessageSize)))
				return r
			}, sqshttp.ErrTooLarge},
			"binary body too large once encoded, not streaming": {oneReply, func() *http.Request {
				r, _ := http.NewRequest(http.MethodPost, "http://x/", bytes.NewReader(make([]byte, sqsapi.MaxMessageSize*4/5)))
				return r
			}, sqshttp.ErrTooLarge},
			"body of unknown length too large, not streaming": {oneReply, func() *http.Request {
				r, _ := http.NewRequest(http.MethodPost, "http://x/", io.MultiReader(bytes.NewReader(make([]byte, sqsapi.MaxMessageSize))))
				return r
			}, sqshttp.ErrTooLarge},
			"header block too large, streaming": {sqshttp.NewTransport(e.req, e.queue), func() *http.Request {
				r, _ := http.NewRequest(http.MethodPost, "http://x/", io.MultiReader(strings.NewReader("streamed")))
				r.Header.Set("X-Big", strings.Repeat("h", sqsapi.MaxMessageSize))
				return r
			}, sqshttp.ErrTooLarge},
			"body shorter than its ContentLength": {sqshttp.NewTransport(e.req, e.queue), func() *http.Request {
				r, _ := http.NewRequest(http.MethodPost, "http://x/", strings.NewReader("short"))
				r.ContentLength = 10
				return r
			}, sqsapi.ErrInvalidInput},
			"header block too large": {sqshttp.NewTransport(e.req, e.queue), func() *http.Request {
				r := get()
				r.Header.Set("X-Big", strings.Repeat("h", sqsapi.MaxMessageSize))
				return r
			}, sqshttp.ErrTooLarge},
			"invalid header": {sqshttp.NewTransport(e.req, e.queue), func() *http.Request {
				r := get()
				r.Header["Bad Name"] = []string{"x"}
				return r
			}, sqsapi.ErrInvalidInput},
		}
		for name, c := range cases {
			_, err := (&http.Client{Transport: c.rt}).Do(c.req())
			if !errors.Is(err, c.want) || !errors.Is(err, sqsapi.ErrInvalidInput) {
				t.Errorf("%s: err = %v, want %v", name, err, c.want)
			}
		}
		if n := calls() - before; n != 0 {
			t.Fatalf("%d calls for bad input", n)
		}
	})
}

func get() *http.Request {
	r, _ := http.NewRequest(http.MethodGet, "http://x/", nil)
	return r
}

func TestErrorsWrapTheLibrarysErrors(t *testing.T) {
	sqstestenv.Each(t, func(t *testing.T, b *sqstestenv.Backend) {
		e := newEnv(t, b, http.NotFoundHandler())
		resp, err := e.client().Get("http://x/missing")
		if err != nil || resp.StatusCode != http.StatusNotFound {
			t.Fatalf("404 handler: %v, %v", resp, err)
		}
		resp.Body.Close()

		gone := strings.TrimSuffix(e.queue, "/") + "-gone"
		_, err = (&http.Client{Transport: sqshttp.NewTransport(e.req, gone)}).Get("http://x/")
		var dne *types.QueueDoesNotExist
		if !errors.As(err, &dne) {
			t.Fatalf("unreachable queue: err = %v, want *types.QueueDoesNotExist", err)
		}

		if err := e.req.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		_, err = e.client().Get("http://x/")
		if !errors.Is(err, sqsapi.ErrClosed) {
			t.Fatalf("closed requester: err = %v", err)
		}
	})
}

// Responder middleware sees the adapter's requests as any others, and a
// Store answers a redelivered request from the stored reply.
func TestResponderMiddlewareAndStoreApply(t *testing.T) {
	b := sqstestenv.SQSTest(t)
	raw, _ := b.Client(t)
	ctx := context.Background()
	out, err := raw.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(sqstestenv.QueueName(t, "mw"))})
	if err != nil {
		t.Fatal(err)
	}
	var seen []string
	resp, err := responder.New(raw, func(o *responder.Options) {
		o.PollWaitTime = time.Second
		o.Store = responder.NewMemoryStore()
		o.Middleware = []func(responder.Handler) responder.Handler{func(next responder.Handler) responder.Handler {
			return responder.HandlerFunc(func(ctx context.Context, req *responder.Request) (*responder.Reply, error) {
				seen = append(seen, req.ID) // sequential: each reply reaches the test after its handler
				return next.HandleRequest(ctx, req)
			})
		}}
	})
	if err != nil {
		t.Fatal(err)
	}
	runs := 0
	served := make(chan error, 1)
	go func() {
		served <- resp.Serve(ctx, *out.QueueUrl, sqshttp.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			runs++
			fmt.Fprintf(w, "run %d", runs)
		})))
	}()
	r, err := requester.New(raw, func(o *requester.Options) { o.DisableSweeping = true })
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = r.Close(ctx)
		_ = resp.Shutdown(ctx)
		<-served
	}()
	// Two sends of one request id, as a redelivery would bring it: the
	// second is answered from the Store without running the handler.
	hc := &http.Client{Transport: sqshttp.NewTransport(r, *out.QueueUrl, func(o *sqshttp.TransportOptions) {
		o.MessageAttributes = func(*http.Request) map[string]types.MessageAttributeValue {
			return map[string]types.MessageAttributeValue{sqsapi.RequestIDAttribute: {DataType: aws.String("String"), StringValue: aws.String("req-1")}}
		}
	})}
	for range 2 {
		res, err := hc.Get("http://x/")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if string(body) != "run 1" {
			t.Fatalf("body %q, want the first run's", body)
		}
	}
	if runs != 1 || len(seen) != 1 || seen[0] != "req-1" {
		t.Fatalf("handler ran %d times, middleware saw %v", runs, seen)
	}
}
