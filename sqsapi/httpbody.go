package sqsapi

import (
	"bytes"
	"fmt"
	"io"
	"net/http"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// BufferRequestBodies is an sqs.Options function that stops the SDK's HTTP
// layer from losing responses, ReceiveMessage responses included, and
// therefore messages. Install it on every client:
//
//	client := sqs.NewFromConfig(cfg, sqsapi.BufferRequestBodies)
//
// Why: the SDK (smithy-go) hands net/http a request body that it closes as
// soon as the response headers arrive, and whose WriteTo then returns
// io.EOF instead of nil. net/http streams a body it cannot see is in memory
// after the headers, and once the last byte is out it reads the body once
// more to make sure nothing follows. When the server answers before that
// extra read (a fast server, a loaded client) the read meets the closed body,
// the transport takes the io.EOF for a failed write and closes the
// connection while the response body is still being read. The SDK then sees
// "use of closed network connection" and retries: a retried ReceiveMessage
// leaves the messages of the lost response invisible until their visibility
// timeout ends, and a retried SendMessage sends twice. Against local servers
// on a loaded 2-core machine up to one request write in 150 failed this way
// (TestBufferRequestBodiesNoFailedWrites without the fix); each failure that
// lands while a response is being read loses that response.
//
// BufferRequestBodies wraps the client's HTTP client so that each request's
// body (at most about 1 MiB for SQS) is read into memory first and
// handed to net/http as a *bytes.Reader the SDK never closes, with GetBody
// set. net/http then writes headers and body in one go and its extra read
// finds a clean end of data. It costs one copy of the request body and saves
// a TCP write per call.
//
// It is safe to apply more than once; a nil HTTPClient is replaced by the
// SDK's default one first.
func BufferRequestBodies(o *sqs.Options) {
	if _, ok := o.HTTPClient.(bufferedBodies); ok {
		return
	}
	next := o.HTTPClient
	if next == nil {
		next = awshttp.NewBuildableClient()
	}
	o.HTTPClient = bufferedBodies{next: next}
}

// bufferedBodies is the HTTP client BufferRequestBodies installs.
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
		return nil, fmt.Errorf("sqsapi: reading request body: %w", err)
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

// EnsureBufferedBodies returns client unchanged unless it is an *sqs.Client
// without BufferRequestBodies; then it returns a new *sqs.Client with the
// same options and BufferRequestBodies installed, so that the library's own
// receives cannot lose their responses however the caller built the client.
// The caller's client is not modified. Constructors that take a client
// (virtualqueue.New, responder.New, redrive.New) call it; wrap clients of
// other types with BufferRequestBodies yourself.
func EnsureBufferedBodies[C any](client C) C {
	sc, ok := any(client).(*sqs.Client)
	if !ok || sc == nil {
		return client
	}
	o := sc.Options()
	if _, done := o.HTTPClient.(bufferedBodies); done {
		return client
	}
	protected, ok := any(sqs.New(o, BufferRequestBodies)).(C)
	if !ok {
		return client
	}
	return protected
}
