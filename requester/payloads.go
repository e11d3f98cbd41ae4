package requester

import (
	"context"
	"log/slog"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/internal/hostq"
	"github.com/tempqueues/tempqueues/internal/payload"
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
	if err != nil {
		c.r.failed.Add(1)
		c.finish(nil, badResponse(c.requestID, err))
		if c.r.opts.PayloadStore != nil {
			c.r.dropObject(&p)
		}
		return
	}
	c.r.dropObject(&p)
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
