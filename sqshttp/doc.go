// Package sqshttp carries net/http over SQS request/response: an existing
// http.Handler (a ServeMux, a Connect or Twirp handler) serves a request
// queue, and an ordinary http.Client calls it, with two lines of wiring:
//
//	// the service
//	err := resp.Serve(ctx, queueURL, sqshttp.Handler(mux))
//	// the caller
//	hc := &http.Client{Transport: sqshttp.NewTransport(r, queueURL)}
//	res, err := hc.Get("http://orders/orders/42")
//
// A request travels as an SQS message whose body is a compact envelope
// (docs/wire.md, "HTTP over SQS"): the method, the URL's path and query,
// the Host, the headers and, when it fits, the body, with the caller's
// deadline; the response comes back the same way. A body that is not
// text SQS accepts (binary data, invalid UTF-8, control characters) is
// carried in base64; text is carried as it is. No message attribute is
// used per header, so a request keeps room for the requester's own
// attributes and tracing. Envelopes ride on the requester's and the
// responder's compression (docs/wire.md, "Compression"): a response, or
// each part of a streamed one, of 8 KiB or more travels gzipped to a
// caller that reads it, and requests too with the requester's
// CompressRequests.
//
// Each request is a session (requester.OpenSession), which lets bodies
// stream both ways and lets the caller stop the handler. A body of
// unknown length (an io.Pipe, a file without Content-Length), or one too
// large for the message, streams to the handler in parts as the client
// writes it, and the handler reads it as it arrives, while it writes its
// response if it likes (full duplex). A handler that flushes
// (http.Flusher) streams its response: the client's body returns each
// part as it arrives. Closing the response body early, or cancelling the
// request's context, cancels the handler's r.Context() within about one
// SQS round trip, and the responder drops the request rather than retry
// it.
//
// With a payload store on both sides (TransportOptions.PayloadStore,
// HandlerOptions.PayloadStore; the nested module s3payload has one on
// S3), a body of known length too large for one message goes through the
// store whole instead, up to 64 MiB, either way: fewer billed requests
// and faster than parts (docs/wire.md, "HTTP and gRPC over SQS"). The
// caller deletes the objects once it has the response (docs/s3.md).
//
// Sessions cost nothing until needed: the responder opens one when the
// handler first flushes or reads a streamed body, or once it has run for
// a fifth of a second, so a request with a small body whose handler
// answers at once costs the same calls as before sessions (a request and
// a reply; measured in docs/adapters.md). Opening one costs a control
// message from the responder, and the responder's first session creates
// a host queue for the messages callers stream to it.
//
// The request's context deadline is the call's timeout and bounds the
// handler, whose deadline is earlier by the reply's travel back
// (docs/wire.md, "Deadlines"); a request that expired before a responder received it is
// deleted unhandled. A request whose head (method, URL and headers) is
// too large for one message fails before any call (ErrTooLarge);
// transport failures wrap the requester's errors, so errors.Is(err,
// requester.ErrTimeout) holds for a timeout.
//
// Everything a responder gives its handlers applies: deduplication
// (responder.Options.Store), middleware, tracing with the oteltempq module (the
// traceparent travels in a message attribute, not in the envelope),
// retries into the dead-letter queue (for a handler that fails before its
// session opened; one that fails after aborts it). Trailers and HTTP/1
// upgrades (WebSockets) do not travel.
package sqshttp
