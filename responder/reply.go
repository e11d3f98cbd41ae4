package responder

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/url"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/internal/batch"
	"github.com/tempqueues/tempqueues/internal/callback"
	"github.com/tempqueues/tempqueues/internal/payload"
	"github.com/tempqueues/tempqueues/internal/wire"
	"github.com/tempqueues/tempqueues/observe"
	"github.com/tempqueues/tempqueues/sqsapi"
)

// Reply is the answer to a request: a message body and optional message
// attributes. The responder adds up to two attributes of its own (the
// virtual-queue routing name and the correlation id), which count against
// SQS's limit of 10, so a Reply carries at most 8.
type Reply struct {
	Body       string
	Attributes map[string]types.MessageAttributeValue
	// SystemAttributes are the reply's message system attributes. SQS
	// takes one, AWSTraceHeader (a non-empty String, checked before any
	// call), which counts neither against the 10 attributes nor against
	// the size: tracing puts the reply's span context there
	// (Options.Propagator).
	SystemAttributes map[string]types.MessageSystemAttributeValue
}

// clone returns a copy whose attribute maps the caller may not share.
func (r *Reply) clone() *Reply {
	if r == nil {
		return nil
	}
	return &Reply{Body: r.Body, Attributes: maps.Clone(r.Attributes), SystemAttributes: maps.Clone(r.SystemAttributes)}
}

// responseRequested reports whether msg asks for a reply, that is,
// carries a ResponseQueueUrl String attribute.
func responseRequested(msg types.Message) bool {
	u, ok := stringAttribute(msg, sqsapi.ResponseQueueURLAttribute)
	return ok && u != ""
}

const opSendResponse = "responder.SendResponseMessage"

// SendResponseMessage sends reply to the queue named by the request's
// ResponseQueueUrl attribute, where queueURL is the queue request was
// received from. The response queue must be one Options.AllowReplyTo
// allows (by default, a requester's host queue with the default prefix
// next to queueURL); for any other, SendResponseMessage sends nothing and
// returns ErrReplyRefused. Otherwise it
// sends as the Java client does: a virtual queue URL
// "<host>#<name>" becomes a send to <host> with the String attribute
// __AmazonSQSVirtualQueuesClient.QueueName = <name>; any other URL gets a
// plain send. The reply also carries TempQueues.CorrelationId, set to the
// request's TempQueues.RequestId (or its MessageId when it has none). A
// reply to a FIFO queue (a URL ending in ".fifo" before any '#') has
// MessageGroupId set to the virtual queue's name (for a plain FIFO queue,
// the request id) and a new MessageDeduplicationId. A reply to a request
// that offers gzip (TempQueues.Accept) travels compressed when that pays
// (docs/wire.md, "Compression"), and SQS's size limit applies to what is
// sent; a reply too large even compressed goes through
// Options.PayloadStore, when set (docs/wire.md, "Payloads in S3"), and
// otherwise, to a requester that joins parts (a tempqueues one waiting
// for one reply), in parts of up to 1 MiB, up to 64 MiB
// (docs/wire.md, "Replies in parts"). A loop of your own gets requests as SQS delivers them: one from
// a requester with CompressRequests carries its body in TempQueues.Body,
// which only Serve and Process inflate.
//
// Errors: ErrNoResponseRequested when the request has no ResponseQueueUrl;
// ErrReplyRefused when it names a queue replies may not go to;
// an *sqsapi.InvalidInputError (errors.Is ErrInvalidInput) for a malformed
// URL, an empty body, a reserved attribute name, too many attributes or an
// oversized reply, before any API call; ErrResponseQueueGone when the
// response queue no longer exists, which is logged and must not be
// retried; sqsapi.ErrClosed after Shutdown; otherwise the SDK's error,
// wrapped.
//
// Sends go through a coalescer: a lone reply is sent at once with
// SendMessageBatch, and concurrent replies to the same host queue share
// calls. The send is bounded by Options.ReplyTimeout as well as ctx. If
// either ends first, SendResponseMessage returns context.DeadlineExceeded
// or ctx.Err(), but the reply may still be sent.
func (r *Responder) SendResponseMessage(ctx context.Context, queueURL string, request types.Message, reply *Reply) error {
	if _, _, err := r.replyTarget(ctx, queueURL, request); err != nil {
		return err
	}
	compress := !r.opts.DisableCompression && payload.Accepts(request.MessageAttributes)
	parts := payload.AcceptsParts(request.MessageAttributes) && !isStreamRequest(request)
	target, entry, before, err := r.buildReply(ctx, request, reply, nil, compress, parts)
	if err != nil {
		if parts && errors.Is(err, errOverJoin) {
			if terr := r.tellTooLarge(ctx, request, err); terr != nil {
				r.log.Warn("responder: telling the requester that its reply is too large failed", slog.Any("error", terr))
			}
		}
		return err
	}
	if before != nil {
		return r.sendParts(ctx, request, target, before, entry)
	}
	return r.send(ctx, request, target, entry)
}

// isStreamRequest reports whether request takes a stream of replies or
// opens a session: its replies are the stream's messages, not parts.
func isStreamRequest(request types.Message) bool {
	_, ok := request.MessageAttributes[sqsapi.StreamAttribute]
	return ok
}

// send sends a reply under Options.ReplyTimeout, its own deadline, within
// ctx's.
func (r *Responder) send(ctx context.Context, request types.Message, target string, entry types.SendMessageBatchRequestEntry) error {
	ctx, cancel := context.WithTimeout(ctx, r.opts.ReplyTimeout)
	defer cancel()
	_, err := r.sends.Do(ctx, target, entry)
	return r.replyResult(ctx, request, target, err)
}

// onReply runs Options.Propagator on a copy of reply, about to be sent to
// the request's response queue, whose attribute maps (never nil) it may
// add to, and tells Options.Observer of the reply under the context the
// propagator returned. It returns the copy (reply itself without a
// propagator) and a function that reports the send's result (a no-op
// without an observer). ctx loses its cancellation: the hooks' work
// outlives the handler.
func (r *Responder) onReply(ctx context.Context, req *Request, reply *Reply) (*Reply, func(error)) {
	obs, prop := r.opts.Observer, r.opts.Propagator
	if obs == nil && prop == nil || reply == nil {
		return reply, noDone
	}
	ctx = context.WithoutCancel(ctx)
	to, _ := req.Attribute(sqsapi.ResponseQueueURLAttribute)
	e := observe.Event{Kind: observe.Reply, Queue: to, RequestID: req.ID, Detail: req.view(),
		Message: &types.Message{Body: &reply.Body, MessageAttributes: reply.Attributes}}
	if prop != nil {
		cp := &Reply{Body: reply.Body, Attributes: make(map[string]types.MessageAttributeValue, len(reply.Attributes)+1),
			SystemAttributes: make(map[string]types.MessageSystemAttributeValue, len(reply.SystemAttributes)+1)}
		maps.Copy(cp.Attributes, reply.Attributes)
		maps.Copy(cp.SystemAttributes, reply.SystemAttributes)
		ctx = callback.Inject(ctx, r.log, prop, e, cp.Attributes, cp.SystemAttributes, replyRoom(req, to, reply))
		reply = cp
		e.Message = &types.Message{Body: &cp.Body, MessageAttributes: cp.Attributes}
	}
	if obs == nil {
		return reply, noDone
	}
	done := callback.Observe(ctx, r.log, obs, e)
	return reply, func(err error) { done(nil, err) }
}

// replyRoom is how many message attributes a reply to req, bound for
// the response queue to, has left after those the responder adds: the
// correlation id, the routing name for a virtual queue, and a stream's
// sequence number and an origin when the request asks for them.
func replyRoom(req *Request, to string, reply *Reply) int {
	room := sqsapi.MaxMessageAttributes - len(reply.Attributes) - 1
	if wire.IsVirtualQueueURL(to) {
		room--
	}
	for _, name := range []string{sqsapi.StreamAttribute, sqsapi.OriginAttribute} {
		if _, ok := req.Message.MessageAttributes[name]; ok {
			room--
		}
	}
	return room
}

func noDone(error) {}

// replyResult counts and logs the outcome of a reply's send and returns
// the error its sender sees.
func (r *Responder) replyResult(ctx context.Context, request types.Message, target string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, batch.ErrClosed):
		return sqsapi.ErrClosed
	}
	var gone *types.QueueDoesNotExist
	if errors.As(err, &gone) {
		u, _ := stringAttribute(request, sqsapi.ResponseQueueURLAttribute)
		r.log.LogAttrs(ctx, slog.LevelWarn, "responder: dropping reply to a response queue that no longer exists",
			slog.String("response_queue_url", u), slog.String("correlation_id", requestID(request)))
		return fmt.Errorf("%w: %s: %w", ErrResponseQueueGone, u, err)
	}
	r.stats.errors.Add(1)
	return fmt.Errorf("%s: sending the reply to %s: %w", opSendResponse, target, err)
}

// buildReply validates a reply to request and returns the real queue URL to
// send it to and the entry to send. more are attributes of the
// responder's own (a stream's sequence number, an origin), checked against
// SQS's limits with the rest. With compress (the request advertised
// compressed replies, and Options.DisableCompression is off), a body worth
// it travels compressed in TempQueues.Body; the size is checked on what is
// sent. It makes no call.
func buildReply(request types.Message, reply *Reply, more map[string]string, compress bool) (string, types.SendMessageBatchRequestEntry, error) {
	target, entry, _, err := buildLargeReply(request, reply, more, compress, 0)
	return target, entry, err
}

// buildLargeReply builds a reply as buildReply does; with a limit (0:
// none), a reply larger than limit as it would be sent (payload.Limit) is
// returned plain, without its carrier, over true: it goes to
// Options.PayloadStore or in parts (Responder.buildReply).
func buildLargeReply(request types.Message, reply *Reply, more map[string]string, compress bool, limit int) (string, types.SendMessageBatchRequestEntry, bool, error) {
	var entry types.SendMessageBatchRequestEntry
	u, ok := stringAttribute(request, sqsapi.ResponseQueueURLAttribute)
	if !ok || u == "" {
		return "", entry, false, ErrNoResponseRequested
	}
	if reply == nil {
		return "", entry, false, wire.Invalid(opSendResponse, "reply", "nil reply")
	}
	if reply.Body == "" {
		// SQS rejects empty bodies; saying so here names the culprit.
		return "", entry, false, wire.Invalid(opSendResponse, "Body", "reply body is empty (SQS requires at least one character)")
	}
	for _, name := range []string{sqsapi.VirtualQueueNameAttribute, sqsapi.CorrelationIDAttribute, payload.BodyAttribute, payload.AcceptAttribute} {
		if _, taken := reply.Attributes[name]; taken {
			return "", entry, false, wire.Invalid(opSendResponse, "MessageAttributes", "attribute %q is set by the responder", name)
		}
	}
	for name := range more {
		if _, taken := reply.Attributes[name]; taken {
			return "", entry, false, wire.Invalid(opSendResponse, "MessageAttributes", "attribute %q is set by the responder", name)
		}
	}
	target, name, err := responseTarget(u)
	if err != nil {
		return "", entry, false, err
	}
	extra := 1 + len(more) // the correlation id, and more
	if name != "" {
		extra++ // the routing name
	}
	if err := wire.CheckMessageAttributes(opSendResponse, reply.Attributes, extra); err != nil {
		return "", entry, false, err
	}
	if err := wire.CheckMessageText(opSendResponse, &reply.Body, reply.Attributes); err != nil {
		return "", entry, false, err
	}
	if err := wire.CheckSystemAttributes(opSendResponse, reply.SystemAttributes); err != nil {
		return "", entry, false, err
	}
	attrs := make(map[string]types.MessageAttributeValue, len(reply.Attributes)+extra+1)
	maps.Copy(attrs, reply.Attributes)
	attrs[sqsapi.CorrelationIDAttribute] = wire.StringAttribute(requestID(request))
	if name != "" {
		attrs[sqsapi.VirtualQueueNameAttribute] = wire.StringAttribute(name)
	}
	for k, v := range more {
		attrs[k] = wire.StringAttribute(v)
	}
	body := reply.Body
	if compress {
		body, _ = payload.EncodeWithin(body, attrs, sqsapi.MaxMessageAttributes-len(attrs), cmp.Or(limit, sqsapi.MaxMessageSize))
	}
	over := false
	if err := wire.CheckMessageSize(opSendResponse, &body, attrs); err != nil || limit > 0 && wire.MessageSize(&body, attrs) > limit {
		if limit == 0 {
			return "", entry, false, err
		}
		delete(attrs, payload.BodyAttribute)
		body, over = reply.Body, true
	}
	entry.MessageBody = &body
	entry.MessageAttributes = attrs
	if len(reply.SystemAttributes) > 0 {
		entry.MessageSystemAttributes = maps.Clone(reply.SystemAttributes)
	}
	if wire.IsFIFOURL(target) {
		entry.MessageGroupId, entry.MessageDeduplicationId = fifoReplyIDs(name, requestID(request))
	}
	return target, entry, over, nil
}

// buildReply builds a reply as buildReply does, and sends a body too
// large for one message even compressed another way: through
// Options.PayloadStore, if set, the reply then carrying its pointer
// (docs/wire.md, "Payloads in S3"; the object's key carries the request's
// deadline, and the requester deletes the object once it has read it);
// or, with parts (the requester offered to join them), in parts, which it
// returns before the last (docs/wire.md, "Replies in parts"). The store
// wins when both would do: a reply in S3 costs a few calls and no
// 64 KiB chunks, where parts cost a billed request per 64 KiB
// (docs/limits.md). A reply in parts over payload.MaxJoined is an error
// matching errOverJoin.
func (r *Responder) buildReply(ctx context.Context, request types.Message, reply *Reply, more map[string]string, compress, parts bool) (string, types.SendMessageBatchRequestEntry, []types.SendMessageBatchRequestEntry, error) {
	store := r.opts.PayloadStore
	parts = parts && store == nil && more[sqsapi.StreamAttribute] == ""
	limit := 0 // no other way: the reply fits in a message, or fails
	if store != nil || parts {
		limit = payload.Limit(store)
	}
	target, entry, over, err := buildLargeReply(request, reply, more, compress, limit)
	if err != nil || !over {
		return target, entry, nil, err
	}
	if parts {
		before, last, err := buildParts(entry, compress)
		return target, last, before, err
	}
	if len(reply.Body) > payload.MaxPayload {
		return "", entry, nil, wire.Invalid(opSendResponse, "Body", "reply body of %d bytes exceeds the maximum payload of %d MiB", len(reply.Body), payload.MaxPayload>>20)
	}
	if len(entry.MessageAttributes)+1 > sqsapi.MaxMessageAttributes {
		return "", entry, nil, wire.Invalid(opSendResponse, "MessageAttributes", "no place left among SQS's %d attributes for %s, which a reply sent through Options.PayloadStore needs", sqsapi.MaxMessageAttributes, payload.SizeAttribute)
	}
	if wire.MessageSize(aws.String(""), entry.MessageAttributes)+payload.PointerBytes > sqsapi.MaxMessageSize {
		return "", entry, nil, wire.Invalid(opSendResponse, "MessageAttributes", "attributes too large to leave room for a payload pointer")
	}
	deadline, _, _ := wire.Deadline(request)
	p, err := payload.Offload(ctx, store, *entry.MessageBody, entry.MessageAttributes, deadline)
	if err != nil {
		return "", entry, nil, fmt.Errorf("%s: %w", opSendResponse, err)
	}
	entry.MessageBody = aws.String(p.String())
	return target, entry, nil, nil
}

// compresses reports whether req's replies may travel compressed: it
// advertised them, and Options.DisableCompression is off.
func (r *Responder) compresses(req *Request) bool {
	return req.accept && !r.opts.DisableCompression
}

// responseTarget returns the queue a reply to responseURL is sent to and,
// for a virtual queue URL, the virtual queue's name.
func responseTarget(responseURL string) (target, name string, err error) {
	if wire.IsVirtualQueueURL(responseURL) {
		host, name, err := wire.ParseVirtualQueueURL(responseURL)
		if err != nil {
			var ie *sqsapi.InvalidInputError
			if errors.As(err, &ie) {
				return "", "", wire.Invalid(opSendResponse, "ResponseQueueUrl", "%s", ie.Reason)
			}
			return "", "", err
		}
		return host, name, nil
	}
	if p, err := url.Parse(responseURL); err != nil || p.Scheme == "" || p.Host == "" {
		return "", "", wire.Invalid(opSendResponse, "ResponseQueueUrl", "%q is not an absolute queue URL", responseURL)
	}
	return responseURL, "", nil
}

// streamAttrsBudget is what a stream's message may add to a reply's
// attributes once built: the correlation id, the routing attribute, the
// stream position with its credit and the origin, at their longest.
const streamAttrsBudget = len(sqsapi.CorrelationIDAttribute) + len("String") + 200 +
	len(sqsapi.VirtualQueueNameAttribute) + len("String") + wire.MaxQueueNameLength +
	len(sqsapi.StreamAttribute) + len("String") + 64 +
	len(sqsapi.OriginAttribute) + len("String") + 1024

// offloadStreamed returns msg, a message of a reply stream, as it can
// go: one too large for a message even compressed, with
// Options.PayloadStore set, put in the store, and returned as a copy
// whose body is the pointer, with payload.SizeAttribute (docs/wire.md,
// "Payloads in S3"); the requester reads it and deletes the object. The
// pointer, if any, is returned too, for the caller to delete the object
// if the message fails to go. It makes the store's call outside any lock
// of the stream's, before the message is numbered.
func (r *Responder) offloadStreamed(ctx context.Context, request types.Message, msg *Reply, more map[string]string, compress bool) (*Reply, *payload.Pointer, error) {
	store := r.opts.PayloadStore
	if store == nil || msg == nil || len(msg.Body)+wire.MessageSize(aws.String(""), msg.Attributes)+streamAttrsBudget <= payload.Limit(store) {
		return msg, nil, nil
	}
	_, entry, over, err := buildLargeReply(request, msg, more, compress, payload.Limit(store))
	if err != nil || !over {
		return msg, nil, err
	}
	if len(entry.MessageAttributes)+1 > sqsapi.MaxMessageAttributes {
		return nil, nil, wire.Invalid(opSendResponse, "MessageAttributes", "no place left among SQS's %d attributes for %s, which a message sent through Options.PayloadStore needs", sqsapi.MaxMessageAttributes, payload.SizeAttribute)
	}
	attrs := maps.Clone(msg.Attributes)
	if attrs == nil {
		attrs = make(map[string]types.MessageAttributeValue, 1)
	}
	deadline, _, _ := wire.Deadline(request)
	p, err := payload.Offload(ctx, store, msg.Body, attrs, deadline)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", opSendResponse, err)
	}
	return &Reply{Body: p.String(), Attributes: attrs, SystemAttributes: msg.SystemAttributes}, &p, nil
}

// dropObject deletes the object p names from Options.PayloadStore, if p
// is set: its message did not go.
func (r *Responder) dropObject(p *payload.Pointer) {
	if p != nil && r.opts.PayloadStore != nil {
		deleteObject(r.opts.PayloadStore, *p, r.log)
	}
}

// dropUnread deletes, off the caller's goroutine, the objects in
// Options.PayloadStore that msgs point to: a session's messages its
// handler read, or never will. Shutdown waits for the deletes.
func (r *Responder) dropUnread(msgs []types.Message) {
	if r.opts.PayloadStore == nil {
		return
	}
	for _, m := range msgs {
		if p, ok := payload.ParsePointer(m); ok {
			r.payloadDeletes.Add(1)
			go func() {
				defer r.payloadDeletes.Done()
				r.dropObject(&p)
			}()
		}
	}
}
