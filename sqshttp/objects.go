package sqshttp

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/tempqueues/tempqueues/internal/deflog"
	"github.com/tempqueues/tempqueues/internal/payload"
	"github.com/tempqueues/tempqueues/sqsapi"
)

// dropTimeout bounds the deletes of an exchange's objects, which run
// after the exchange's own context may have ended.
const dropTimeout = 30 * time.Second

// objects are the bodies one exchange put in, or read from, a payload
// store (TransportOptions.PayloadStore): a request body the handler
// reads, a response body the Transport reads. They are deleted together
// when the exchange ends, so that a handler run again (its reply lost)
// still finds the request's body.
type objects struct {
	ctx   context.Context // the exchange's: its values, not its end, go with the deletes
	store sqsapi.PayloadStore

	mu   sync.Mutex
	ptrs []payload.Pointer
}

// put puts a request body in the store under a key for deadline.
func (o *objects) put(ctx context.Context, body []byte, deadline time.Time) (payload.Pointer, error) {
	key := payload.NewKey(deadline)
	bucket, err := o.store.Put(ctx, key, body)
	if err != nil {
		return payload.Pointer{}, fmt.Errorf("putting the request body in TransportOptions.PayloadStore: %w", err)
	}
	p := payload.Pointer{Bucket: bucket, Key: key}
	o.add(p)
	return p, nil
}

// fetch reads the body of a response whose body is in the store into
// head.body.
func (o *objects) fetch(ctx context.Context, head *response) error {
	p := head.object
	if p.Key == "" {
		return nil
	}
	if o.store == nil { // the handler uses the store only for callers that said they read it
		return fmt.Errorf("%w: its body is in s3://%s/%s, and TransportOptions.PayloadStore is not set", ErrBadResponse, p.Bucket, p.Key)
	}
	o.add(p)
	b, err := o.store.Get(ctx, p.Bucket, p.Key)
	if err != nil {
		return fmt.Errorf("reading the response body from TransportOptions.PayloadStore: %w", err)
	}
	head.body = b
	return nil
}

func (o *objects) add(p payload.Pointer) {
	o.mu.Lock()
	o.ptrs = append(o.ptrs, p)
	o.mu.Unlock()
}

// drop deletes the objects; one whose delete fails is logged, and left to
// the bucket's lifecycle rule (docs/s3.md). A nil objects does nothing.
func (o *objects) drop() {
	if o == nil {
		return
	}
	o.mu.Lock()
	ptrs := o.ptrs
	o.ptrs = nil
	o.mu.Unlock()
	if len(ptrs) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(o.ctx), dropTimeout)
	defer cancel()
	for _, p := range ptrs {
		if err := o.store.Delete(ctx, p.Bucket, p.Key); err != nil {
			deflog.Or(nil).LogAttrs(ctx, slog.LevelWarn, "sqshttp: deleting a body from TransportOptions.PayloadStore failed; the bucket's lifecycle rule removes it",
				slog.String("bucket", p.Bucket), slog.String("key", p.Key), slog.Any("error", err))
		}
	}
}
