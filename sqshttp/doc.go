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
// A request travels as one SQS message whose body is a compact envelope
// (docs/wire.md, "HTTP over SQS"): the method, the URL's path and query,
// the Host, the headers and the body, with the caller's deadline; the
// response comes back the same way. A body that is not text SQS accepts
// (binary data, invalid UTF-8, control characters) is carried in base64;
// text is carried as it is. No message attribute is used per header, so a
// request keeps room for the requester's own attributes and tracing.
//
// The request's context deadline is the call's timeout and the handler's
// deadline; a request that expired before a responder received it is
// deleted unhandled. A handler that flushes (http.Flusher) streams its
// response through a reply stream: the client's body returns each part as
// it arrives, and closing the body stops the stream. Requests too large
// for one message fail before any call (ErrTooLarge); transport failures
// wrap the requester's errors, so errors.Is(err, requester.ErrTimeout)
// holds for a timeout.
//
// Everything a responder gives its handlers applies: deduplication
// (responder.Options.Store), middleware, tracing with the oteltempq module (the
// traceparent travels in a message attribute, not in the envelope), retries
// into the dead-letter queue. Trailers and HTTP/1 upgrades (WebSockets) do
// not travel.
package sqshttp
