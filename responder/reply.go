package responder

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/url"

	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/internal/batch"
	"github.com/tempqueues/tempqueues/internal/wire"
	"github.com/tempqueues/tempqueues/sqsapi"
)

// Reply is the answer to a request: a message body and optional message
// attributes. The responder adds up to two attributes of its own (the
// virtual-queue routing name and the correlation id), which count against
// SQS's limit of 10, so a Reply carries at most 8.
type Reply struct {
	Body       string
	Attributes map[string]types.MessageAttributeValue
}

// clone returns a copy whose attribute map the caller may not share.
func (r *Reply) clone() *Reply {
	if r == nil {
		return nil
	}
	return &Reply{Body: r.Body, Attributes: maps.Clone(r.Attributes)}
}

// IsResponseMessageRequested reports whether msg asks for a reply, that is,
// carries a ResponseQueueUrl String attribute.
func IsResponseMessageRequested(msg types.Message) bool {
	u, ok := stringAttribute(msg, sqsapi.ResponseQueueURLAttribute)
	return ok && u != ""
}

const opSendResponse = "SendResponseMessage"

// SendResponseMessage sends reply to the queue named by the request's
// ResponseQueueUrl attribute, as the Java client does: a virtual queue URL
// "<host>#<name>" becomes a send to <host> with the String attribute
// __AmazonSQSVirtualQueuesClient.QueueName = <name>; any other URL gets a
// plain send. The reply also carries TempQueues.CorrelationId, set to the
// request's TempQueues.RequestId (or its MessageId when it has none). A
// reply to a FIFO queue (a URL ending in ".fifo" before any '#') has
// MessageGroupId set to the virtual queue's name (for a plain FIFO queue,
// the request id) and a new MessageDeduplicationId.
//
// Errors: ErrNoResponseRequested when the request has no ResponseQueueUrl;
// an *sqsapi.InvalidInputError (errors.Is ErrInvalidInput) for a malformed
// URL, an empty body, a reserved attribute name, too many attributes or an
// oversized reply, before any API call; ErrResponseQueueGone when the
// response queue no longer exists, which is logged and counted once and
// must not be retried; ErrClosed after Shutdown; otherwise the SDK's error,
// wrapped.
//
// Sends go through a coalescer: a lone reply is sent at once with
// SendMessageBatch, and concurrent replies to the same host queue share
// calls. If ctx ends first, SendResponseMessage returns ctx.Err() but the
// reply may still be sent.
func (r *Responder) SendResponseMessage(ctx context.Context, request types.Message, reply *Reply) error {
	target, entry, err := buildReply(request, reply)
	if err != nil {
		return err
	}
	return r.send(ctx, request, target, entry)
}

func (r *Responder) send(ctx context.Context, request types.Message, target string, entry types.SendMessageBatchRequestEntry) error {
	_, err := r.sends.Do(ctx, target, entry)
	switch {
	case err == nil:
		r.stats.replied.Add(1)
		return nil
	case errors.Is(err, batch.ErrClosed):
		return ErrClosed
	}
	var gone *types.QueueDoesNotExist
	if errors.As(err, &gone) {
		r.stats.repliesDropped.Add(1)
		u, _ := stringAttribute(request, sqsapi.ResponseQueueURLAttribute)
		r.log.LogAttrs(ctx, slog.LevelWarn, "responder: dropping reply to a response queue that no longer exists",
			slog.String("response_queue_url", u), slog.String("correlation_id", requestID(request)))
		return fmt.Errorf("%w: %s: %w", ErrResponseQueueGone, u, err)
	}
	r.stats.replyErrors.Add(1)
	return fmt.Errorf("responder: sending reply to %s: %w", target, err)
}

// buildReply validates a reply to request and returns the real queue URL to
// send it to and the entry to send. It makes no call.
func buildReply(request types.Message, reply *Reply) (string, types.SendMessageBatchRequestEntry, error) {
	var entry types.SendMessageBatchRequestEntry
	u, ok := stringAttribute(request, sqsapi.ResponseQueueURLAttribute)
	if !ok || u == "" {
		return "", entry, ErrNoResponseRequested
	}
	if reply == nil {
		return "", entry, wire.Invalid(opSendResponse, "reply", "nil reply")
	}
	if reply.Body == "" {
		// SQS rejects empty bodies; saying so here names the culprit.
		return "", entry, wire.Invalid(opSendResponse, "Body", "reply body is empty (SQS requires at least one character)")
	}
	for _, name := range []string{sqsapi.VirtualQueueNameAttribute, sqsapi.CorrelationIDAttribute} {
		if _, taken := reply.Attributes[name]; taken {
			return "", entry, wire.Invalid(opSendResponse, "MessageAttributes", "attribute %q is set by the responder", name)
		}
	}
	target, name, err := responseTarget(u)
	if err != nil {
		return "", entry, err
	}
	extra := 1 // the correlation id
	if name != "" {
		extra++ // the routing name
	}
	if err := wire.CheckMessageAttributes(opSendResponse, reply.Attributes, extra); err != nil {
		return "", entry, err
	}
	if err := wire.CheckMessageText(opSendResponse, &reply.Body, reply.Attributes); err != nil {
		return "", entry, err
	}
	attrs := make(map[string]types.MessageAttributeValue, len(reply.Attributes)+extra)
	maps.Copy(attrs, reply.Attributes)
	attrs[sqsapi.CorrelationIDAttribute] = wire.StringAttribute(requestID(request))
	if name != "" {
		attrs[sqsapi.VirtualQueueNameAttribute] = wire.StringAttribute(name)
	}
	body := reply.Body
	if err := wire.CheckMessageSize(opSendResponse, &body, attrs); err != nil {
		return "", entry, err
	}
	entry.MessageBody = &body
	entry.MessageAttributes = attrs
	if wire.IsFIFOURL(target) {
		entry.MessageGroupId, entry.MessageDeduplicationId = fifoReplyIDs(name, requestID(request))
	}
	return target, entry, nil
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
