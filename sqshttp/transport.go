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

	"github.com/tempqueues/tempqueues/requester"
	"github.com/tempqueues/tempqueues/sqsapi"
)

// TransportOptions configure a Transport.
type TransportOptions struct {
	// DisableStreaming sends each request with
	// requester.SendMessageAndGetResponse instead of SendMessageAndStream:
	// the handler's response then always comes back in one message, and a
	// handler's Flush does nothing. Streaming costs no extra call; this is
	// for responders that are not sqshttp handlers reading the envelope
	// themselves, or to save the stream's attribute.
	DisableStreaming bool
	// Timeout bounds requests whose context has no deadline, and is then
	// the handler's deadline too; default 30 s (the requester's default),
	// negative for none: the call then waits under the requester's
	// Options.Timeout, and the handler runs without a deadline (a
	// streaming handler until it returns on its own).
	Timeout time.Duration
	// MessageAttributes, if set, returns message attributes to send with a
	// request (routing or tenant information for middleware on the
	// responder). They count against SQS's 10, with the requester's own.
	MessageAttributes func(*http.Request) map[string]types.MessageAttributeValue
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
// in one message and waits for the response under req's context: its
// deadline (or TransportOptions.Timeout without one) is the call's timeout
// and the handler's deadline. The URL's scheme and host pick
// nothing: every request goes to the Transport's queue.
//
// A response whose handler flushed (http.Flusher) arrives in parts: the
// body returns each part as it comes, and closing the body stops the
// stream. Its reads end with the context's error, or an error matching requester.ErrTimeout
// at the deadline.
//
// Errors (wrapped, so errors.Is and errors.As see through them): an
// *sqsapi.InvalidInputError for bad input, before any call (a nil
// requester, an empty queue URL, an invalid header), also matching
// ErrTooLarge when the request does not fit in one message;
// requester.ErrTimeout; requester.ErrClosed; the SDK's error when the
// queue cannot be reached; ErrBadResponse when the reply is no sqshttp
// response.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.roundTrip(req)
	if err != nil {
		return nil, fmt.Errorf("sqshttp: %s %s via %s: %w", req.Method, req.URL.RequestURI(), t.queueURL, err)
	}
	return resp, nil
}

// ErrBadResponse is matched by the error of a request whose reply is not
// an sqsapi response envelope (the queue is served by something other than
// Handler).
var ErrBadResponse = errors.New("sqshttp: the reply is not an sqshttp response")

func (t *Transport) roundTrip(req *http.Request) (*http.Response, error) {
	body, err := readBody(req)
	if err != nil {
		return nil, err
	}
	switch {
	case t.r == nil:
		return nil, &sqsapi.InvalidInputError{Op: opRoundTrip, Param: "requester", Reason: "nil"}
	case t.queueURL == "":
		return nil, &sqsapi.InvalidInputError{Op: opRoundTrip, Param: "queueURL", Reason: "empty"}
	case req.URL == nil:
		return nil, &sqsapi.InvalidInputError{Op: opRoundTrip, Param: "URL", Reason: "nil"}
	}
	ctx := req.Context()
	cancel := context.CancelFunc(func() {})
	if _, ok := ctx.Deadline(); !ok && t.opts.Timeout > 0 {
		ctx, cancel = context.WithTimeout(ctx, t.opts.Timeout)
	}
	resp, err := t.send(ctx, req, body)
	if err != nil || resp.ContentLength >= 0 {
		cancel() // the response is complete
	} else {
		resp.Body.(*streamBody).cancel = cancel
	}
	return resp, err
}

// send sends the request under ctx and returns the response once its first
// part arrived.
func (t *Transport) send(ctx context.Context, req *http.Request, body []byte) (*http.Response, error) {
	deadline, _ := ctx.Deadline()
	method := req.Method
	if method == "" {
		method = http.MethodGet
	}
	host := req.Host
	if host == "" {
		host = req.URL.Host
	}
	env, err := encodeRequest(method, req.URL.RequestURI(), deadline, req.Header, host, body)
	if err != nil {
		return nil, &sqsapi.InvalidInputError{Op: opRoundTrip, Param: "request", Reason: err.Error()}
	}
	if len(env) > maxEnvelope {
		param := "body"
		if len(env)-encodedLen(bodyMark(body), body) > maxEnvelope {
			param = "header"
		}
		return nil, tooLarge(opRoundTrip, param, len(env))
	}
	in := &sqs.SendMessageInput{QueueUrl: aws.String(t.queueURL), MessageBody: aws.String(env)}
	if t.opts.MessageAttributes != nil {
		in.MessageAttributes = t.opts.MessageAttributes(req)
	}
	if t.opts.DisableStreaming {
		m, err := t.r.SendMessageAndGetResponse(ctx, in)
		if err != nil {
			return nil, err
		}
		head, err := decodeResponse(aws.ToString(m.Body))
		if err != nil || head.more {
			return nil, fmt.Errorf("%w: %v", ErrBadResponse, err)
		}
		return newResponse(req, head, io.NopCloser(bytes.NewReader(head.body))), nil
	}
	s, err := t.r.SendMessageAndStream(ctx, in)
	if err != nil {
		return nil, err
	}
	// Next waits under no deadline of its own: the stream ends with its
	// context, with an error matching requester.ErrTimeout at the deadline.
	m, err := s.Next(context.Background())
	if err != nil {
		s.Close()
		if errors.Is(err, io.EOF) {
			err = fmt.Errorf("%w: the handler sent no response", ErrBadResponse)
		}
		return nil, err
	}
	head, err := decodeResponse(aws.ToString(m.Body))
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("%w: %v", ErrBadResponse, err)
	}
	if !head.more {
		// The whole response: the stream ends here (Next returns io.EOF
		// at once and releases it).
		if _, err := s.Next(context.Background()); !errors.Is(err, io.EOF) {
			s.Close()
		}
		return newResponse(req, head, io.NopCloser(bytes.NewReader(head.body))), nil
	}
	return newResponse(req, head, &streamBody{s: s, buf: head.body}), nil
}

// readBody reads and closes req's body, reading no more than fits in a
// message.
func readBody(req *http.Request) ([]byte, error) {
	if req.Body == nil || req.Body == http.NoBody {
		return nil, nil
	}
	defer req.Body.Close()
	body, err := io.ReadAll(io.LimitReader(req.Body, maxEnvelope+1))
	if err != nil {
		return nil, fmt.Errorf("reading the request body: %w", err)
	}
	if len(body) > maxEnvelope {
		return nil, tooLarge(opRoundTrip, "body", len(body))
	}
	return body, nil
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
			if errors.Is(err, requester.ErrClosed) && b.closed {
				err = errBodyClosed
			}
			b.err = err
			b.end()
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

// end stops the stream and releases its context.
func (b *streamBody) end() {
	b.s.Close()
	if b.cancel != nil {
		b.cancel()
	}
}

var errBodyClosed = errors.New("sqshttp: read on closed response body")

// Close stops the stream: parts still on their way are deleted when they
// arrive (the requester's late replies).
func (b *streamBody) Close() error {
	b.end() // before the lock: it wakes a Read waiting in Next
	b.mu.Lock()
	b.closed = true
	b.err = errBodyClosed
	b.buf = nil
	b.mu.Unlock()
	return nil
}
