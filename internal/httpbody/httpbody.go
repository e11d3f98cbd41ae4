// Package httpbody is the implementation of sqsclient.BufferRequestBodies, the
// client option that keeps the SDK from losing responses (its doc comment
// says why), and of Ensure, which the library's constructors apply to the
// clients they are given.
package httpbody

import (
	"bytes"
	"fmt"
	"io"
	"net/http"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// Buffer wraps o.HTTPClient so that each request's body is read into memory
// and handed to net/http as a reader the SDK never closes. It is safe to
// apply more than once; a nil HTTPClient is replaced by the SDK's default
// one first.
func Buffer(o *sqs.Options) {
	if _, ok := o.HTTPClient.(bufferedBodies); ok {
		return
	}
	next := o.HTTPClient
	if next == nil {
		next = awshttp.NewBuildableClient()
	}
	o.HTTPClient = bufferedBodies{next: next}
}

// bufferedBodies is the HTTP client Buffer installs.
type bufferedBodies struct{ next sqs.HTTPClient }

// Do reads req's body into memory and sends a copy of req carrying it.
func (c bufferedBodies) Do(req *http.Request) (*http.Response, error) {
	if req.Body == nil || req.Body == http.NoBody {
		return c.next.Do(req)
	}
	// Sized from ContentLength (plus room for the read that finds the end),
	// so that the copy costs one allocation on every call.
	var buf bytes.Buffer
	if req.ContentLength > 0 {
		buf.Grow(int(req.ContentLength) + bytes.MinRead)
	}
	_, err := buf.ReadFrom(req.Body)
	_ = req.Body.Close()
	if err != nil {
		return nil, fmt.Errorf("tempqueues: reading request body: %w", err)
	}
	body := buf.Bytes()
	out := req.WithContext(req.Context()) // a shallow copy: the SDK keeps its own
	out.ContentLength = int64(len(body))
	out.GetBody = func() (io.ReadCloser, error) {
		if len(body) == 0 {
			return http.NoBody, nil
		}
		return io.NopCloser(bytes.NewReader(body)), nil
	}
	out.Body, _ = out.GetBody()
	return c.next.Do(out)
}

// Ensure returns client unchanged unless it is an *sqs.Client without
// Buffer; then it returns a new *sqs.Client with the same options and Buffer
// installed, so that the library's own receives cannot lose their responses
// however the caller built the client. The caller's client is not modified.
// Constructors that take a client (virtualqueue.New, responder.New,
// redrive.New) call it; clients of other types are the caller's to wrap.
func Ensure[C any](client C) C {
	sc, ok := any(client).(*sqs.Client)
	if !ok || sc == nil {
		return client
	}
	o := sc.Options()
	if _, done := o.HTTPClient.(bufferedBodies); done {
		return client
	}
	protected, ok := any(sqs.New(o, Buffer)).(C)
	if !ok {
		return client
	}
	return protected
}
