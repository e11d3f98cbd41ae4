package responder

import (
	"context"
	"log/slog"

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
	m, accept, err := payload.Decode(x.req.Message)
	if err != nil {
		x.s.r.dropped(ctx, x, reasonMalformed)
		v := x.req.Message.MessageAttributes[sqsapi.BodyAttribute]
		x.log.Warn("responder: request deleted unhandled: its compressed body cannot be read",
			slog.Any("error", err), slog.String("data_type", aws.ToString(v.DataType)), slog.Int("compressed_bytes", len(v.BinaryValue)))
		return action{kind: actDelete}
	}
	x.req.Message, x.req.accept = m, accept
	return next(ctx, x)
}
