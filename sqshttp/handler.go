package sqshttp

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/tempqueues/tempqueues/internal/deflog"
	"github.com/tempqueues/tempqueues/internal/payload"
	"github.com/tempqueues/tempqueues/responder"
	"github.com/tempqueues/tempqueues/sqsapi"
)

// HandlerOptions configure Handler.
type HandlerOptions struct {
	// Logger receives operational warnings (malformed and expired
	// requests); nil means slog.Default(), as
	// docs/architecture.md#conventions says.
	Logger *slog.Logger
	// PayloadStore, if set, reads the request bodies a Transport put in
	// its TransportOptions.PayloadStore (the same store, or one on the
	// same bucket), and carries a response too large for one message, even
	// compressed, up to 64 MiB, for a caller whose Transport has a store:
	// the response is then held whole until the handler returns (or
	// flushes) and goes to the store, instead of streaming in parts. The
	// caller deletes both objects once it has read the response. nil (the
	// default): a request whose body is in a store fails, so that its
	// queue's redrive policy dead-letters it (errors match
	// sqsapi.ErrNoPayloadStore), and large responses stream in parts.
	PayloadStore sqsapi.PayloadStore
}

// Handler returns a responder.Handler that serves h: each request's
// envelope becomes an *http.Request (method, URL path and query, Host,
// headers, body; RemoteAddr "sqs", RequestURI set, as a server sets them),
// and what h writes becomes the reply.
//
// The request context's deadline is the caller's less the reply's travel
// back, so that a handler using all its time still answers in time. A request
// whose deadline passed before it was received is not handled: nobody
// waits for it, so the responder deletes it without a reply (docs/wire.md,
// "Deadlines", says how the two hosts' clocks are assumed to agree). A
// request whose message carries no deadline attribute is bounded by the
// deadline in its envelope instead, and deleted unhandled, logged at
// Info, once that has passed.
//
// When h calls Flush (http.Flusher) and the caller takes a stream (a
// Transport does unless DisableStreaming), the status, the header and
// what was written so far go out as the stream's first message, and each
// later Flush sends what was written since; a response larger than one
// message is streamed in parts even without Flush, or goes whole to
// HandlerOptions.PayloadStore when the caller's Transport reads one (one
// too large even compressed; docs/s3.md). When the caller takes
// one reply, Flush does nothing and the whole response goes in the final
// reply; one too large for a message, even compressed when the caller
// reads compressed replies (docs/wire.md, "Compression"), is replaced by
// a 413 response saying so. A request that is no sqshttp envelope gets a
// 400 response.
//
// A request whose caller streams its body (one of unknown length, or too
// large for the request's message) gives h a Body that returns the parts
// as they arrive (ContentLength -1 unless the caller knew it). h may read
// it while it writes and flushes the response: the two travel apart, and
// http.ResponseController's EnableFullDuplex succeeds.
//
// A request from a Transport is a session (requester.OpenSession), which
// the responder opens when h first flushes or reads a streamed body, or
// once it has run for a fifth of a second; a handler that answers sooner
// costs no more than a plain request. Once it is open, a caller that goes
// away (it closes the response body, its request's context ends) cancels
// r.Context() within about one SQS round trip, with cause
// responder.ErrCallerGone, and the responder drops the request (Stats
// count it in Dropped, not Failed) whatever h returns.
//
// A nil h serves http.DefaultServeMux, as http.Server does. A panic in
// h, or a failed send of a streamed part, fails the request. Before its
// session opened, that is as for any responder handler: the request is
// received again, or goes to the dead-letter queue. Once it is open, the
// session is aborted instead, since a body it streamed cannot be read
// again: the caller's RoundTrip or body Read fails with an error matching
// requester.ErrSessionAborted, and the request is dropped.
func Handler(h http.Handler, optFns ...func(*HandlerOptions)) responder.Handler {
	if h == nil {
		h = http.DefaultServeMux // as http.Server does
	}
	o := HandlerOptions{}
	for _, fn := range optFns {
		fn(&o)
	}
	o.Logger = deflog.Or(o.Logger)
	return &handler{h: h, opts: o}
}

type handler struct {
	h    http.Handler
	opts HandlerOptions
}

func (h *handler) HandleRequest(ctx context.Context, req *responder.Request) (*responder.Reply, error) {
	env, err := decodeRequest(req.Body())
	if err != nil {
		h.opts.Logger.LogAttrs(ctx, slog.LevelWarn, "sqshttp: malformed request", slog.String("request_id", req.ID), slog.Any("error", err))
		return errorReply(http.StatusBadRequest, "sqshttp: "+err.Error()), nil
	}
	if _, bounded := ctx.Deadline(); !bounded && !env.deadline.IsZero() {
		// The responder found no TempQueues.Deadline to bound the handler
		// by (a sender without it, or a request with no room for it): the
		// envelope's deadline does.
		if now := time.Now(); !now.Before(env.deadline) {
			h.opts.Logger.LogAttrs(ctx, slog.LevelInfo, "sqshttp: request expired before it was handled; deleted",
				slog.String("request_id", req.ID), slog.String("method", env.method), slog.String("uri", env.uri),
				slog.Duration("late_by", now.Sub(env.deadline)))
			return nil, nil
		}
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, env.deadline)
		defer cancel()
	}
	if p := env.object; p.Key != "" {
		// The caller put the body in its store. Failing the request
		// (no store here, the object gone) lets its queue's redrive
		// policy dead-letter it rather than answer without the body.
		if h.opts.PayloadStore == nil {
			return nil, fmt.Errorf("sqshttp: the request body is in s3://%s/%s: %w", p.Bucket, p.Key, sqsapi.ErrNoPayloadStore)
		}
		if env.body, err = h.opts.PayloadStore.Get(ctx, p.Bucket, p.Key); err != nil {
			return nil, fmt.Errorf("sqshttp: reading the request body from HandlerOptions.PayloadStore: %w", err)
		}
	}
	hr, err := http.NewRequestWithContext(ctx, env.method, env.uri, bytes.NewReader(env.body))
	if err != nil {
		return errorReply(http.StatusBadRequest, "sqshttp: "+err.Error()), nil
	}
	hr.RequestURI = env.uri
	hr.Host = env.host
	hr.Header = env.header
	hr.ContentLength = int64(len(env.body))
	hr.RemoteAddr = "sqs"
	if env.parts {
		// The caller streams the body on the request's session: the
		// handler reads each part as it arrives, while it writes.
		body := newPartsBody(ctx, req, env)
		defer body.Close() // as http.Server closes it
		hr.Body, hr.GetBody, hr.ContentLength = body, nil, env.length
	}
	_, stream := req.Attribute(sqsapi.StreamAttribute)
	w := &responseWriter{ctx: ctx, req: req, header: make(http.Header), stream: stream && req.ResponseRequested(), deadline: env.deadline}
	if env.store {
		w.store = h.opts.PayloadStore
	}
	h.h.ServeHTTP(w, hr)
	return w.finish()
}

// partsBody is the body of a request whose caller streams it: the
// envelope's own body, then the parts the caller sends on the request's
// session, read with Request.Recv as they arrive, until its half-close.
type partsBody struct {
	req    *responder.Request
	ctx    context.Context // the handler's; Close cancels it
	stop   context.CancelFunc
	length int64 // declared, -1 when unknown

	mu   sync.Mutex // one Read at a time; Close may come from anywhere
	buf  []byte
	read int64 // bytes returned so far
	err  error // sticky: the end, or why reading failed
}

func newPartsBody(ctx context.Context, req *responder.Request, env *request) *partsBody {
	ctx, stop := context.WithCancel(ctx)
	return &partsBody{req: req, ctx: ctx, stop: stop, length: env.length, buf: env.body, read: int64(len(env.body))}
}

func (b *partsBody) Read(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for len(b.buf) == 0 {
		if b.err != nil {
			return 0, b.err
		}
		m, err := b.req.Recv(b.ctx)
		switch {
		case errors.Is(err, io.EOF):
			b.err = io.EOF
			if b.length >= 0 && b.read != b.length {
				b.err = fmt.Errorf("sqshttp: the request body ended after %d of its %d bytes: %w", b.read, b.length, io.ErrUnexpectedEOF)
			}
		case err != nil:
			// The caller went away (its cancel cancelled the handler's
			// context too), or the handler's context ended.
			b.err = fmt.Errorf("sqshttp: reading the request body: %w", err)
		default:
			part, derr := decodePart(aws.ToString(m.Body))
			switch {
			case derr != nil:
				b.err = fmt.Errorf("sqshttp: malformed part of the request body: %w", derr)
			case b.length >= 0 && b.read+int64(len(part)) > b.length:
				b.err = fmt.Errorf("sqshttp: the request body is longer than the %d bytes it declared", b.length)
			default:
				b.buf = part
				b.read += int64(len(part))
			}
		}
	}
	n := copy(p, b.buf)
	b.buf = b.buf[n:]
	return n, nil
}

// Close ends reading: a Read waiting for a part returns, later ones get
// http.ErrBodyReadAfterClose. The caller's parts still coming are
// dropped when the handler returns.
func (b *partsBody) Close() error {
	b.stop() // before the lock: it wakes a Read waiting in Recv
	b.mu.Lock()
	b.err = http.ErrBodyReadAfterClose
	b.buf = nil
	b.mu.Unlock()
	return nil
}

// errorReply is a plain-text response of the adapter's own.
func errorReply(status int, msg string) *responder.Reply {
	b, _ := appendResponseHead(nil, status, encText, false, http.Header{"Content-Type": {"text/plain; charset=utf-8"}})
	return &responder.Reply{Body: string(appendEncoded(b, bodyMark([]byte(msg)), []byte(msg)))}
}

// responseWriter collects a handler's response; it sends the streamed
// parts on the handler's goroutine, in Flush and Write.
type responseWriter struct {
	ctx    context.Context
	req    *responder.Request
	header http.Header
	stream bool // the caller takes a stream

	status  int         // 0 until WriteHeader
	sent    http.Header // the header as of WriteHeader
	buf     []byte      // written, not sent
	started bool        // the first part went out
	err     error       // a failed send

	store    sqsapi.PayloadStore // for a response too large for one message, when the caller reads it; nil: none
	deadline time.Time           // the caller's, for the key of an object in store
}

var _ http.Flusher = (*responseWriter)(nil)

// EnableFullDuplex is what http.ResponseController's calls: a handler may
// always read the request body while it writes the response, since the
// two travel apart (the body's parts on the session, the response on the
// reply stream).
func (w *responseWriter) EnableFullDuplex() error { return nil }

func (w *responseWriter) Header() http.Header { return w.header }

func (w *responseWriter) WriteHeader(code int) {
	if w.status != 0 {
		return
	}
	if code < 100 || code > 999 {
		panic(fmt.Sprintf("sqshttp: invalid WriteHeader code %v", code))
	}
	if code < 200 {
		return // informational responses do not travel
	}
	w.status = code
	w.sent = w.header.Clone()
}

func (w *responseWriter) Write(p []byte) (int, error) {
	if w.err != nil {
		return 0, w.err
	}
	if w.status == 0 {
		if w.header.Get("Content-Type") == "" && len(p) > 0 {
			w.header.Set("Content-Type", http.DetectContentType(p))
		}
		w.WriteHeader(http.StatusOK)
	}
	w.buf = append(w.buf, p...)
	if w.stream && len(w.buf) > w.room() && !w.holds() {
		// Too large for one message: stream it in parts, all full but the
		// last, which stays for the next Flush or the final reply.
		w.drain()
		if w.err != nil {
			return 0, w.err
		}
	}
	return len(p), nil
}

// holds reports whether the response is held whole to go through the
// store when it ends: nothing was sent yet, and it is within what a
// store takes.
func (w *responseWriter) holds() bool {
	return w.store != nil && !w.started && len(w.buf) <= payload.MaxPayload
}

// drain sends what was written in parts, all full but the last, which
// stays for the next Flush or the final reply.
func (w *responseWriter) drain() {
	for len(w.buf) > w.room() && w.err == nil {
		w.sendPart(w.room())
	}
}

// room is how many raw bytes the next message can carry, encoded as
// base64 at worst.
func (w *responseWriter) room() int {
	n := maxEnvelope - 1
	if !w.started {
		b, _ := appendResponseHead(nil, w.status, encB64, true, w.sent)
		n -= len(b)
	}
	return max(n/4*3, 1)
}

// Flush sends what was written since the last one as the stream's next
// part, when the caller takes a stream.
func (w *responseWriter) Flush() {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	if !w.stream || w.err != nil || w.started && len(w.buf) == 0 {
		return
	}
	w.drain() // what a store held
	if w.err == nil {
		w.sendPart(len(w.buf))
	}
}

// sendPart sends the first n bytes written as the stream's next message.
func (w *responseWriter) sendPart(n int) {
	part := w.buf[:n]
	var b []byte
	if w.started {
		b = appendPart(nil, part)
	} else {
		mark := bodyMark(part)
		var err error
		if b, err = appendResponseHead(nil, w.status, mark, true, w.sent); err != nil {
			w.err = err
			return
		}
		b = appendEncoded(b, mark, part)
	}
	if err := w.req.Send(w.ctx, &responder.Reply{Body: string(b)}); err != nil {
		w.err = err
		return
	}
	w.started = true
	w.buf = w.buf[n:]
}

// finish returns the reply that ends the response.
func (w *responseWriter) finish() (*responder.Reply, error) {
	if w.err != nil {
		return nil, w.err
	}
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	if w.started {
		if len(w.buf) == 0 {
			return nil, nil // the stream's end mark ends the body
		}
		return &responder.Reply{Body: string(appendPart(nil, w.buf))}, nil
	}
	mark := bodyMark(w.buf)
	head, err := appendResponseHead(nil, w.status, mark, false, w.sent)
	if err != nil {
		return errorReply(http.StatusInternalServerError, "sqshttp: "+err.Error()), nil
	}
	n := len(head) + encodedLen(mark, w.buf)
	// A response too large for a message may fit compressed, which the
	// responder does for a caller that reads it (docs/wire.md,
	// "Compression"): the size that counts is the compressed one. A
	// large one that cannot is ruled out before it is encoded whole.
	if n > maxEnvelope && !(payload.CompressedReplies(w.ctx) && !compressesPast(maxEnvelope, func(zw io.Writer) error {
		if _, err := zw.Write(head); err != nil {
			return err
		}
		if mark == encText {
			_, err := zw.Write(w.buf)
			return err
		}
		enc := base64.NewEncoder(base64.StdEncoding, zw)
		if _, err := enc.Write(w.buf); err != nil {
			return err
		}
		return enc.Close()
	})) {
		return w.tooLarge(n)
	}
	body := string(appendEncoded(head, mark, w.buf))
	if n > maxEnvelope && !payload.Fits(body, reserve) {
		return w.tooLarge(n)
	}
	return &responder.Reply{Body: body}, nil
}

// tooLarge returns the reply of a response of n bytes encoded that does
// not fit in one message even compressed: through the store, or a 413.
func (w *responseWriter) tooLarge(n int) (*responder.Reply, error) {
	if w.store != nil && len(w.buf) <= payload.MaxPayload {
		return w.offload()
	}
	return errorReply(http.StatusRequestEntityTooLarge, fmt.Sprintf(
		"sqshttp: the response of %d bytes encoded does not fit in one SQS message (%d at most), even compressed if the caller reads that, and the caller takes one reply", n, maxEnvelope)), nil
}

// offload puts the response's body in the store and returns the reply
// that points to it. A failed put fails the request: it is received
// again, or dead-lettered.
func (w *responseWriter) offload() (*responder.Reply, error) {
	key := payload.NewKey(w.deadline)
	bucket, err := w.store.Put(w.ctx, key, w.buf)
	if err != nil {
		return nil, fmt.Errorf("sqshttp: putting the response body in HandlerOptions.PayloadStore: %w", err)
	}
	b, err := appendResponseHead(nil, w.status, encStore, false, w.sent)
	if err != nil {
		return errorReply(http.StatusInternalServerError, "sqshttp: "+err.Error()), nil
	}
	return &responder.Reply{Body: string(appendObject(b, payload.Pointer{Bucket: bucket, Key: key}))}, nil
}

// compressesPast reports whether what write writes, gzipped as the
// responder does it, takes more than limit bytes. It stops compressing
// there: a large body that cannot fit in a message costs a few
// milliseconds to rule out, not the compression of all of it.
func compressesPast(limit int, write func(io.Writer) error) bool {
	zw, _ := gzip.NewWriterLevel(&capped{left: limit}, payload.Level) // a valid level
	err := write(zw)
	if err == nil {
		err = zw.Close()
	}
	return err != nil
}

// capped is a writer that fails once more than left bytes were written.
type capped struct{ left int }

var errCapped = errors.New("capped")

func (c *capped) Write(p []byte) (int, error) {
	if c.left -= len(p); c.left < 0 {
		return 0, errCapped
	}
	return len(p), nil
}
