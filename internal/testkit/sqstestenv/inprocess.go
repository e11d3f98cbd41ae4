package sqstestenv

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/tempqueues/tempqueues/internal/callcount"
	"github.com/tempqueues/tempqueues/sqstest"
)

// inProcessEndpoint is the base URL of an InProcess backend: its clients
// never dial it (their transport calls the server's handler), so it only
// names the server in queue URLs.
const inProcessEndpoint = "http://sqstest.invalid"

// InProcess starts an sqstest server that does not listen, closed when the
// test ends, and returns it as a Backend with Name "sqstest": its clients
// call the server's handler in the calling goroutine, with no socket and no
// goroutine of their own. It is the backend of tests that run in a
// testing/synctest bubble, where network I/O would keep the bubble's clock
// from moving: call it inside the bubble, so that the server's timers (long
// polls, visibility timeouts, delays) run on the bubble's clock.
func InProcess(tb testing.TB, optFns ...func(*sqstest.Options)) *Backend {
	tb.Helper()
	srv, err := sqstest.NewHandler(optFns...)
	if err != nil {
		tb.Fatalf("sqstestenv: %v", err)
	}
	tb.Cleanup(func() { _ = srv.Close(context.Background()) })
	return &Backend{Name: "sqstest", Endpoint: inProcessEndpoint, Server: srv, handler: srv}
}

// handlerTransport serves each request with a handler in the calling
// goroutine and returns its recorded response.
type handlerTransport struct{ h http.Handler }

func (t handlerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	in := r
	if in.Host == "" {
		// As a server sees it: sqstest names queues after the Host.
		in = r.Clone(r.Context())
		in.Host = r.URL.Host
	}
	rec := httptest.NewRecorder()
	t.h.ServeHTTP(rec, in)
	resp := rec.Result()
	resp.Request = r
	return resp, nil
}

// inProcessClient is NewClient for a backend served in process.
func inProcessClient(h http.Handler, counter *callcount.Counter, optFns ...func(*sqs.Options)) *sqs.Client {
	return NewClient(inProcessEndpoint, counter, append([]func(*sqs.Options){func(o *sqs.Options) {
		o.HTTPClient = &http.Client{Transport: handlerTransport{h}}
	}}, optFns...)...)
}
