package requester

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/internal/hostq"
	"github.com/tempqueues/tempqueues/internal/payload"
	"github.com/tempqueues/tempqueues/internal/wire"
	"github.com/tempqueues/tempqueues/sqsapi"
)

// objectDeleteTimeout bounds the delete of a payload's object.
const objectDeleteTimeout = 30 * time.Second

// fetchReply finishes the call with the reply m points to in
// Options.PayloadStore (docs/wire.md, "Payloads in S3"), and deletes the
// object once read: a reply goes to one requester, which has it now.
func (c *Call) fetchReply(m types.Message) {
	ctx := c.waitCtx
	if ctx == nil {
		ctx = context.Background()
	}
	out, p, _, err := payload.Fetch(ctx, c.r.opts.PayloadStore, m)
	// The object goes after the caller has its reply: its delete (an S3
	// round trip) stays off the call's latency.
	defer c.r.dropObject(&p)
	if err != nil {
		c.r.failed.Add(1)
		c.finish(nil, badResponse(c.requestID, err))
		return
	}
	c.decoded(out)
}

// dropObject deletes the object p names from Options.PayloadStore, if p
// is set, logging a failure: the bucket's lifecycle rule removes what is
// left (docs/s3.md).
func (r *Requester) dropObject(p *payload.Pointer) {
	if p == nil || r.opts.PayloadStore == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), objectDeleteTimeout)
	defer cancel()
	if err := r.opts.PayloadStore.Delete(ctx, p.Bucket, p.Key); err != nil {
		r.log.Warn("requester: deleting a payload's object failed; the bucket's lifecycle rule removes it",
			slog.String("bucket", p.Bucket), slog.String("key", p.Key), slog.Any("error", err))
	}
}

// orphan settles a reply no pending call takes: deleted, as the host
// does by default, and the object of its payload, if it points to one in
// Options.PayloadStore, with it: nobody else will read it.
func (r *Requester) orphan(_ context.Context, _, _ string, m types.Message) hostq.OrphanAction {
	if p, ok := payload.ParsePointer(m); ok && r.opts.PayloadStore != nil {
		r.background(func() { r.dropObject(&p) })
	}
	return hostq.Delete
}

// background runs f on a goroutine of its own that Close waits for.
func (r *Requester) background(f func()) {
	r.payloadWork.Add(1)
	go func() {
		defer r.payloadWork.Done()
		f()
	}()
}

// onPart takes a message the host routed to the call (on a poller
// goroutine; the host deletes it afterwards) and reports whether more are
// expected: a reply too large for one message comes in parts, which the
// call joins (docs/wire.md, "Replies in parts"); any other reply, or an
// error, finishes the call as onReply does.
func (c *Call) onPart(m types.Message, err error) bool {
	if err != nil {
		c.onReply(m, err)
		return false
	}
	if ctl, isControl, ok := wire.ControlOf(m); isControl {
		if ok && ctl.Verb == wire.ControlAbort {
			// The responder's reply cannot travel, even in parts: the
			// call fails now rather than at its deadline.
			c.r.failed.Add(1)
			c.finish(nil, badResponse(c.requestID, fmt.Errorf("the responder could not send its reply: %s", ctl.Reason)))
		}
		// Any other control message is for a session, not a call.
		return !ok || ctl.Verb != wire.ControlAbort
	}
	pos, ok := wire.StreamOf(m)
	if !ok {
		c.onReply(m, nil)
		return false
	}
	part, _, err := payload.Decode(m)
	if err == nil && pos.Mark == wire.MarkEnd {
		err = fmt.Errorf("%w: an end mark among a reply's parts", payload.ErrCorrupt)
	}
	c.mu.Lock()
	if c.finished {
		c.mu.Unlock()
		return false
	}
	complete := false
	if err == nil && pos.Run != c.run {
		// Another run of the handler (the request was delivered again):
		// its parts replace those of the run before, which failed to send
		// them all and sends no more; any of that run's that straggle in
		// are ignored.
		if c.join != nil {
			if c.gone == nil {
				c.gone = make(map[string]bool, 1)
			}
			c.gone[c.run] = true
		}
		if c.gone[pos.Run] {
			c.mu.Unlock()
			return true
		}
		c.join, c.last, c.run = nil, nil, pos.Run
	}
	if err == nil {
		if c.join == nil {
			c.join = new(payload.Joiner)
		}
		complete, err = c.join.Add(pos.Seq, pos.Mark == wire.MarkFinal, aws.ToString(part.Body))
		if pos.Mark == wire.MarkFinal {
			c.last = &part // its attributes are the reply's
		}
	}
	var reply types.Message
	if complete {
		reply = *c.last
		reply.Body = aws.String(c.join.Body())
		attrs := make(map[string]types.MessageAttributeValue, len(reply.MessageAttributes))
		for k, v := range reply.MessageAttributes {
			if k != sqsapi.StreamAttribute {
				attrs[k] = v
			}
		}
		reply.MessageAttributes = attrs
	}
	c.mu.Unlock()
	switch {
	case err != nil:
		c.r.failed.Add(1)
		c.finish(nil, badResponse(c.requestID, err))
		return false
	case complete:
		c.r.replied.Add(1)
		c.finish(&reply, nil)
		return false
	}
	return true
}
