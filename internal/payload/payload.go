// Package payload is the codec of compressed message bodies, negotiated
// per request (docs/wire.md, "Compression"): a requester advertises the
// codecs it reads in AcceptAttribute, and a body worth compressing
// travels gzipped in the Binary attribute BodyAttribute, the
// message's own body a fixed placeholder. The requester and the responder
// encode what they send with Encode and decode what they receive with
// Decode, so that their users see only plain bodies.
//
// A body over Limit even compressed goes through an
// sqsapi.PayloadStore (offload.go; docs/wire.md, "Payloads in S3"):
// Offload puts it there and returns the pointer the message carries, in
// the format of AWS's SQS extended clients, and Fetch reads a pointer
// back, whichever of them or tempqueues wrote it.
package payload

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/internal/callcount"
	"github.com/tempqueues/tempqueues/internal/wire"
	"github.com/tempqueues/tempqueues/sqsapi"
)

// The attributes of compression, ours on the wire (docs/wire.md,
// "Compression"). The library adds and strips them; a handler never sees
// them.
const (
	// AcceptAttribute is the String message attribute on a request that
	// lists what its requester reads in replies, comma-separated: "gzip",
	// the one codec, and on a call "parts", a reply too large for one
	// message in parts. The requester adds it when the message has room
	// (as sqsapi.DeadlineAttribute); a responder compresses the replies to
	// a request that offers gzip, when that pays, and sends any other
	// request's replies as they are (docs/wire.md, "Compression",
	// "Replies in parts").
	AcceptAttribute = "TempQueues.Accept"

	// BodyAttribute is the message attribute that carries a compressed
	// body: DataType "Binary.gzip", its value the gzip stream of the body,
	// while the message's own body is a short placeholder (SQS requires
	// one). SQS counts a Binary value's raw bytes, so the body travels at
	// its compressed size, without base64's third more.
	BodyAttribute = "TempQueues.Body"
)

const (
	// Codec is the one codec: the value a requester advertises in
	// AcceptAttribute, and the label of the carrier's DataType.
	Codec = "gzip"
	// DataType is the DataType of BodyAttribute: SQS takes a
	// custom label after "Binary.", and counts the value's raw bytes.
	DataType = "Binary." + Codec
	// Placeholder is the body of a message whose body travels compressed.
	Placeholder = "(gzip body in TempQueues.Body)"

	// Threshold is the smallest body Encode compresses. SQS bills each
	// started 64 KiB of a call's payload, and a call carries at most ten
	// messages: below 6.4 KiB a body, alone or with nine others in a batch
	// or a receive, never costs more than one billed request, so
	// compressing it could not lower a bill; it would cost CPU (20 µs a
	// message at 1 KiB, each side) to save a few hundred bytes.
	Threshold = 8 << 10
	// MaxInflated is the largest body a compressed one may inflate to:
	// Decode refuses more (a zip bomb), and Encode leaves a larger body
	// as it is, to fail SQS's size check.
	MaxInflated = 64 << 20

	// Level is the gzip level of Encode: the fastest, which on JSON and
	// log text of 16 KiB to 1 MiB compresses 2.5 to 8 times faster than
	// the default level, its output a fifth to a quarter larger
	// (docs/wire.md, "Compression", has the measurements).
	Level = gzip.BestSpeed
)

// carrierBytes is what the carrier adds to a message besides the
// compressed bytes: the placeholder body, the attribute's name and type.
const carrierBytes = len(Placeholder) + len(BodyAttribute) + len(DataType)

var (
	// ErrCorrupt is matched by the error of a message whose carrier does
	// not decode: not gzip, truncated, an unknown codec, or a body that
	// SQS would not have carried (not valid UTF-8 of the characters SQS
	// accepts).
	ErrCorrupt = errors.New("the compressed body does not decode")
	// ErrTooLarge is matched by the error of a message whose carrier
	// inflates past MaxInflated.
	ErrTooLarge = fmt.Errorf("the compressed body inflates past %d MiB", MaxInflated>>20)
)

// Accepts reports whether a request's attributes advertise the codec:
// AcceptAttribute lists it among its comma-separated values.
func Accepts(attrs map[string]types.MessageAttributeValue) bool { return offers(attrs, Codec) }

// offers reports whether AcceptAttribute lists token among its
// comma-separated values.
func offers(attrs map[string]types.MessageAttributeValue, token string) bool {
	v, ok := attrs[AcceptAttribute]
	if !ok || v.StringValue == nil {
		return false
	}
	for c := range strings.SplitSeq(*v.StringValue, ",") {
		if strings.TrimSpace(c) == token {
			return true
		}
	}
	return false
}

// Offer returns the value of AcceptAttribute that offers what is
// set, or "" for nothing: Codec for compressed replies, PartsToken for a
// reply in parts.
func Offer(compressed, parts bool) string {
	switch {
	case compressed && parts:
		return Codec + "," + PartsToken
	case compressed:
		return Codec
	case parts:
		return PartsToken
	}
	return ""
}

// Advertise adds AcceptAttribute with the value offer (Offer's) to
// the attributes of a request with body to queueURL when the message has
// room for it, counting the routing attribute a send to a virtual queue
// adds later, as wire.StampDeadline does. It reports whether it did.
func Advertise(attrs map[string]types.MessageAttributeValue, body *string, queueURL, offer string) bool {
	if offer == "" {
		return false
	}
	n, size := len(attrs)+1, wire.MessageSize(body, attrs)+len(AcceptAttribute)+len("String")+len(offer)
	if wire.IsVirtualQueueURL(queueURL) {
		n++
		size += len(sqsapi.VirtualQueueNameAttribute) + len("String") + wire.MaxQueueNameLength
	}
	if n > sqsapi.MaxMessageAttributes || size > sqsapi.MaxMessageSize {
		return false
	}
	attrs[AcceptAttribute] = wire.StringAttribute(offer)
	return true
}

// Encode returns the body to send for body, compressing it when that
// pays: the body has at least Threshold bytes (and at most MaxInflated),
// the message has room for one more attribute (room, what the sender
// counts it may still add, is at least 1), and the carrier (the
// placeholder, the attribute's name, type and compressed bytes) is at
// most nine tenths of the body and fits in one message; a body that
// compresses poorly (base64 of random bytes) also a billed chunk less
// (compress). It then adds
// BodyAttribute to attrs and returns Placeholder; otherwise it
// returns body and leaves attrs alone. Whether it compressed is reported
// too.
func Encode(body string, attrs map[string]types.MessageAttributeValue, room int) (string, bool) {
	return encode(body, attrs, room, sqsapi.MaxMessageSize, false)
}

// EncodeWithin is Encode for a sender that keeps in SQS only messages of
// at most limit bytes (Limit): a carrier over limit is worth nothing to
// it. Below SQS's maximum, limit means the sender has a store for the
// rest, so a body whose first guessAfter bytes compress too little to
// come within limit is given up on at that guess, not compressed whole.
func EncodeWithin(body string, attrs map[string]types.MessageAttributeValue, room, limit int) (string, bool) {
	return encode(body, attrs, room, min(limit, sqsapi.MaxMessageSize), limit < sqsapi.MaxMessageSize)
}

func encode(body string, attrs map[string]types.MessageAttributeValue, room, limit int, guess bool) (string, bool) {
	if room < 1 || len(body) < Threshold || len(body) > MaxInflated {
		return body, false
	}
	// Compression pays up to nine tenths of the body, and what passes
	// limit cannot be sent: past that it stops, so a body that cannot fit
	// costs a few of its MiB of CPU, not all.
	z, ok := compress(body, min(9*len(body)/10, limit)-carrierBytes, guess, wire.MessageSize(nil, attrs))
	if !ok || 10*(carrierBytes+len(z)) > 9*len(body) {
		return body, false
	}
	attrs[BodyAttribute] = types.MessageAttributeValue{DataType: aws.String(DataType), BinaryValue: z}
	return Placeholder, true
}

// Fits reports whether body, compressed as Encode would, fits in one
// message with reserve bytes of attributes beside it: for an adapter
// whose reply would not fit as it is (sqshttp), and which the responder
// compresses (CompressedReplies).
func Fits(body string, reserve int) bool {
	attrs := make(map[string]types.MessageAttributeValue, 1)
	enc, _ := Encode(body, attrs, 1)
	return wire.MessageSize(&enc, attrs)+reserve <= sqsapi.MaxMessageSize
}

// repliesKey is the context key of CompressedReplies.
type repliesKey struct{}

// WithCompressedReplies returns ctx marked for a handler whose request's
// replies travel compressed when that pays: its requester advertised
// them, and the responder compresses.
func WithCompressedReplies(ctx context.Context) context.Context {
	return context.WithValue(ctx, repliesKey{}, true)
}

// CompressedReplies reports whether ctx, a handler's, is marked by
// WithCompressedReplies.
func CompressedReplies(ctx context.Context) bool {
	v, _ := ctx.Value(repliesKey{}).(bool)
	return v
}

var writers = sync.Pool{New: func() any {
	w, _ := gzip.NewWriterLevel(io.Discard, Level) // Level is valid
	return w
}}

// compressChunk is how much of a body compress feeds the writer between
// two looks at its output.
const compressChunk = 64 << 10

// guessAfter is how much of a body compress reads before it guesses, when
// asked to, whether the whole will come within its limit.
const guessAfter = 256 << 10

// sampleAfter is how much of a longer body compress reads before it
// judges from the output so far whether the rest is worth compressing.
const sampleAfter = 16 << 10

// poorRatio: a sample whose output is over this share of its input is
// data already compressed, encrypted or random, in base64, which gzip
// shrinks by a quarter at most and compresses at its slowest.
const poorRatio = 0.7

// compress returns the gzip stream of body, or false as soon as the
// stream passes limit bytes; with guess, also once the first guessAfter
// bytes of body, compressed, foretell a stream a quarter over limit. It
// also gives up after the first sampleAfter bytes of data that compresses
// poorly when the whole, with the message's other attributes (attrBytes),
// would still take as many billed 64 KiB chunks as it takes plain: such
// a body (64 KiB of random bytes in base64, 66 KB compressed) cost CPU on
// both sides and saved nothing a lone message bills.
func compress(body string, limit int, guess bool, attrBytes int) ([]byte, bool) {
	var buf bytes.Buffer
	buf.Grow(min(len(body)/4, limit) + 64)
	w := writers.Get().(*gzip.Writer)
	defer func() {
		w.Reset(io.Discard) // drop the buffer
		writers.Put(w)
	}()
	w.Reset(&buf)
	for i := 0; i < len(body); {
		// Pieces end at multiples of compressChunk, the first at
		// sampleAfter when there is more.
		end := min(i-i%compressChunk+compressChunk, len(body))
		if i == 0 && len(body) > sampleAfter {
			end = sampleAfter
		}
		_, _ = io.WriteString(w, body[i:end]) // a bytes.Buffer does not fail
		i = end
		if buf.Len() > limit {
			return nil, false
		}
		if end == sampleAfter && end < len(body) {
			_ = w.Flush() // what the writer holds back counts
			ratio := float64(buf.Len()) / sampleAfter
			if ratio > poorRatio && callcount.BilledRequests(attrBytes+carrierBytes+int(ratio*float64(len(body)))) >= callcount.BilledRequests(attrBytes+len(body)) {
				return nil, false
			}
		}
		if guess && end == guessAfter && end < len(body) {
			_ = w.Flush() // what the writer holds back counts in the guess
			if 4*int64(buf.Len())*int64(len(body)) > 5*int64(limit)*int64(end) {
				return nil, false
			}
		}
	}
	_ = w.Close()
	return buf.Bytes(), buf.Len() <= limit
}

// Decode returns m as its sender meant it: a message that carries its
// body in BodyAttribute gets that body, inflated, as its Body,
// and loses the attribute; any message loses AcceptAttribute, its
// requester's offer, reported as accept. MD5OfBody is left as SQS gave it:
// the placeholder's. m's attribute map is not changed (the result has a
// copy when it differs). A carrier that does not decode is an error
// matching ErrCorrupt, one that inflates past MaxInflated one matching
// ErrTooLarge.
func Decode(m types.Message) (out types.Message, accept bool, err error) {
	carrier, compressed := m.MessageAttributes[BodyAttribute]
	_, offered := m.MessageAttributes[AcceptAttribute]
	if !compressed && !offered {
		return m, false, nil
	}
	accept = Accepts(m.MessageAttributes)
	if compressed {
		body, err := decodeCarrier(carrier)
		if err != nil {
			return m, accept, err
		}
		m.Body = &body
	}
	attrs := make(map[string]types.MessageAttributeValue, len(m.MessageAttributes))
	for k, v := range m.MessageAttributes {
		if k != BodyAttribute && k != AcceptAttribute {
			attrs[k] = v
		}
	}
	m.MessageAttributes = attrs
	return m, accept, nil
}

var readers sync.Pool // *gzip.Reader

// decodeCarrier inflates the value of BodyAttribute.
func decodeCarrier(v types.MessageAttributeValue) (string, error) {
	if dt := aws.ToString(v.DataType); dt != DataType {
		return "", fmt.Errorf("%w: %s has DataType %q, not %q", ErrCorrupt, BodyAttribute, dt, DataType)
	}
	src := bytes.NewReader(v.BinaryValue)
	zr, _ := readers.Get().(*gzip.Reader)
	var err error
	if zr == nil {
		zr, err = gzip.NewReader(src)
	} else {
		err = zr.Reset(src)
	}
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	defer readers.Put(zr)
	// JSON and text inflate four to five times; a bomb grows the buffer
	// step by step, up to one byte past the limit.
	out := bytes.NewBuffer(make([]byte, 0, min(5*len(v.BinaryValue)+512, MaxInflated+1)))
	n, err := out.ReadFrom(io.LimitReader(zr, MaxInflated+1))
	switch {
	case err != nil:
		return "", fmt.Errorf("%w: %w", ErrCorrupt, err)
	case n > MaxInflated:
		return "", ErrTooLarge
	}
	body := out.String()
	if err := wire.CheckText("", "", body); err != nil {
		return "", fmt.Errorf("%w: the body inflated is not text SQS accepts", ErrCorrupt)
	}
	if body == "" {
		return "", fmt.Errorf("%w: the body inflated is empty", ErrCorrupt)
	}
	return body, nil
}
