package sqshttp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/internal/payload"
	"github.com/tempqueues/tempqueues/requester"
	"github.com/tempqueues/tempqueues/sqsapi"
)

// TransportOptions configure a Transport.
type TransportOptions struct {
	// DisableStreaming sends each request with
	// requester.SendMessageAndGetResponse instead of in a session: the
	// handler's response then always comes back in one message, a
	// handler's Flush does nothing, the request's body must fit in the
	// request's message as it is sent, compressed with the requester's
	// CompressRequests when that pays (ErrTooLarge otherwise), and a
	// cancelled request
	// does not reach its handler. It saves the session's attribute; it is
	// for responders that are not sqshttp handlers reading the envelope
	// themselves.
	DisableStreaming bool
	// Timeout bounds requests whose context has no deadline, and then
	// bounds the handler too; default 30 s (the requester's default),
	// negative for none: the call then waits under the requester's
	// Options.Timeout, and the handler runs without a deadline (a
	// streaming handler until it returns on its own).
	Timeout time.Duration
	// MessageAttributes, if set, returns message attributes to send with a
	// request (routing or tenant information for middleware on the
	// responder). They count against SQS's 10, with the requester's own.
	MessageAttributes func(*http.Request) map[string]types.MessageAttributeValue
	// PayloadStore, if set, carries request bodies too large for the
	// request's message through the store (the nested module s3payload
	// has one on S3): a body whose length is known, up to 64 MiB, is put
	// there whole and the handler reads it from its own
	// HandlerOptions.PayloadStore, instead of being streamed in parts; a
	// body of unknown length, or larger, still streams. It also tells the
	// handler that this caller reads a response too large for one message
	// from the store. Each exchange's objects are deleted when its
	// response body is closed, or when RoundTrip fails (docs/s3.md).
	// nil (the default): large bodies stream in parts both ways.
	PayloadStore sqsapi.PayloadStore
}

// Transport is an http.RoundTripper that sends each request through a
// requester.Requester to a request queue served by Handler, and returns
// the handler's response. It is safe for concurrent use.
type Transport struct {
	r        *requester.Requester
	queueURL string
	opts     TransportOptions
}

var _ http.RoundTripper = (*Transport)(nil)

// NewTransport returns a Transport that sends requests to queueURL with r.
// A nil requester or an empty queue URL makes every RoundTrip fail with an
// *sqsapi.InvalidInputError, before any call.
func NewTransport(r *requester.Requester, queueURL string, optFns ...func(*TransportOptions)) *Transport {
	t := &Transport{r: r, queueURL: queueURL, opts: TransportOptions{Timeout: defaultTimeout}}
	for _, fn := range optFns {
		fn(&t.opts)
	}
	if t.opts.Timeout == 0 {
		t.opts.Timeout = defaultTimeout
	}
	return t
}

const opRoundTrip = "sqshttp.Transport.RoundTrip"

// defaultTimeout bounds requests without a deadline: the requester's own
// default, which the handler then knows of.
const defaultTimeout = 30 * time.Second

// RoundTrip sends req's method, URL path and query, Host, headers and body
// and waits for the response under req's context: its deadline (or
// TransportOptions.Timeout without one) is the call's timeout and bounds
// the handler. The URL's scheme and host pick nothing: every
// request goes to the Transport's queue.
//
// A body of known length that fits travels in the request's message;
// one too large for it goes to TransportOptions.PayloadStore when set,
// up to 64 MiB. One of unknown length (ContentLength 0 or -1 with a Body
// other than http.NoBody), or too large for the message otherwise, is
// streamed to the handler
// as it is read, each Read a part (up to 765 KiB), on the request's
// session (requester.OpenSession), while RoundTrip waits for the
// response: the handler reads it as it arrives and may answer before it
// has all of it, as a full-duplex HTTP handler does. The body is closed
// once it is read, or when the exchange ends first.
//
// A response whose handler flushed (http.Flusher) arrives in parts: the
// body returns each part as it comes. Closing the body early, or the
// request's context ending, cancels the handler's context (r.Context())
// within about one SQS round trip, and the responder drops the request
// instead of retrying it. The body's reads end with the context's error,
// or an error matching requester.ErrTimeout at the deadline.
//
// Errors (wrapped, so errors.Is and errors.As see through them): an
// *sqsapi.InvalidInputError for bad input, before any call (a nil
// requester, an empty queue URL, an invalid header), also matching
// ErrTooLarge when the request's head does not fit in one message;
// requester.ErrTimeout; sqsapi.ErrClosed; requester.ErrSessionAborted
// when the handler failed (a panic) after its session opened (Handler);
// the SDK's error when the queue cannot be reached; ErrBadResponse when
// the reply is no sqshttp response; the request body's own error when
// reading it fails, and an *sqsapi.InvalidInputError when its length is
// not its ContentLength. The response body's reads may end with the same
// errors.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.roundTrip(req)
	if err != nil {
		return nil, fmt.Errorf("sqshttp: %s %s via %s: %w", req.Method, req.URL.RequestURI(), t.queueURL, err)
	}
	return resp, nil
}

// ErrBadResponse is matched by the error of a request whose reply is not
// an sqshttp response envelope (the queue is served by something other than
// Handler).
var ErrBadResponse = errors.New("sqshttp: the reply is not an sqshttp response")

func (t *Transport) roundTrip(req *http.Request) (*http.Response, error) {
	env, up, err := t.envelope(req)
	if err != nil {
		closeBody(req)
		return nil, err
	}
	ctx := req.Context()
	cancel := context.CancelFunc(func() {})
	if _, ok := ctx.Deadline(); !ok && t.opts.Timeout > 0 {
		ctx, cancel = context.WithTimeout(ctx, t.opts.Timeout)
	}
	env.deadline, _ = ctx.Deadline()
	objs := &objects{ctx: ctx, store: t.opts.PayloadStore}
	if env.offload {
		// The body goes to the store once its key can carry the deadline.
		p, err := objs.put(ctx, env.body, env.deadline)
		if err != nil {
			cancel()
			return nil, err
		}
		env.object, env.body = p, nil
	}
	resp, err := t.send(ctx, req, env, up, objs)
	switch {
	case err != nil:
		objs.drop()
		cancel()
	case resp.ContentLength >= 0:
		cancel() // the response is complete
	default:
		resp.Body.(*streamBody).cancel = cancel
	}
	return resp, err
}

// envelope checks req and builds its envelope (all but the deadline), and
// says how its body travels: in the envelope, read and closed here, or
// streamed in parts by the upload returned (nil when none). It makes no
// call; on an error, the caller closes the body.
func (t *Transport) envelope(req *http.Request) (*request, *upload, error) {
	switch {
	case t.r == nil:
		return nil, nil, &sqsapi.InvalidInputError{Op: opRoundTrip, Param: "requester", Reason: "nil"}
	case t.queueURL == "":
		return nil, nil, &sqsapi.InvalidInputError{Op: opRoundTrip, Param: "queueURL", Reason: "empty"}
	case req.URL == nil:
		return nil, nil, &sqsapi.InvalidInputError{Op: opRoundTrip, Param: "URL", Reason: "nil"}
	}
	store := t.opts.PayloadStore
	env := &request{method: req.Method, uri: req.URL.RequestURI(), header: req.Header, host: req.Host, length: -1, store: store != nil}
	if env.method == "" {
		env.method = http.MethodGet
	}
	if env.host == "" {
		env.host = req.URL.Host
	}
	// The head must fit in the message with room for the body's marks:
	// it is all the message carries when the body streams.
	head, err := env.encode()
	if err != nil {
		return nil, nil, &sqsapi.InvalidInputError{Op: opRoundTrip, Param: "request", Reason: err.Error()}
	}
	if n := len(head) + len(" +") + 20; n > maxEnvelope {
		return nil, nil, tooLarge(opRoundTrip, "header", n)
	}
	if req.Body == nil || req.Body == http.NoBody {
		return env, nil, nil
	}
	known := req.ContentLength > 0 // 0 with a Body is net/http's "unknown"
	if store != nil && known && req.ContentLength > maxEnvelope && req.ContentLength <= payload.MaxPayload {
		// Through the store: fewer billed requests than parts, and
		// faster (docs/wire.md, "HTTP and gRPC over SQS").
		body, err := readBody(req, req.ContentLength)
		if err != nil {
			return nil, nil, err
		}
		env.body, env.offload = body, true
		return env, nil, nil
	}
	if !t.opts.DisableStreaming && (!known || req.ContentLength > maxEnvelope) {
		// Streamed as it is read: the handler need not wait for the end,
		// and nothing is held in memory.
		env.parts = true
		if known {
			env.length = req.ContentLength
		}
		return env, &upload{body: req.Body, length: env.length}, nil
	}
	// Not streamed, a body too large for the message may still fit
	// compressed (requester.Options.CompressRequests): the requester
	// checks the size of what it sends, and its error is ErrTooLarge's
	// (send). Past what a compressed body may inflate to, it cannot.
	maxBody := int64(maxEnvelope)
	if t.opts.DisableStreaming {
		maxBody = payload.MaxInflated
	}
	if req.ContentLength > maxBody {
		return nil, nil, tooLarge(opRoundTrip, "body", int(min(req.ContentLength, 1<<31-1))) // streaming is disabled
	}
	limit := maxBody
	if known {
		limit = req.ContentLength
	}
	body, err := readBody(req, limit)
	if err != nil {
		return nil, nil, err
	}
	if int64(len(body)) > maxBody {
		return nil, nil, tooLarge(opRoundTrip, "body", len(body)) // streaming is disabled
	}
	if n := len(head) + encodedLen(bodyMark(body), body); n > maxEnvelope {
		if store != nil && len(body) <= payload.MaxPayload {
			env.body, env.offload = body, true
			return env, nil, nil
		}
		if t.opts.DisableStreaming {
			env.body = body // the requester's check decides, on what it sends
			return env, nil, nil
		}
		// Base64 made it too large: it goes in parts, from memory.
		env.parts, env.length = true, int64(len(body))
		return env, &upload{body: io.NopCloser(bytes.NewReader(body)), length: env.length}, nil
	}
	env.body = body
	return env, nil, nil
}

// readBody reads req's body whole, up to one byte past limit (its
// ContentLength when known, which it must match), and closes it.
func readBody(req *http.Request, limit int64) ([]byte, error) {
	body, err := io.ReadAll(io.LimitReader(req.Body, limit+1))
	if err != nil {
		return nil, fmt.Errorf("reading the request body: %w", err)
	}
	if req.ContentLength > 0 && int64(len(body)) != req.ContentLength {
		return nil, bodyLengthError(req.ContentLength, int64(len(body)))
	}
	closeBody(req)
	return body, nil
}

// bodyLengthError is the error of a body whose length is not the one
// its request declared (net/http's transport refuses it too).
func bodyLengthError(declared, got int64) error {
	return &sqsapi.InvalidInputError{Op: opRoundTrip, Param: "Body", Reason: fmt.Sprintf("ContentLength=%d with Body length %d", declared, got)}
}

// closeBody closes req's body, as a RoundTripper must even on errors.
func closeBody(req *http.Request) {
	if req.Body != nil {
		_ = req.Body.Close()
	}
}

// send sends the request under ctx and returns the response once its first
// part arrived; up, if set, streams the body meanwhile.
func (t *Transport) send(ctx context.Context, req *http.Request, env *request, up *upload, objs *objects) (*http.Response, error) {
	msg, err := env.encode()
	if err != nil { // checked by envelope
		up.stop()
		return nil, &sqsapi.InvalidInputError{Op: opRoundTrip, Param: "request", Reason: err.Error()}
	}
	in := &sqs.SendMessageInput{QueueUrl: aws.String(t.queueURL), MessageBody: aws.String(msg)}
	if t.opts.MessageAttributes != nil {
		in.MessageAttributes = t.opts.MessageAttributes(req)
	}
	if t.opts.DisableStreaming {
		m, err := t.r.SendMessageAndGetResponse(ctx, in)
		var ie *sqsapi.InvalidInputError
		if errors.As(err, &ie) && ie.Param == "MessageBody" {
			// Too large, compressed or not.
			return nil, fmt.Errorf("%w: %w", ErrTooLarge, err)
		}
		if err != nil {
			return nil, err
		}
		head, err := decodeResponse(aws.ToString(m.Body))
		if err != nil || head.more {
			return nil, fmt.Errorf("%w: %v", ErrBadResponse, err)
		}
		if err := objs.fetch(ctx, head); err != nil {
			return nil, err
		}
		return newResponse(req, head, &wholeBody{Reader: bytes.NewReader(head.body), objs: objs}), nil
	}
	// Every request is a session, so that its caller can stop its handler.
	// The responder opens the session only when the handler streams, reads
	// a streamed body or has run for a moment: a request answered at once
	// costs what a reply stream costs.
	s, err := t.r.OpenSession(ctx, in)
	if err != nil {
		up.stop()
		return nil, err
	}
	up.start(ctx, s)
	fail := func(err error) (*http.Response, error) {
		s.Close()
		if uerr := up.stop(); uerr != nil {
			return nil, uerr // the body failed first: why the session ended
		}
		return nil, err
	}
	// Next waits under no deadline of its own: the stream ends with its
	// context, with an error matching requester.ErrTimeout at the deadline.
	m, err := s.Next(context.Background())
	if err != nil {
		if errors.Is(err, io.EOF) {
			err = fmt.Errorf("%w: the handler sent no response", ErrBadResponse)
		}
		return fail(err)
	}
	head, err := decodeResponse(aws.ToString(m.Body))
	if err != nil {
		return fail(fmt.Errorf("%w: %v", ErrBadResponse, err))
	}
	if !head.more {
		// The whole response: the stream ends here (Next returns io.EOF
		// at once and releases it), and the handler has read what it
		// wanted of the body.
		if _, err := s.Next(context.Background()); !errors.Is(err, io.EOF) {
			s.Close()
		}
		up.stop()
		if err := objs.fetch(ctx, head); err != nil {
			return nil, err
		}
		return newResponse(req, head, &wholeBody{Reader: bytes.NewReader(head.body), objs: objs}), nil
	}
	return newResponse(req, head, &streamBody{s: s.Stream, up: up, buf: head.body, objs: objs}), nil
}

// wholeBody is the body of a response that came whole: Close deletes the
// exchange's objects from the payload store.
type wholeBody struct {
	*bytes.Reader
	objs *objects
}

func (b *wholeBody) Close() error {
	b.objs.drop()
	return nil
}

func newResponse(req *http.Request, head *response, body io.ReadCloser) *http.Response {
	resp := &http.Response{
		Status:        strconv.Itoa(head.status) + " " + http.StatusText(head.status),
		StatusCode:    head.status,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        head.header,
		Body:          body,
		ContentLength: -1,
		Request:       req,
	}
	if !head.more {
		resp.ContentLength = int64(len(head.body))
	}
	return resp
}

// streamBody is the body of a streamed response: the parts of a reply
// stream, read as they arrive.
type streamBody struct {
	s      *requester.Stream
	up     *upload            // the request body's, or nil
	objs   *objects           // the exchange's objects in the payload store
	cancel context.CancelFunc // ends the default timeout's context, once the stream ended

	mu     sync.Mutex // one Read at a time; Close may come from anywhere
	buf    []byte
	err    error // sticky: the stream's end or failure
	closed bool
}

func (b *streamBody) Read(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for len(b.buf) == 0 {
		if b.err != nil {
			return 0, b.err
		}
		m, err := b.s.Next(context.Background()) // the stream ends with its context
		if err != nil {
			if errors.Is(err, sqsapi.ErrClosed) && b.closed {
				err = errBodyClosed
			}
			b.err = err
			if uerr := b.end(); uerr != nil && !errors.Is(err, io.EOF) {
				b.err = uerr // the request body failed first: why the stream ended
			}
			continue
		}
		part, err := decodePart(aws.ToString(m.Body))
		if err != nil {
			b.err = fmt.Errorf("%w: %v", ErrBadResponse, err)
			b.end()
			continue
		}
		b.buf = part
	}
	n := copy(p, b.buf)
	b.buf = b.buf[n:]
	return n, nil
}

// end stops the stream (the handler is told, unless it returned), the
// request body's upload and the context, and returns the upload's error.
func (b *streamBody) end() error {
	b.s.Close()
	err := b.up.stop()
	b.objs.drop()
	if b.cancel != nil {
		b.cancel()
	}
	return err
}

var errBodyClosed = errors.New("sqshttp: read on closed response body")

// Close stops the stream: parts still on their way are deleted when they
// arrive (the requester's late replies), and the handler's context is
// cancelled.
func (b *streamBody) Close() error {
	b.end() // before the lock: it wakes a Read waiting in Next
	b.mu.Lock()
	b.closed = true
	b.err = errBodyClosed
	b.buf = nil
	b.mu.Unlock()
	return nil
}
