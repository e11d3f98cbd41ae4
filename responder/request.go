package responder

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/internal/callback"
	"github.com/tempqueues/tempqueues/sqsapi"
)

// Request is a request received by Serve.
type Request struct {
	// Message is the SQS message as received, with all its message
	// attributes and system attributes (ApproximateReceiveCount,
	// SentTimestamp, ...), but as its sender meant it: a body that
	// travelled compressed is its Body, inflated, and the attributes of
	// compression (TempQueues.Body, TempQueues.Accept) are left out;
	// MD5OfBody is still SQS's, of the placeholder body that travelled.
	Message types.Message
	// QueueURL is the request queue it was received from.
	QueueURL string
	// ID is the request id: the TempQueues.RequestId attribute set by the
	// requester, or the MessageId when the sender set none (a Java
	// requester). It is the deduplication key.
	ID string
	// ReceiveCount is SQS's ApproximateReceiveCount: 1 on first delivery.
	ReceiveCount int

	deadline time.Time    // the caller's (sqsapi.DeadlineAttribute); zero when none
	runUntil time.Time    // the handler's, from deadline (handlerDeadline); zero when none
	stream   *replyStream // set by Serve when the requester takes a stream
	session  *session     // set by Serve when the requester streams its request too
	inner    *innerCtx    // with Options.Observer or Propagator: the handler's context
	accept   bool         // replies travel compressed when that pays: the requester offered it (payload.AcceptAttribute) and the responder compresses
	parts    bool         // the requester joins a reply sent in parts (payload.AcceptAttribute)
}

// innerCtx keeps the context the handler ran under, inside all
// middleware, for Options.Propagator and the Observer's Reply events. A lock, since a middleware may leave
// its inner handler running on a goroutine of its own when it returns.
type innerCtx struct {
	mu  sync.Mutex
	ctx context.Context
}

func (c *innerCtx) set(ctx context.Context) {
	c.mu.Lock()
	c.ctx = ctx
	c.mu.Unlock()
}

// get returns the handler's context, or def when no handler ran (a
// middleware answered).
func (c *innerCtx) get(def context.Context) context.Context {
	if c == nil {
		return def
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ctx == nil {
		return def
	}
	return c.ctx
}

// Body returns the message body.
func (r *Request) Body() string { return aws.ToString(r.Message.Body) }

// Attribute returns the string value of the message attribute name.
func (r *Request) Attribute(name string) (string, bool) {
	return stringAttribute(r.Message, name)
}

// ResponseRequested reports whether the sender waits for a reply.
func (r *Request) ResponseRequested() bool { return responseRequested(r.Message) }

// CompressedReplies reports whether the replies to the request travel
// compressed when that pays (docs/wire.md, "Compression"): its requester
// offered it and Options.DisableCompression is not set. SQS's 1 MiB then
// applies to a reply compressed, so an adapter whose reply would not fit
// as it is (sqsgrpc) checks its compressed size instead.
func (r *Request) CompressedReplies() bool { return r.accept }

func newRequest(queueURL string, m types.Message) *Request {
	n, _ := strconv.Atoi(m.Attributes[string(types.MessageSystemAttributeNameApproximateReceiveCount)])
	return &Request{Message: m, QueueURL: queueURL, ID: requestID(m), ReceiveCount: max(n, 1)}
}

// requestID is the id a reply correlates with and deduplication keys on.
func requestID(m types.Message) string {
	if id, ok := stringAttribute(m, sqsapi.RequestIDAttribute); ok && id != "" {
		return id
	}
	return aws.ToString(m.MessageId)
}

func stringAttribute(m types.Message, name string) (string, bool) {
	v, ok := m.MessageAttributes[name]
	if !ok || v.StringValue == nil {
		return "", false
	}
	return *v.StringValue, true
}

// Handler answers requests. HandleRequest runs once per delivery (unless an
// idempotency Store says the request was answered already); it should
// return when ctx is cancelled. A nil error with a non-nil Reply answers a
// request that asked for one; the Reply is ignored for fire-and-forget
// requests, and a nil Reply sends nothing. An error (or a panic) leaves the
// request for redelivery according to Options.BackoffBase.
type Handler interface {
	HandleRequest(ctx context.Context, req *Request) (*Reply, error)
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, req *Request) (*Reply, error)

// HandleRequest calls f(ctx, req).
func (f HandlerFunc) HandleRequest(ctx context.Context, req *Request) (*Reply, error) {
	return f(ctx, req)
}

// view returns a copy of r for an Observer: its message a deep copy, so
// that a change to it reaches neither the reply nor the handler, and no
// stream or session, so that Send and Recv on it fail instead of acting.
func (r *Request) view() *Request {
	return &Request{Message: *callback.CopyMessage(&r.Message), QueueURL: r.QueueURL, ID: r.ID, ReceiveCount: r.ReceiveCount,
		deadline: r.deadline, runUntil: r.runUntil, accept: r.accept, parts: r.parts}
}
