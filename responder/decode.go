package responder

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/tempqueues/tempqueues/internal/payload"
	"github.com/tempqueues/tempqueues/sqsapi"
)

// decode is the stage that gives the stages inside it, and the handler,
// the request as its requester sent it: a body that travelled compressed
// in TempQueues.Body is inflated, and the attributes of compression are
// left out, the requester's offer of compressed replies kept for the
// reply (docs/wire.md, "Compression"). A request whose compressed body
// does not decompress, or would inflate past 64 MiB, can never be
// handled: like a request whose reply is refused, it is deleted
// unanswered, dropped as "malformed" and logged, rather than retried
// until it reaches the dead-letter queue. Its caller times out.
func decode(ctx context.Context, x *exchange, next step) action {
	m, p, pointed, err := payload.Fetch(x.cctx, x.s.r.opts.PayloadStore, x.req.Message)
	if err != nil {
		// No store, a store out of reach, or an object gone: the request
		// fails, is retried as Options.BackoffBase says, and its queue's redrive
		// policy dead-letters it if it keeps failing.
		x.log.Error("responder: the request's payload cannot be read from its store", slog.Any("error", err))
		return fail(fmt.Errorf("responder: request %s: %w", x.req.ID, err))
	}
	if pointed {
		x.req.Message = m
		store, log := x.s.r.opts.PayloadStore, x.log
		x.d.AfterDelete(func() { deleteObject(store, p, log) })
	}
	parts := payload.AcceptsParts(x.req.Message.MessageAttributes) && !isStreamRequest(x.req.Message)
	m, accept, err := payload.Decode(x.req.Message)
	if err != nil {
		x.s.r.dropped(ctx, x, reasonMalformed)
		v := x.req.Message.MessageAttributes[payload.BodyAttribute]
		x.log.Warn("responder: request deleted unhandled: its compressed body cannot be read",
			slog.Any("error", err), slog.String("data_type", aws.ToString(v.DataType)), slog.Int("compressed_bytes", len(v.BinaryValue)))
		return action{kind: actDelete}
	}
	x.req.Message, x.req.accept, x.req.parts = m, accept && !x.s.r.opts.DisableCompression, parts
	return next(ctx, x)
}

// deleteObject deletes a request's payload from store, once the request
// is answered and deleted; a failure is logged, and the bucket's
// lifecycle rule removes the object (docs/s3.md).
func deleteObject(store sqsapi.PayloadStore, p payload.Pointer, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := store.Delete(ctx, p.Bucket, p.Key); err != nil {
		log.Warn("responder: deleting the request's payload failed; the bucket's lifecycle rule removes it",
			slog.String("bucket", p.Bucket), slog.String("key", p.Key), slog.Any("error", err))
	}
}
