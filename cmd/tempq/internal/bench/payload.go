package bench

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"

	"github.com/aws/smithy-go"

	"github.com/tempqueues/tempqueues/sqsapi"
)

// Payload kinds: JSON text, or random bytes, which travel base64-encoded in
// the body (a third larger) since SQS bodies are text.
const (
	PayloadJSON   = "json"
	PayloadBinary = "binary"
)

// PayloadKinds lists the payload kinds.
var PayloadKinds = []string{PayloadJSON, PayloadBinary}

// Payload shapes: the request carries the payload and the reply echoes it
// (ShapeEcho), or the request is the tiny body and the reply carries the
// payload (ShapeReply), as a list endpoint's small query and large answer.
const (
	ShapeEcho  = "echo"
	ShapeReply = "reply"
)

// Payload sizes a run takes: at least MinPayloadBytes (room for the JSON
// around the records) and at most MaxPayloadBytes (every caller's body is
// held in memory during its windows).
const (
	MinPayloadBytes = 64
	MaxPayloadBytes = 64 << 20
)

// Payload is what every RPC of a measurement sends and gets back. The zero
// Payload is the default tiny body, "ping N" for caller N.
type Payload struct {
	// Kind is PayloadJSON or PayloadBinary; "" for the default body.
	Kind string `json:"kind,omitempty"`
	// Bytes is the payload's size: the body's for JSON, the raw bytes'
	// for binary, whose body is their base64 encoding.
	Bytes int `json:"bytes,omitempty"`
	// Shape is ShapeReply when only the reply carries the payload (the
	// request is the tiny body); "" or ShapeEcho when the request carries
	// it and the reply echoes it.
	Shape string `json:"shape,omitempty"`
}

// replyOnly reports whether only the reply carries the payload.
func (p Payload) replyOnly() bool { return p.Shape == ShapeReply }

// tiny reports whether p is the default body.
func (p Payload) tiny() bool { return p.Kind == "" }

// Label names the payload in tables and JSON: "64KiB json", or "64KiB
// json reply" when only the reply carries it; "" for the default body.
func (p Payload) Label() string {
	if p.tiny() {
		return ""
	}
	if p.replyOnly() {
		return FormatSize(p.Bytes) + " " + p.Kind + " " + ShapeReply
	}
	return FormatSize(p.Bytes) + " " + p.Kind
}

// BodyBytes is the length of the message body that carries the payload.
func (p Payload) BodyBytes() int {
	if p.Kind == PayloadBinary {
		return base64.StdEncoding.EncodedLen(p.Bytes)
	}
	return p.Bytes
}

// payloadSeed seeds the bodies: caller N's is generated from payloadSeed+N,
// so that every run sends the same bytes and no two callers the same.
const payloadSeed = 34

// Body returns caller's body: for JSON, Bytes bytes of JSON text (a list
// endpoint's reply: records of users with ids, names, addresses, dates,
// tags and amounts, then one padding string to make the size exact); for
// binary, the base64 encoding of Bytes random bytes (Raw). Both are
// generated deterministically from a seed and caller, and differ between
// callers.
func (p Payload) Body(caller int) string {
	switch {
	case p.tiny():
		return "ping " + strconv.Itoa(caller)
	case p.Kind == PayloadBinary:
		return base64.StdEncoding.EncodeToString(p.Raw(caller))
	default:
		return jsonBody(p.Bytes, payloadSeed+uint64(caller))
	}
}

// Raw returns the random bytes of a binary payload for caller.
func (p Payload) Raw(caller int) []byte {
	var seed [32]byte
	binary.LittleEndian.PutUint64(seed[:], payloadSeed+uint64(caller))
	b := make([]byte, p.Bytes)
	_, _ = rand.NewChaCha8(seed).Read(b)
	return b
}

// ParseSize parses a size: a number of bytes, or with a unit B, KiB or
// MiB ("64KiB", "1MiB"), between MinPayloadBytes and MaxPayloadBytes.
func ParseSize(s string) (int, error) {
	v := strings.TrimSpace(s)
	mult := 1
	for _, u := range []struct {
		suffix string
		mult   int
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"B", 1}} {
		if num, ok := strings.CutSuffix(v, u.suffix); ok {
			v, mult = num, u.mult
			break
		}
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("%q is not a size: want bytes or a number with B, KiB or MiB, such as 1KiB, 64KiB, 256KiB, 1MiB", s)
	}
	if n > MaxPayloadBytes/mult || n*mult > MaxPayloadBytes {
		return 0, fmt.Errorf("%q is over the largest size the benchmark takes, %s", s, FormatSize(MaxPayloadBytes))
	}
	if n*mult < MinPayloadBytes {
		return 0, fmt.Errorf("%q is under the smallest size the benchmark takes, %d bytes", s, MinPayloadBytes)
	}
	return n * mult, nil
}

// FormatSize writes n as ParseSize reads it, in the largest unit that
// divides it: 65536 is "64KiB", 1000 "1000B".
func FormatSize(n int) string {
	switch {
	case n > 0 && n%(1<<20) == 0:
		return strconv.Itoa(n>>20) + "MiB"
	case n > 0 && n%(1<<10) == 0:
		return strconv.Itoa(n>>10) + "KiB"
	}
	return strconv.Itoa(n) + "B"
}

// ParseKinds parses comma-separated payload kinds.
func ParseKinds(kinds string) ([]string, error) {
	var ks []string
	for _, k := range strings.Split(kinds, ",") {
		k = strings.TrimSpace(k)
		if k != PayloadJSON && k != PayloadBinary {
			return nil, fmt.Errorf("kind %q: want %s", k, strings.Join(PayloadKinds, " or "))
		}
		ks = append(ks, k)
	}
	return ks, nil
}

// ParseShapes parses comma-separated payload shapes.
func ParseShapes(shapes string) ([]string, error) {
	var out []string
	for _, sh := range strings.Split(shapes, ",") {
		sh = strings.TrimSpace(sh)
		if sh != ShapeEcho && sh != ShapeReply {
			return nil, fmt.Errorf("shape %q: want %s or %s", sh, ShapeEcho, ShapeReply)
		}
		out = append(out, sh)
	}
	return out, nil
}

// ParsePayloads returns every size of sizes (comma-separated) in every
// kind of kinds and every shape of shapes (none: ShapeEcho), sizes
// outermost, then shapes.
func ParsePayloads(sizes string, kinds []string, shapes ...string) ([]Payload, error) {
	if len(shapes) == 0 {
		shapes = []string{ShapeEcho}
	}
	var out []Payload
	for _, s := range strings.Split(sizes, ",") {
		n, err := ParseSize(s)
		if err != nil {
			return nil, err
		}
		for _, sh := range shapes {
			if sh == ShapeEcho {
				sh = ""
			}
			for _, k := range kinds {
				out = append(out, Payload{Kind: k, Bytes: n, Shape: sh})
			}
		}
	}
	return out, nil
}

// overMax is the refusal of a body SQS cannot carry, as the tables show it.
var overMax = fmt.Sprintf("refused (over %d MiB)", sqsapi.MaxMessageSize>>20)

// refusedForSize reports whether err is SQS's (or the library's, before any
// call) refusal of a message too large: the one input of the benchmark's
// calls that a run varies.
func refusedForSize(err error) bool {
	if errors.Is(err, sqsapi.ErrInvalidInput) {
		return true
	}
	var ae smithy.APIError
	if errors.As(err, &ae) {
		code := ae.ErrorCode()
		return code == "InvalidParameterValue" && strings.Contains(ae.ErrorMessage(), "shorter than") ||
			strings.HasSuffix(code, "BatchRequestTooLong")
	}
	return false
}

// Words of the generated JSON records.
var (
	firstNames = []string{"Maria", "James", "Aiko", "Oluwaseun", "Chloé", "Mateo", "Priya", "Lars", "Fatima", "Wei", "Sofia", "Noah"}
	lastNames  = []string{"Garcia", "Smith", "Tanaka", "Adeyemi", "Dubois", "Rossi", "Sharma", "Nilsson", "Haddad", "Chen", "Novak", "Kim"}
	cities     = []string{"Lyon", "Osaka", "Lagos", "Porto", "Austin", "Malmö", "Pune", "Graz", "Leeds", "Quito"}
	streets    = []string{"Oak Street", "Rue de la Paix", "Harbour Road", "Via Roma", "Main Avenue", "Birch Lane"}
	countries  = []string{"FR", "JP", "NG", "PT", "US", "SE", "IN", "AT", "GB", "EC"}
	roles      = []string{"viewer", "editor", "admin", "billing", "support"}
	tags       = []string{"trial", "premium", "beta", "churn-risk", "enterprise", "newsletter", "mobile", "verified"}
	padChars   = "abcdefghijklmnopqrstuvwxyz0123456789"
)

// jsonBody returns exactly n bytes (n >= MinPayloadBytes) of JSON text:
// a page of user records drawn from a generator seeded with seed, then a
// "next" cursor string that pads it to n.
func jsonBody(n int, seed uint64) string {
	r := rand.New(rand.NewPCG(seed, 0x7465_6d70_7175_6575))
	var b strings.Builder
	b.Grow(n)
	b.WriteString(`{"page":` + strconv.FormatUint(seed, 10) + `,"items":[`)
	const tail = `],"next":""}`
	var rec []byte
	for i := 0; ; i++ {
		rec = appendRecord(rec[:0], r, seed*1_000_000+uint64(i))
		sep := 0
		if i > 0 {
			sep = 1
		}
		if b.Len()+sep+len(rec)+len(tail) > n {
			break
		}
		if sep > 0 {
			b.WriteByte(',')
		}
		b.Write(rec)
	}
	b.WriteString(`],"next":"`)
	for pad := n - b.Len() - 2; pad > 0; pad-- {
		b.WriteByte(padChars[r.IntN(len(padChars))])
	}
	b.WriteString(`"}`)
	return b.String()
}

// appendRecord appends one user record to b.
func appendRecord(b []byte, r *rand.Rand, id uint64) []byte {
	pick := func(s []string) string { return s[r.IntN(len(s))] }
	first, last := pick(firstNames), pick(lastNames)
	b = append(b, `{"id":`...)
	b = strconv.AppendUint(b, id, 10)
	b = append(b, `,"uuid":"`...)
	b = fmt.Appendf(b, "%016x%016x", r.Uint64(), r.Uint64())
	b = append(b, `","name":"`...)
	b = append(b, first+" "+last...)
	b = append(b, `","email":"`...)
	b = append(b, strings.ToLower(first+"."+last)...)
	b = append(b, `@example.com","role":"`...)
	b = append(b, pick(roles)...)
	b = append(b, `","created":"`...)
	b = fmt.Appendf(b, "20%02d-%02d-%02dT%02d:%02d:%02dZ", 20+r.IntN(7), 1+r.IntN(12), 1+r.IntN(28), r.IntN(24), r.IntN(60), r.IntN(60))
	b = append(b, `","active":`...)
	b = strconv.AppendBool(b, r.IntN(4) > 0)
	b = append(b, `,"balance":`...)
	b = strconv.AppendFloat(b, float64(r.IntN(1_000_000))/100, 'f', 2, 64)
	b = append(b, `,"tags":[`...)
	for i := range 1 + r.IntN(3) {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendQuote(b, pick(tags))
	}
	b = append(b, `],"address":{"street":"`...)
	b = strconv.AppendInt(b, int64(1+r.IntN(200)), 10)
	b = append(b, ' ')
	b = append(b, pick(streets)...)
	b = append(b, `","city":"`...)
	b = append(b, pick(cities)...)
	b = append(b, `","country":"`...)
	b = append(b, pick(countries)...)
	b = append(b, `"}}`...)
	return b
}
