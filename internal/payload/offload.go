package payload

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/google/uuid"

	"github.com/tempqueues/tempqueues/internal/wire"
	"github.com/tempqueues/tempqueues/sqsapi"
)

// The wire format of a payload in S3, AWS's SQS extended clients' for
// Java (2.x) and Python (docs/wire.md, "Payloads in S3").
const (
	// PointerClass is the class name the extended clients write before a
	// pointer's fields: the body is the JSON array [PointerClass, {"s3BucketName":
	// bucket, "s3Key": key}].
	PointerClass = "software.amazon.payloadoffloading.PayloadS3Pointer"
	// LegacyPointerClass is the class name of the Java client's 1.x
	// pointers, read as PointerClass.
	LegacyPointerClass = "com.amazon.sqs.javamessaging.MessageS3Pointer"
	// SizeAttribute is the Number attribute of a message whose body is a
	// pointer: the payload's size in bytes. The extended clients read a
	// body as a pointer only when it or LegacySizeAttribute is there.
	SizeAttribute = "ExtendedPayloadSize"
	// LegacySizeAttribute is SizeAttribute's name in the Java client's
	// 1.x and its legacy mode.
	LegacySizeAttribute = "SQSLargePayloadSize"
	// KeyPrefix starts the key of every object tempqueues puts; the
	// deadline's Unix time in seconds follows, then a slash and a random
	// UUID: a bucket lifecycle rule on the prefix removes what a crash
	// left (docs/s3.md).
	KeyPrefix = "tempqueues/"
	// MaxPayload is the largest body sent through a PayloadStore, the
	// same as the largest a compressed body may inflate to.
	MaxPayload = MaxInflated
)

// receipt-handle markers: an extended client that receives a pointer
// message hands its caller the receipt handle prefixed with the bucket
// and the key between these markers, and its delete takes them off again
// to delete the object.
const (
	bucketMarker = "-..s3BucketName..-"
	keyMarker    = "-..s3Key..-"
)

// Pointer names an object in a PayloadStore.
type Pointer struct {
	Bucket string `json:"s3BucketName"`
	Key    string `json:"s3Key"`
}

// String returns the pointer's body as the extended clients write it.
func (p Pointer) String() string {
	b, _ := json.Marshal([]any{PointerClass, p}) // strings only: no error
	return string(b)
}

// ReceiptHandle returns handle as an extended client hands it to its
// caller for a pointer message: the bucket and the key before it, each
// between its markers.
func (p Pointer) ReceiptHandle(handle string) string {
	return bucketMarker + p.Bucket + bucketMarker + keyMarker + p.Key + keyMarker + handle
}

// SplitReceiptHandle takes the markers of an extended client's receipt
// handle off: the pointer they carry and SQS's own handle. ok is false,
// and handle returned as it is, when it has none.
func SplitReceiptHandle(handle string) (p Pointer, sqsHandle string, ok bool) {
	rest, found := strings.CutPrefix(handle, bucketMarker)
	if !found {
		return Pointer{}, handle, false
	}
	bucket, rest, found := strings.Cut(rest, bucketMarker)
	if !found {
		return Pointer{}, handle, false
	}
	rest, found = strings.CutPrefix(rest, keyMarker)
	if !found {
		return Pointer{}, handle, false
	}
	key, rest, found := strings.Cut(rest, keyMarker)
	if !found {
		return Pointer{}, handle, false
	}
	return Pointer{Bucket: bucket, Key: key}, rest, true
}

// ParsePointer returns the pointer m carries: its body is a pointer in
// either class and it has SizeAttribute or LegacySizeAttribute, as the
// extended clients require. ok is false for any other message.
func ParsePointer(m types.Message) (p Pointer, ok bool) {
	_, sized := m.MessageAttributes[SizeAttribute]
	_, legacy := m.MessageAttributes[LegacySizeAttribute]
	body := aws.ToString(m.Body)
	if !sized && !legacy || !strings.HasPrefix(body, "[") {
		return Pointer{}, false
	}
	var parts []json.RawMessage
	if json.Unmarshal([]byte(body), &parts) != nil || len(parts) != 2 {
		return Pointer{}, false
	}
	var class string
	if json.Unmarshal(parts[0], &class) != nil || class != PointerClass && class != LegacyPointerClass {
		return Pointer{}, false
	}
	if json.Unmarshal(parts[1], &p) != nil || p.Bucket == "" || p.Key == "" {
		return Pointer{}, false
	}
	return p, true
}

// NewKey returns the key of a new object whose message's reader gives
// up at deadline (the zero time: none, the key then says 0).
func NewKey(deadline time.Time) string {
	var unix int64
	if !deadline.IsZero() {
		unix = deadline.Unix()
	}
	return KeyPrefix + strconv.FormatInt(unix, 10) + "/" + uuid.NewString()
}

// StoreAbove is the largest message a sender with a PayloadStore sends
// through SQS itself: a larger one, even compressed, goes through the
// store. SQS bills each started 64 KiB of a message twice (sent and
// received), so a message of 8 chunks or more costs more than a PUT and a
// GET of its object beside a pointer of one chunk (docs/cost.md). AWS's
// extended clients draw the line lower, at 256 KiB, and never compress.
const StoreAbove = 448 << 10

// Limit returns the largest message a sender sends through SQS itself:
// StoreAbove with a store, SQS's maximum without one.
func Limit(store sqsapi.PayloadStore) int {
	if store == nil {
		return sqsapi.MaxMessageSize
	}
	return StoreAbove
}

// Offload puts body in store under a new key for deadline and returns
// the pointer to send as the message's body, adding SizeAttribute to
// attrs. It drops the compressed carrier (BodyAttribute) from
// attrs: the object holds the plain body, which every extended client
// reads. A body over MaxPayload is an error matching ErrTooLarge with no
// call made; with a nil store, an error matching sqsapi.ErrNoPayloadStore.
func Offload(ctx context.Context, store sqsapi.PayloadStore, body string, attrs map[string]types.MessageAttributeValue, deadline time.Time) (Pointer, error) {
	if len(body) > MaxPayload {
		return Pointer{}, fmt.Errorf("%w: a body of %d bytes is over the %d MiB a payload may have", ErrTooLarge, len(body), MaxPayload>>20)
	}
	if store == nil {
		return Pointer{}, fmt.Errorf("a body of %d bytes does not fit in one message: %w", len(body), sqsapi.ErrNoPayloadStore)
	}
	key := NewKey(deadline)
	bucket, err := store.Put(ctx, key, bytesOf(body))
	if err != nil {
		return Pointer{}, fmt.Errorf("putting the payload in its store: %w", err)
	}
	delete(attrs, BodyAttribute)
	attrs[SizeAttribute] = types.MessageAttributeValue{DataType: aws.String("Number"), StringValue: aws.String(strconv.Itoa(len(body)))}
	return Pointer{Bucket: bucket, Key: key}, nil
}

// PointerBytes is what a pointer message takes at most beside the
// attributes it had: the pointer (a bucket name of at most 63
// characters, a key of NewKey's) and SizeAttribute.
const PointerBytes = len(PointerClass) + len(`["",{"s3BucketName":"","s3Key":""}]`) + 63 +
	len(KeyPrefix) + 20 + 1 + 36 + len(SizeAttribute) + len("Number") + 8

// Fetch returns m with the body its pointer names read from store, and
// the pointer (ok false, m as it is, for a message that has none). It
// drops SizeAttribute and LegacySizeAttribute. A pointer with no store is
// an error matching sqsapi.ErrNoPayloadStore; a missing object one
// matching sqsapi.ErrPayloadNotFound; a body SQS could not have carried
// (not text SQS takes, empty, over MaxPayload) one matching ErrCorrupt.
func Fetch(ctx context.Context, store sqsapi.PayloadStore, m types.Message) (types.Message, Pointer, bool, error) {
	p, ok := ParsePointer(m)
	if !ok {
		return m, Pointer{}, false, nil
	}
	if store == nil {
		return m, p, true, fmt.Errorf("the message points to s3://%s/%s: %w", p.Bucket, p.Key, sqsapi.ErrNoPayloadStore)
	}
	b, err := store.Get(ctx, p.Bucket, p.Key)
	if err != nil {
		if errors.Is(err, sqsapi.ErrPayloadNotFound) {
			return m, p, true, fmt.Errorf("reading s3://%s/%s: %w", p.Bucket, p.Key, err)
		}
		return m, p, true, fmt.Errorf("reading the payload from its store: %w", err)
	}
	if len(b) > MaxPayload {
		return m, p, true, fmt.Errorf("%w: s3://%s/%s has %d bytes, over %d MiB", ErrCorrupt, p.Bucket, p.Key, len(b), MaxPayload>>20)
	}
	body := stringOf(b)
	if body == "" || wire.CheckText("", "", body) != nil {
		return m, p, true, fmt.Errorf("%w: s3://%s/%s is not a body SQS would carry", ErrCorrupt, p.Bucket, p.Key)
	}
	m.Body = &body
	attrs := make(map[string]types.MessageAttributeValue, len(m.MessageAttributes))
	for k, v := range m.MessageAttributes {
		if k != SizeAttribute && k != LegacySizeAttribute {
			attrs[k] = v
		}
	}
	m.MessageAttributes = attrs
	return m, p, true, nil
}

// bytesOf is s's bytes, not a copy: Put must not modify them
// (sqsapi.PayloadStore), and a copy of a 16 MiB body cost more CPU than
// its checks.
func bytesOf(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }

// stringOf is b as a string, not a copy: b is what a PayloadStore's Get
// returned, which the store never changes afterwards (sqsapi.PayloadStore).
func stringOf(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }
