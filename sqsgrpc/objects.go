package sqsgrpc

import (
	"compress/gzip"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/tempqueues/tempqueues/sqsapi"
)

// maxStored is the largest message sent through a payload store: what
// a store returns at most (s3payload.MaxObjectSize), and the largest
// payload the requester and the responder put.
const maxStored = 64 << 20

// keyPrefix starts the key of every object, as the requester's and the
// responder's: the lifecycle rule of docs/s3.md covers them.
const keyPrefix = "tempqueues/"

// dropTimeout bounds the deletes of a call's objects, which run after
// the call's context may have ended.
const dropTimeout = 30 * time.Second

// object names a message in a payload store.
type object struct{ bucket, key string }

// appendFrame appends o as a frame: "o <bucket> <key>", no line end.
func (o object) appendFrame(b []byte) []byte {
	b = append(b, frameObject, ' ')
	b = append(b, o.bucket...)
	b = append(b, ' ')
	return append(b, o.key...)
}

// parseObject parses what follows a frame's "o ".
func parseObject(s string) (object, error) {
	bucket, key, ok := strings.Cut(s, " ")
	if !ok || bucket == "" || key == "" || strings.ContainsAny(key, " \n") {
		return object{}, fmt.Errorf("malformed object %q", s)
	}
	return object{bucket: bucket, key: key}, nil
}

// newKey returns the key of a new object whose reader gives up at
// deadline: tempqueues/<Unix seconds, 0 for none>/<UUID>, the format of
// the requester's and the responder's keys (docs/wire.md, "Payloads in
// S3").
func newKey(deadline time.Time) string {
	var unix int64
	if !deadline.IsZero() {
		unix = deadline.Unix()
	}
	return keyPrefix + strconv.FormatInt(unix, 10) + "/" + uuid.NewString()
}

// put puts msg in store under a new key for deadline.
func put(ctx context.Context, store sqsapi.PayloadStore, msg []byte, deadline time.Time) (object, error) {
	key := newKey(deadline)
	bucket, err := store.Put(ctx, key, msg)
	if err != nil {
		return object{}, err
	}
	return object{bucket: bucket, key: key}, nil
}

// drop deletes objs from store; a failed delete is logged, and the
// bucket's lifecycle rule removes the object.
func drop(ctx context.Context, store sqsapi.PayloadStore, log *slog.Logger, objs ...object) {
	if len(objs) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), dropTimeout)
	defer cancel()
	for _, o := range objs {
		if err := store.Delete(ctx, o.bucket, o.key); err != nil {
			log.LogAttrs(ctx, slog.LevelWarn, "sqsgrpc: deleting a message from the payload store failed; the bucket's lifecycle rule removes it",
				slog.String("bucket", o.bucket), slog.String("key", o.key), slog.Any("error", err))
		}
	}
}

// read fills f's messages that are in store, deleting each once read
// when del (a reply's: it goes to one client).
func read(ctx context.Context, store sqsapi.PayloadStore, log *slog.Logger, f *frames, del bool) error {
	for i, o := range f.objects {
		if store == nil {
			return fmt.Errorf("the message is in s3://%s/%s: %w", o.bucket, o.key, sqsapi.ErrNoPayloadStore)
		}
		b, err := store.Get(ctx, o.bucket, o.key)
		if del {
			drop(ctx, store, log, o)
		}
		if err != nil {
			return fmt.Errorf("reading a message from the payload store: %w", err)
		}
		f.msgs[i] = b
	}
	return nil
}

// callObjects are the request messages one call put in its client's
// store, deleted when the call ends: the handler may read them until
// then (a unary request received again after its reply was lost).
type callObjects struct {
	store sqsapi.PayloadStore // nil: the client has none, and puts nothing
	log   *slog.Logger

	mu      sync.Mutex
	objs    []object
	dropped bool
}

// put puts a request message in the store for the call.
func (c *callObjects) put(ctx context.Context, msg []byte, deadline time.Time) (object, error) {
	o, err := put(ctx, c.store, msg, deadline)
	if err != nil {
		return object{}, err
	}
	c.mu.Lock()
	late := c.dropped
	if !late {
		c.objs = append(c.objs, o)
	}
	c.mu.Unlock()
	if late { // the call ended meanwhile: nobody will read it
		drop(ctx, c.store, c.log, o)
		return object{}, errCallEnded
	}
	return o, nil
}

var errCallEnded = errors.New("sqsgrpc: the call ended")

// drop deletes the call's objects, once.
func (c *callObjects) drop(ctx context.Context) {
	if c == nil || c.store == nil {
		return
	}
	c.mu.Lock()
	objs := c.objs
	c.objs, c.dropped = nil, true
	c.mu.Unlock()
	drop(ctx, c.store, c.log, objs...)
}

// carrierBytes bounds what the responder's compressed carrier adds to a
// message besides the gzip stream: its placeholder body, the attribute's
// name and its type (docs/wire.md, "Compression").
const carrierBytes = 64

// fitsCompressed reports whether the n bytes that write writes fit in
// one message gzipped as the responder gzips a reply for a client that
// reads that: the stream fits beside the attributes, and it is at most
// nine tenths of the n bytes (less, and the responder sends them as they
// are). It stops compressing once the stream is too large, so that a
// large message that cannot fit costs little to rule out.
func fitsCompressed(n int, write func(io.Writer) error) bool {
	c := &counter{left: maxEnvelope - carrierBytes}
	zw, _ := gzip.NewWriterLevel(c, gzip.BestSpeed) // a valid level
	if write(zw) != nil || zw.Close() != nil {
		return false
	}
	return 10*(carrierBytes+c.n) <= 9*n
}

// frameLen is the length of msg's message frame: "m ", its base64, "\n".
func frameLen(msg []byte) int { return 3 + base64.StdEncoding.EncodedLen(len(msg)) }

// counter counts what is written to it, and fails once that is more
// than left bytes.
type counter struct{ n, left int }

var errCapped = errors.New("sqsgrpc: over the limit")

func (c *counter) Write(p []byte) (int, error) {
	if c.n += len(p); c.n > c.left {
		return 0, errCapped
	}
	return len(p), nil
}
