package sqshttp

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/textproto"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/tempqueues/tempqueues/internal/payload"
	"github.com/tempqueues/tempqueues/internal/wire"
	"github.com/tempqueues/tempqueues/sqsapi"
)

// The envelope (docs/wire.md, "HTTP over SQS") carries an HTTP request or
// response in an SQS message body, its body too unless that follows in
// parts:
//
//	request:   TQH/1 <method> <request-uri> <deadline> <enc>[ +[<length>]][ store]\n
//	response:  TQH/1 <status> <enc>[ +]\n
//	then       one "Name: value\n" line per header value ("Name:: <base64>\n"
//	           for a value that is not SQS text), a blank line, the body.
//
// <deadline> is the caller's deadline in Unix milliseconds, or "-". <enc>
// is "t" when the body is carried as it is (valid SQS text), "b" when
// it is standard base64, and "s" when it is an object in a payload store,
// raw, the envelope's body naming it ("<bucket> <key>"); "store" says
// that the caller reads a response body from its store. "+" says that the
// body follows in parts, each a message of its own: <enc> then the part's
// bytes. A response's parts are the later messages of its reply stream; a
// request's are the messages its caller streams on the request's session,
// which end with the session's half-close, and <length>, when the caller
// knew it, is the body's size in bytes.
const (
	magic    = "TQH/1"
	encText  = 't'
	encB64   = 'b'
	encStore = 's' // the body is in a payload store: the envelope's body is "<bucket> <key>"
	moreMark = "+"
	// storeFlag ends a request line whose caller reads a response body
	// from its payload store (TransportOptions.PayloadStore).
	storeFlag = "store"
)

// reserve is the room left in a message for the attributes the requester
// and the responder add (the reply route, the request and correlation ids,
// the stream's sequence number, a traceparent): the envelope may take the
// rest of SQS's maximum.
const reserve = 4 << 10

// maxEnvelope is the largest envelope sent in one message.
const maxEnvelope = sqsapi.MaxMessageSize - reserve

// ErrTooLarge is matched (errors.Is) by the error of a request that
// cannot travel: its envelope's head (method, URL and headers, encoded)
// does not fit in one SQS message, or, with
// TransportOptions.DisableStreaming, its whole envelope (the body
// included) does not, as it is sent (compressed with the requester's
// CompressRequests when that pays). A larger body alone is no error: it
// is streamed in parts. No call is made. It also matches
// sqsapi.ErrInvalidInput.
var ErrTooLarge = errors.New("sqshttp: does not fit in one SQS message")

// tooLarge returns the error of an envelope of n bytes (or more).
func tooLarge(op, what string, n int) error {
	return fmt.Errorf("%w: %w", ErrTooLarge, &sqsapi.InvalidInputError{Op: op, Param: what,
		Reason: fmt.Sprintf("%d bytes encoded exceed the %d an SQS message leaves for them", n, maxEnvelope)})
}

// isText reports whether SQS accepts s as it is.
func isText(s string) bool { return wire.CheckText("", "", s) == nil }

// bodyMark returns how body is carried: encText when SQS takes it as it
// is, encB64 otherwise.
func bodyMark(body []byte) byte {
	if isText(string(body)) {
		return encText
	}
	return encB64
}

// appendEncoded appends body in the encoding mark names.
func appendEncoded(b []byte, mark byte, body []byte) []byte {
	if mark == encText {
		return append(b, body...)
	}
	return base64.StdEncoding.AppendEncode(b, body)
}

// encodedLen is the size of body in the encoding mark names.
func encodedLen(mark byte, body []byte) int {
	if mark == encText {
		return len(body)
	}
	return base64.StdEncoding.EncodedLen(len(body))
}

// decodeBody decodes a body carried in the encoding mark names.
func decodeBody(mark byte, s string) ([]byte, error) {
	switch mark {
	case encText:
		return []byte(s), nil
	case encB64:
		return base64.StdEncoding.DecodeString(s)
	}
	return nil, fmt.Errorf("unknown body encoding %q", mark)
}

// appendHeader appends h's lines in a stable order and the blank line.
// A name that is not an HTTP token, or a value with CR or LF, is refused,
// as net/http's own transport refuses it.
func appendHeader(b []byte, h http.Header) ([]byte, error) {
	names := make([]string, 0, len(h))
	for name := range h {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if !validName(name) {
			return nil, fmt.Errorf("invalid header name %q", name)
		}
		for _, v := range h[name] {
			if strings.ContainsAny(v, "\r\n") {
				return nil, fmt.Errorf("invalid value for header %q: CR or LF", name)
			}
			b = append(b, name...)
			if isText(v) {
				b = append(b, ": "...)
				b = append(b, v...)
			} else {
				b = append(b, ":: "...)
				b = base64.StdEncoding.AppendEncode(b, []byte(v))
			}
			b = append(b, '\n')
		}
	}
	return append(b, '\n'), nil
}

// validName reports whether s is an HTTP token (RFC 9110, 5.6.2).
func validName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c > 0x7e || c <= ' ' || strings.IndexByte("\"(),/:;<=>?@[\\]{}", c) >= 0 {
			return false
		}
	}
	return true
}

// request is a request envelope.
type request struct {
	method, uri, host string
	deadline          time.Time // zero: none
	header            http.Header
	body              []byte
	parts             bool            // the body follows in parts (then body is empty)
	length            int64           // with parts: the body's size, -1 when unknown
	object            payload.Pointer // the body's object in a payload store, if it is there (then body is empty)
	store             bool            // the caller reads a response body from its payload store
	offload           bool            // the Transport puts body in its payload store before sending (not on the wire)
}

// appendObject appends the body of an envelope whose body is the object
// p: its bucket and key.
func appendObject(b []byte, p payload.Pointer) []byte {
	b = append(b, p.Bucket...)
	b = append(b, ' ')
	return append(b, p.Key...)
}

// parseObject parses the body of an envelope whose body is in a payload
// store.
func parseObject(s string) (payload.Pointer, error) {
	bucket, key, ok := strings.Cut(s, " ")
	if !ok || bucket == "" || key == "" || strings.ContainsAny(key, " \n") {
		return payload.Pointer{}, fmt.Errorf("malformed object %q", s)
	}
	return payload.Pointer{Bucket: bucket, Key: key}, nil
}

// encode returns the envelope of r. r.host, when set, is carried as a
// Host line.
func (r *request) encode() (string, error) {
	if !validName(r.method) || r.uri == "" || strings.ContainsAny(r.uri, " \r\n") || !isText(r.uri) {
		return "", fmt.Errorf("invalid method %q or request URI %q", r.method, r.uri)
	}
	mark := bodyMark(r.body)
	if r.object.Key != "" {
		mark = encStore
	}
	b := make([]byte, 0, 64+len(r.uri)+64*len(r.header)+encodedLen(mark, r.body))
	b = append(b, magic...)
	b = append(b, ' ')
	b = append(b, r.method...)
	b = append(b, ' ')
	b = append(b, r.uri...)
	b = append(b, ' ')
	if r.deadline.IsZero() {
		b = append(b, '-')
	} else {
		b = strconv.AppendInt(b, r.deadline.UnixMilli(), 10)
	}
	b = append(b, ' ', mark)
	if r.parts {
		b = append(b, ' ')
		b = append(b, moreMark...)
		if r.length >= 0 {
			b = strconv.AppendInt(b, r.length, 10)
		}
	}
	if r.store {
		b = append(b, ' ')
		b = append(b, storeFlag...)
	}
	b = append(b, '\n')
	h := r.header
	if r.host != "" {
		h = h.Clone()
		if h == nil {
			h = make(http.Header, 1)
		}
		h.Set("Host", r.host)
	}
	b, err := appendHeader(b, h)
	if err != nil {
		return "", err
	}
	if mark == encStore {
		return string(appendObject(b, r.object)), nil
	}
	return string(appendEncoded(b, mark, r.body)), nil
}

// decodeRequest parses a request envelope.
func decodeRequest(s string) (*request, error) {
	line, h, body, err := splitEnvelope(s)
	if err != nil {
		return nil, err
	}
	f := strings.Split(line, " ")
	r := &request{header: h, length: -1}
	if len(f) > 5 && f[len(f)-1] == storeFlag {
		r.store, f = true, f[:len(f)-1]
	}
	if len(f) < 5 || len(f) > 6 || len(f[4]) != 1 || f[1] == "" || f[2] == "" {
		return nil, fmt.Errorf("malformed request line %q", line)
	}
	r.method, r.uri = f[1], f[2]
	if len(f) == 6 {
		n, ok := strings.CutPrefix(f[5], moreMark)
		if !ok {
			return nil, fmt.Errorf("malformed request line %q", line)
		}
		r.parts = true
		if n != "" {
			if r.length, err = strconv.ParseInt(n, 10, 64); err != nil || r.length < 0 {
				return nil, fmt.Errorf("malformed body length %q", n)
			}
		}
	}
	if f[3] != "-" {
		ms, err := strconv.ParseInt(f[3], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("malformed deadline %q", f[3])
		}
		r.deadline = time.UnixMilli(ms)
	}
	switch {
	case f[4][0] == encStore && !r.parts:
		if r.object, err = parseObject(body); err != nil {
			return nil, err
		}
	default:
		if r.body, err = decodeBody(f[4][0], body); err != nil {
			return nil, err
		}
	}
	r.host = h.Get("Host")
	h.Del("Host")
	return r, nil
}

// response is a decoded response envelope.
type response struct {
	status int
	header http.Header
	body   []byte
	more   bool            // parts follow
	object payload.Pointer // the body's object in a payload store, if it is there (then body is empty)
}

// encodeResponseHead returns the first line and the header lines of a
// response, ready for its body's encoding.
func appendResponseHead(b []byte, status int, mark byte, more bool, h http.Header) ([]byte, error) {
	b = append(b, magic...)
	b = append(b, ' ')
	b = strconv.AppendInt(b, int64(status), 10)
	b = append(b, ' ', mark)
	if more {
		b = append(b, ' ')
		b = append(b, moreMark...)
	}
	b = append(b, '\n')
	return appendHeader(b, h)
}

// decodeResponse parses a response envelope.
func decodeResponse(s string) (*response, error) {
	line, h, body, err := splitEnvelope(s)
	if err != nil {
		return nil, err
	}
	f := strings.Split(line, " ")
	if len(f) < 3 || len(f) > 4 || len(f[2]) != 1 || len(f) == 4 && f[3] != moreMark {
		return nil, fmt.Errorf("malformed status line %q", line)
	}
	status, err := strconv.Atoi(f[1])
	if err != nil || status < 100 || status > 999 {
		return nil, fmt.Errorf("malformed status %q", f[1])
	}
	r := &response{status: status, header: h, more: len(f) == 4}
	if f[2][0] == encStore && !r.more {
		r.object, err = parseObject(body)
		return r, err
	}
	if r.body, err = decodeBody(f[2][0], body); err != nil {
		return nil, err
	}
	return r, nil
}

// appendPart appends a streamed part: its encoding mark and its bytes.
func appendPart(b []byte, part []byte) []byte {
	mark := bodyMark(part)
	return appendEncoded(append(b, mark), mark, part)
}

// decodePart decodes a streamed part.
func decodePart(s string) ([]byte, error) {
	if s == "" {
		return nil, errors.New("empty part")
	}
	return decodeBody(s[0], s[1:])
}

// splitEnvelope splits an envelope into its first line, its header and its
// (encoded) body.
func splitEnvelope(s string) (string, http.Header, string, error) {
	line, rest, ok := strings.Cut(s, "\n")
	if !ok || !strings.HasPrefix(line, magic+" ") {
		return "", nil, "", errors.New("not an sqshttp envelope")
	}
	h := make(http.Header)
	for {
		var l string
		l, rest, ok = strings.Cut(rest, "\n")
		if !ok {
			return "", nil, "", errors.New("header block not terminated")
		}
		if l == "" {
			return line, h, rest, nil
		}
		name, v, ok := strings.Cut(l, ":")
		if !ok || !validName(name) {
			return "", nil, "", fmt.Errorf("malformed header line %q", l)
		}
		if strings.HasPrefix(v, ": ") {
			raw, err := base64.StdEncoding.DecodeString(v[2:])
			if err != nil {
				return "", nil, "", fmt.Errorf("header %q: %w", name, err)
			}
			v = string(raw)
		} else {
			v = strings.TrimPrefix(v, " ")
		}
		name = textproto.CanonicalMIMEHeaderKey(name)
		h[name] = append(h[name], v)
	}
}
