package sqsgrpc

import (
	"encoding/base64"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/tempqueues/tempqueues/sqsapi"
)

// The envelope (docs/wire.md, "HTTP and gRPC over SQS") is text:
//
//	request:  TQG/1 <full-method> <deadline> <content-subtype>[ stream][ store]\n
//	          one "key: value\n" line per metadata value ("key:: <base64>\n"
//	          for binary keys and values that are not printable ASCII),
//	          a blank line, then the request message in base64; with
//	          "stream" (a client-streaming or bidirectional call) none:
//	          the messages follow in the session, one "m <base64>" frame
//	          each.
//	reply:    one frame per line, in this order, any of them missing:
//	          "h key: value"  a header entry (the same value forms)
//	          "H"             the header is complete
//	          "m <base64>"    a response message
//	          "o <bucket> <key>"  a response message in a payload store
//	          "t key: value"  a trailer entry
//	          "s <code>[ <base64 google.rpc.Status>]"  the status, last
//
// With "store" the client reads "o" frames: a message too large for one
// SQS message, raw in its payload store; a request's message may be one
// too, in place of its base64, and so may a session's frame. <deadline>
// is the caller's deadline in Unix milliseconds, or "-". A
// server-streaming reply is the frames of a reply stream's messages in
// order: the header and each message in a message of their own (as the
// handler sends them), the trailer and the status in the final reply.
const magic = "TQG/1"

// streamFlag ends the first line of a request whose messages follow in
// its session.
const streamFlag = "stream"

// storeFlag ends the first line of a request whose client reads messages
// from its payload store (ClientConnOptions.PayloadStore); after
// streamFlag when both are there.
const storeFlag = "store"

// reserve is the room left in a message for the requester's and the
// responder's attributes; the envelope may take the rest.
const reserve = 4 << 10

const maxEnvelope = sqsapi.MaxMessageSize - reserve

// maxRequest is the largest request envelope the client hands its
// requester: one that does not fit in a message may fit compressed
// (requester.Options.CompressRequests), which the requester's own check
// decides on what it sends (tooLargeSent), up to the 64 MiB a compressed
// body may inflate to (docs/wire.md, "Compression").
const maxRequest = 64 << 20

// tooLargeSent reports whether err is the requester's refusal of a
// message too large for SQS, compressed or not.
func tooLargeSent(err error) bool {
	var ie *sqsapi.InvalidInputError
	return errors.As(err, &ie) && (ie.Param == "MessageBody" || ie.Param == "Body")
}

// errTooLarge describes an envelope of n bytes.
func errTooLarge(what string, n int) error {
	return fmt.Errorf("sqsgrpc: the %s of %d bytes encoded does not fit in one SQS message (%d at most)", what, n, maxEnvelope)
}

// printable reports whether s is printable ASCII (or tab): metadata values
// carried as they are.
func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < 0x20 || c > 0x7e) && c != '\t' {
			return false
		}
	}
	return true
}

// validKey reports whether k can be a metadata key on the wire.
func validKey(k string) bool {
	if k == "" {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

// appendMD appends md's entries, each line starting with prefix, keys in a
// stable order.
func appendMD(b []byte, prefix string, md metadata.MD) ([]byte, error) {
	keys := make([]string, 0, len(md))
	for k := range md {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		lk := strings.ToLower(k)
		if !validKey(lk) {
			return nil, fmt.Errorf("invalid metadata key %q", k)
		}
		for _, v := range md[k] {
			b = append(b, prefix...)
			b = append(b, lk...)
			if !strings.HasSuffix(lk, "-bin") && printable(v) {
				b = append(b, ": "...)
				b = append(b, v...)
			} else {
				b = append(b, ":: "...)
				b = base64.StdEncoding.AppendEncode(b, []byte(v))
			}
			b = append(b, '\n')
		}
	}
	return b, nil
}

// parseMDLine adds a "key: value" or "key:: base64" line to md.
func parseMDLine(md metadata.MD, l string) error {
	k, v, ok := strings.Cut(l, ":")
	if !ok || !validKey(k) {
		return fmt.Errorf("malformed metadata line %q", l)
	}
	if strings.HasPrefix(v, ": ") {
		raw, err := base64.StdEncoding.DecodeString(v[2:])
		if err != nil {
			return fmt.Errorf("metadata %q: %w", k, err)
		}
		v = string(raw)
	} else {
		v = strings.TrimPrefix(v, " ")
	}
	md[k] = append(md[k], v)
	return nil
}

// request is a decoded request envelope.
type request struct {
	method   string
	deadline time.Time
	subtype  string
	md       metadata.MD
	msg      []byte
	object   object // the message's object in a payload store, if it is there (then msg is nil)
	streamed bool   // the messages follow in the session
	store    bool   // the client reads messages from its payload store
}

func validMethod(m string) bool {
	return strings.HasPrefix(m, "/") && m != "/" && printable(m) && !strings.ContainsAny(m, " \t")
}

// encodeRequest returns the envelope of a request: with msg, or with obj
// (when its key is set) in place of it, or with neither for a streamed
// one; store flags a client that reads messages from its payload store.
func encodeRequest(method string, deadline time.Time, subtype string, md metadata.MD, msg []byte, streamed, store bool, obj object) (string, error) {
	if !validMethod(method) {
		return "", fmt.Errorf("invalid method name %q", method)
	}
	if subtype == "" || !validKey(subtype) {
		return "", fmt.Errorf("invalid content subtype %q", subtype)
	}
	b := make([]byte, 0, 64+len(method)+base64.StdEncoding.EncodedLen(len(msg)))
	b = append(b, magic...)
	b = append(b, ' ')
	b = append(b, method...)
	b = append(b, ' ')
	if deadline.IsZero() {
		b = append(b, '-')
	} else {
		b = strconv.AppendInt(b, deadline.UnixMilli(), 10)
	}
	b = append(b, ' ')
	b = append(b, subtype...)
	if streamed {
		b = append(b, ' ')
		b = append(b, streamFlag...)
	}
	if store {
		b = append(b, ' ')
		b = append(b, storeFlag...)
	}
	b = append(b, '\n')
	b, err := appendMD(b, "", md)
	if err != nil {
		return "", err
	}
	b = append(b, '\n')
	if obj.key != "" {
		return string(obj.appendFrame(b)), nil
	}
	return string(base64.StdEncoding.AppendEncode(b, msg)), nil
}

func decodeRequest(s string) (*request, error) {
	line, rest, ok := strings.Cut(s, "\n")
	f := strings.Split(line, " ")
	store := len(f) > 4 && f[len(f)-1] == storeFlag
	if store {
		f = f[:len(f)-1]
	}
	if !ok || len(f) < 4 || len(f) > 5 || f[0] != magic || !validMethod(f[1]) || !validKey(f[3]) || len(f) == 5 && f[4] != streamFlag {
		return nil, errors.New("not an sqsgrpc request")
	}
	r := &request{method: f[1], subtype: f[3], md: metadata.MD{}, streamed: len(f) == 5, store: store}
	if f[2] != "-" {
		ms, err := strconv.ParseInt(f[2], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("malformed deadline %q", f[2])
		}
		r.deadline = time.UnixMilli(ms)
	}
	for {
		var l string
		if l, rest, ok = strings.Cut(rest, "\n"); !ok {
			return nil, errors.New("metadata not terminated")
		}
		if l == "" {
			break
		}
		if err := parseMDLine(r.md, l); err != nil {
			return nil, err
		}
	}
	if r.streamed {
		if rest != "" {
			return nil, errors.New("a streamed request carries no message")
		}
		return r, nil
	}
	var err error
	if obj, ok := strings.CutPrefix(rest, string(frameObject)+" "); ok {
		// Base64 has no space: this is no message.
		r.object, err = parseObject(obj)
		return r, err
	}
	if r.msg, err = base64.StdEncoding.DecodeString(rest); err != nil {
		return nil, fmt.Errorf("request message: %w", err)
	}
	return r, nil
}

// Reply frames.
const (
	frameHeader     = 'h'
	frameHeaderDone = 'H'
	frameMessage    = 'm'
	frameObject     = 'o' // a message in a payload store: "o <bucket> <key>"
	frameTrailer    = 't'
	frameStatus     = 's'
)

func appendHeaderFrames(b []byte, md metadata.MD) ([]byte, error) {
	b, err := appendMD(b, "h ", md)
	if err != nil {
		return nil, err
	}
	return append(b, frameHeaderDone, '\n'), nil
}

func appendMessageFrame(b, msg []byte) []byte {
	b = append(b, frameMessage, ' ')
	b = base64.StdEncoding.AppendEncode(b, msg)
	return append(b, '\n')
}

func appendEnd(b []byte, trailer metadata.MD, st *status.Status) ([]byte, error) {
	b, err := appendMD(b, "t ", trailer)
	if err != nil {
		return nil, err
	}
	b = append(b, frameStatus, ' ')
	b = strconv.AppendInt(b, int64(st.Code()), 10)
	if st.Code() != codes.OK {
		p, err := proto.Marshal(st.Proto())
		if err != nil {
			return nil, err
		}
		b = append(b, ' ')
		b = base64.StdEncoding.AppendEncode(b, p)
	}
	return append(b, '\n'), nil
}

// frames is what one reply message carried.
type frames struct {
	header     metadata.MD // nil when none came
	headerDone bool
	msgs       [][]byte
	objects    map[int]object // the messages in a payload store, by their index in msgs (nil there until read)
	trailer    metadata.MD
	status     *status.Status // nil until the end
}

func decodeFrames(s string) (*frames, error) {
	f := &frames{}
	for s != "" {
		l, rest, _ := strings.Cut(s, "\n")
		s = rest
		if l == "" {
			return nil, errors.New("empty frame")
		}
		body := ""
		if len(l) > 2 && l[1] == ' ' {
			body = l[2:]
		}
		switch l[0] {
		case frameHeader:
			if f.header == nil {
				f.header = metadata.MD{}
			}
			if err := parseMDLine(f.header, body); err != nil {
				return nil, err
			}
		case frameHeaderDone:
			if f.header == nil {
				f.header = metadata.MD{}
			}
			f.headerDone = true
		case frameMessage:
			m, err := base64.StdEncoding.DecodeString(body)
			if err != nil {
				return nil, fmt.Errorf("message frame: %w", err)
			}
			f.msgs = append(f.msgs, m)
		case frameObject:
			o, err := parseObject(body)
			if err != nil {
				return nil, err
			}
			if f.objects == nil {
				f.objects = make(map[int]object, 1)
			}
			f.objects[len(f.msgs)] = o
			f.msgs = append(f.msgs, nil)
		case frameTrailer:
			if f.trailer == nil {
				f.trailer = metadata.MD{}
			}
			if err := parseMDLine(f.trailer, body); err != nil {
				return nil, err
			}
		case frameStatus:
			st, err := decodeStatus(body)
			if err != nil {
				return nil, err
			}
			f.status = st
		default:
			return nil, fmt.Errorf("unknown frame %q", l[:1])
		}
	}
	return f, nil
}

func decodeStatus(s string) (*status.Status, error) {
	num, enc, _ := strings.Cut(s, " ")
	code, err := strconv.ParseUint(num, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("malformed status %q", s)
	}
	if enc == "" {
		return status.New(codes.Code(code), ""), nil
	}
	raw, err := base64.StdEncoding.DecodeString(enc)
	if err != nil {
		return nil, fmt.Errorf("status: %w", err)
	}
	var p spb.Status
	if err := proto.Unmarshal(raw, &p); err != nil {
		return nil, fmt.Errorf("status: %w", err)
	}
	return status.FromProto(&p), nil
}
