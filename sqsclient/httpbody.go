package sqsclient

import (
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/tempqueues/tempqueues/internal/httpbody"
)

// BufferRequestBodies is an sqs.Options function that stops the SDK's HTTP
// layer from losing responses, ReceiveMessage responses included, and
// therefore messages. Install it on every client:
//
//	client := sqs.NewFromConfig(cfg, sqsclient.BufferRequestBodies)
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
// timeout ends, and a retried SendMessage sends twice; fast local servers
// on a loaded machine meet it most (docs/sdk-lost-responses.md, with how
// often it happened here).
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
func BufferRequestBodies(o *sqs.Options) { httpbody.Buffer(o) }
