package callback

import (
	"context"
	"log/slog"
	"maps"
	"slices"

	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/observe"
)

// Observe tells o (which may be nil) about e, with a copy of its message,
// a panic recovered and logged, and returns the done func to call when
// the observed call ends: never nil, safe in the same way, and given a
// copy of the reply, so that nothing the observer does reaches the wire
// or the caller.
func Observe(ctx context.Context, log *slog.Logger, o observe.Observer, e observe.Event) func(reply *types.Message, err error) {
	if o == nil {
		return noDone
	}
	e.Message = CopyMessage(e.Message)
	var done func(*types.Message, error)
	Run(log, "observer ("+e.Kind.String()+")", func() { done = o.Observe(ctx, e) })
	if done == nil {
		return noDone
	}
	return func(reply *types.Message, err error) {
		reply = CopyMessage(reply)
		Run(log, "observer's done ("+e.Kind.String()+")", func() { done(reply, err) })
	}
}

func noDone(*types.Message, error) {}

// Inject runs p (which may be nil) on an outgoing message's attribute
// maps, with a copy of e's message, a panic recovered and logged, and
// returns the context p returned (ctx when p is nil, panics or returns
// nil).
func Inject(ctx context.Context, log *slog.Logger, p observe.Propagator, e observe.Event, attrs map[string]types.MessageAttributeValue, sys map[string]types.MessageSystemAttributeValue, room int) context.Context {
	if p == nil {
		return ctx
	}
	e.Message = CopyMessage(e.Message)
	out := ctx
	Run(log, "propagator ("+e.Kind.String()+")", func() { out = p.Inject(ctx, e, attrs, sys, max(room, 0)) })
	if out == nil {
		return ctx
	}
	return out
}

// CopyMessage returns a deep copy of m (nil for nil): a change made
// through the copy, to a field, a map or a value an attribute points to,
// leaves m as it was.
func CopyMessage(m *types.Message) *types.Message {
	if m == nil {
		return nil
	}
	c := *m
	c.Body = copyString(m.Body)
	c.MD5OfBody = copyString(m.MD5OfBody)
	c.MD5OfMessageAttributes = copyString(m.MD5OfMessageAttributes)
	c.MessageId = copyString(m.MessageId)
	c.ReceiptHandle = copyString(m.ReceiptHandle)
	c.Attributes = maps.Clone(m.Attributes)
	if m.MessageAttributes != nil {
		c.MessageAttributes = make(map[string]types.MessageAttributeValue, len(m.MessageAttributes))
		for k, v := range m.MessageAttributes {
			c.MessageAttributes[k] = types.MessageAttributeValue{
				DataType:         copyString(v.DataType),
				StringValue:      copyString(v.StringValue),
				BinaryValue:      slices.Clone(v.BinaryValue),
				StringListValues: slices.Clone(v.StringListValues),
				BinaryListValues: cloneAll(v.BinaryListValues),
			}
		}
	}
	return &c
}

func copyString(p *string) *string {
	if p == nil {
		return nil
	}
	s := *p
	return &s
}

func cloneAll(bs [][]byte) [][]byte {
	if bs == nil {
		return nil
	}
	out := make([][]byte, len(bs))
	for i, b := range bs {
		out[i] = slices.Clone(b)
	}
	return out
}
