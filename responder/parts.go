package responder

import (
	"context"
	"errors"
	"fmt"
	"maps"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/google/uuid"
	"golang.org/x/sync/errgroup"

	"github.com/tempqueues/tempqueues/internal/payload"
	"github.com/tempqueues/tempqueues/internal/wire"
	"github.com/tempqueues/tempqueues/sqsapi"
)

// errOverJoin is matched by the error of a reply too large to travel in
// parts (payload.MaxJoined): the responder tells the requester, which
// would otherwise wait for it until its deadline (tellTooLarge).
var errOverJoin = errors.New("over the largest reply that travels in parts")

// overJoinError is an invalid reply's error that also matches errOverJoin.
type overJoinError struct{ err error }

func (e overJoinError) Error() string        { return e.err.Error() }
func (e overJoinError) Unwrap() error        { return e.err }
func (e overJoinError) Is(target error) bool { return target == errOverJoin }

// partsInFlight bounds the parts of one reply whose sends are in flight:
// each part is a call of its own (SQS takes at most 1 MiB per batch call),
// and a few at once keep the network busy without holding every part's
// send.
const partsInFlight = 4

// maxPosBytes is the most a part's stream attribute value takes.
var maxPosBytes = len(wire.FormatStream(wire.StreamPos{Seq: payload.MaxParts, Mark: wire.MarkFinal, Run: newRun()}))

// newRun returns a new name for the run whose reply goes in parts.
func newRun() string { return uuid.NewString()[:8] }

// buildParts cuts the body of entry, a reply too large for one message
// even compressed, into the parts a requester that offered
// payload.PartsToken joins (docs/wire.md, "Replies in parts"): each part
// a message of the reply stream's numbering and named by the run, the
// last one marked final and carrying the reply's attributes; each part
// compressed on its own when compress and that pays. Pieces are cut by
// the plain body's size, so that each fits whatever compression makes of
// it: larger pieces would save messages but no billed request, since
// batches carry compressed parts several to a call. It returns the parts before the last, and
// the last. It makes no call.
func buildParts(entry types.SendMessageBatchRequestEntry, compress bool) ([]types.SendMessageBatchRequestEntry, types.SendMessageBatchRequestEntry, error) {
	body := aws.ToString(entry.MessageBody)
	if len(body) > payload.MaxJoined {
		return nil, entry, overJoinError{wire.Invalid(opSendResponse, "Body", "reply body of %d bytes is over the %d MiB a reply may have, in parts (docs/limits.md)", len(body), payload.MaxJoined>>20)}
	}
	attrs := entry.MessageAttributes
	if len(attrs)+1 > sqsapi.MaxMessageAttributes {
		return nil, entry, wire.Invalid(opSendResponse, "MessageAttributes", "no place left among SQS's %d attributes for %s, which a reply sent in parts needs", sqsapi.MaxMessageAttributes, sqsapi.StreamAttribute)
	}
	size := sqsapi.MaxMessageSize - wire.MessageSize(aws.String(""), attrs) - len(sqsapi.StreamAttribute) - len("String") - maxPosBytes
	if size < payload.MinPart {
		return nil, entry, wire.Invalid(opSendResponse, "MessageAttributes", "attributes too large to leave room for a reply in parts")
	}
	pieces := payload.Split(body, size)
	// The parts before the last carry what routes them and their number;
	// the correlation id too when the reply goes to a real queue, where it
	// is all that tells replies apart.
	lean := make(map[string]types.MessageAttributeValue, 2)
	_, virtual := attrs[sqsapi.VirtualQueueNameAttribute]
	for _, k := range []string{sqsapi.VirtualQueueNameAttribute, sqsapi.CorrelationIDAttribute} {
		if v, ok := attrs[k]; ok && (k != sqsapi.CorrelationIDAttribute || !virtual) {
			lean[k] = v
		}
	}
	parts := make([]types.SendMessageBatchRequestEntry, 0, len(pieces)-1)
	run := newRun()
	for i, piece := range pieces {
		last := i == len(pieces)-1
		pos := wire.StreamPos{Seq: i, Run: run}
		a := maps.Clone(lean)
		if last {
			pos.Mark = wire.MarkFinal
			a = maps.Clone(attrs)
		}
		a[sqsapi.StreamAttribute] = wire.StringAttribute(wire.FormatStream(pos))
		b := piece
		if compress {
			b, _ = payload.Encode(piece, a, sqsapi.MaxMessageAttributes-len(a))
		}
		e := types.SendMessageBatchRequestEntry{MessageBody: aws.String(b), MessageAttributes: a, MessageGroupId: entry.MessageGroupId}
		if entry.MessageDeduplicationId != nil {
			e.MessageDeduplicationId = aws.String(uuid.NewString()) // each part is a message of its own
		}
		if last {
			e.MessageSystemAttributes = entry.MessageSystemAttributes
			return parts, e, nil
		}
		parts = append(parts, e)
	}
	panic("unreachable") // Split returns at least one piece
}

// sendParts sends a reply's parts, then its last one, the parts a few at
// a time. It stops at the first failure, and once the request's caller
// has given up (its deadline passed: nobody joins the rest), with an
// error matching errCallerGone.
func (r *Responder) sendParts(ctx context.Context, request types.Message, target string, parts []types.SendMessageBatchRequestEntry, last types.SendMessageBatchRequestEntry) error {
	if d, ok, _ := wire.Deadline(request); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadlineCause(ctx, d, errCallerGone)
		defer cancel()
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(partsInFlight)
	for _, e := range parts {
		if gctx.Err() != nil {
			break
		}
		g.Go(func() error { return r.send(gctx, request, target, e) })
	}
	err := g.Wait()
	if err == nil {
		err = r.send(ctx, request, target, last)
	}
	if err != nil && errors.Is(context.Cause(ctx), errCallerGone) {
		return fmt.Errorf("responder: sending a reply in parts: %w", errCallerGone)
	}
	return err
}

// errCallerGone is matched by the error of a reply in parts whose
// caller's deadline passed before its last part went.
var errCallerGone = errors.New("the caller's deadline passed")

// tellTooLarge tells the requester of request, which offered to join
// parts, that its reply is too large to travel even so (err says why),
// rather than leave it waiting until its deadline: an abort, as a
// session's (docs/wire.md, "Replies in parts").
func (r *Responder) tellTooLarge(ctx context.Context, request types.Message, err error) error {
	c := wire.Control{Verb: wire.ControlAbort, Reason: wire.SafeText(err.Error(), maxAbortReason)}
	target, entry, berr := buildReply(request, &Reply{Body: c.Verb}, map[string]string{sqsapi.SessionAttribute: c.Format()}, false)
	if berr != nil {
		return berr
	}
	return r.send(ctx, request, target, entry)
}
