package payload

import (
	"bytes"
	"compress/gzip"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/internal/testkit/testbody"
	"github.com/tempqueues/tempqueues/internal/wire"
	"github.com/tempqueues/tempqueues/sqsapi"
)

// encoded returns a received message whose body travels compressed, as
// Encode sends it.
func encoded(tb testing.TB, body string) types.Message {
	tb.Helper()
	attrs := map[string]types.MessageAttributeValue{"user": wire.StringAttribute("x")}
	sent, ok := Encode(body, attrs, 1)
	if !ok {
		tb.Fatalf("Encode left a %d-byte body plain", len(body))
	}
	return types.Message{Body: aws.String(sent), MessageAttributes: attrs, MD5OfBody: aws.String("of the placeholder")}
}

// noise returns n bytes of random characters, one and two bytes long in
// UTF-8, whose bytes are spread too evenly for gzip to save a tenth.
func noise(n int) string {
	rng := rand.New(rand.NewPCG(1, 2))
	var b strings.Builder
	for b.Len() < n-1 {
		if rng.IntN(2) == 0 {
			b.WriteByte(byte(0x20 + rng.IntN(95)))
		} else {
			b.WriteRune(rune(0x80 + rng.IntN(0x780)))
		}
	}
	for b.Len() < n {
		b.WriteByte('.')
	}
	return b.String()
}

func gzipped(s string) []byte {
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	_, _ = w.Write([]byte(s))
	_ = w.Close()
	return b.Bytes()
}

func carrier(z []byte) types.Message {
	return types.Message{Body: aws.String(Placeholder), MessageAttributes: map[string]types.MessageAttributeValue{
		BodyAttribute: {DataType: aws.String(DataType), BinaryValue: z},
	}}
}

// TestEncodeStopsPastOneMessage: a body whose gzip stream passes what one
// message holds is sent plain (its sender offloads it or sends it in
// parts), and compress stops early: a limit cuts the work, not just the
// result.
func TestEncodeStopsPastOneMessage(t *testing.T) {
	t.Parallel()
	body := testbody.Text(3<<20, 2) // gzip leaves more than 1 MiB
	attrs := map[string]types.MessageAttributeValue{}
	if sent, ok := Encode(body, attrs, 1); ok || sent != body || len(attrs) != 0 {
		t.Fatalf("Encode compressed a body that cannot fit (ok %v, %d attributes)", ok, len(attrs))
	}
	if z, ok := compress(body, 1<<20, false, 0); ok || z != nil {
		t.Fatalf("compress past its limit: ok %v, %d bytes", ok, len(z))
	}
	if z, ok := compress(body, len(body), false, 0); !ok || len(z) <= sqsapi.MaxMessageSize {
		t.Fatalf("compress within its limit: ok %v, %d bytes; the test body should not fit compressed", ok, len(z))
	}
}

// TestEncodeWithinAStoreLimit: a sender with a store keeps in SQS what
// compresses within StoreAbove, and gives up on the rest.
func TestEncodeWithinAStoreLimit(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		body       string
		compressed bool
	}{
		{testbody.JSON(1<<20, 1), true},  // about a fifth: in SQS
		{testbody.JSON(4<<20, 1), false}, // about 900 KiB: to the store
		{testbody.Random(1<<20, 1), false},
	} {
		attrs := map[string]types.MessageAttributeValue{}
		_, ok := EncodeWithin(c.body, attrs, 1, StoreAbove)
		if ok != c.compressed {
			t.Errorf("EncodeWithin(%d bytes, StoreAbove) compressed %v, want %v", len(c.body), ok, c.compressed)
		}
		if ok && len(attrs[BodyAttribute].BinaryValue) > StoreAbove {
			t.Errorf("a %d-byte carrier kept for a %d-byte limit", len(attrs[BodyAttribute].BinaryValue), StoreAbove)
		}
	}
	// Without a store the 4 MiB compress whole: within 1 MiB they fit.
	if _, ok := Encode(testbody.JSON(4<<20, 1), map[string]types.MessageAttributeValue{}, 1); !ok {
		t.Error("Encode left 4 MiB of JSON plain, which fits in a message compressed")
	}
	// The guess is made on the first 256 KiB, and is only a guess: a
	// body that starts with noise and goes on with JSON would come within
	// the limit whole, but is given up on at the guess.
	mixed := testbody.Random(guessAfter, 2) + testbody.JSON(768<<10, 2)
	if _, ok := compress(mixed, StoreAbove, false, 0); !ok {
		t.Fatal("the mixed body does not come within StoreAbove compressed whole")
	}
	if _, ok := compress(mixed, StoreAbove, true, 0); ok {
		t.Error("compress with a guess went on past a first 256 KiB that foretold too much")
	}
}

func TestRoundTrip(t *testing.T) {
	t.Parallel()
	for _, body := range []string{testbody.JSON(200<<10, 1), testbody.Text(1<<20, 2), testbody.JSON(3<<20, 2), testbody.JSON(Threshold, 3), strings.Repeat("é", 5000)} {
		m := encoded(t, body)
		if aws.ToString(m.Body) != Placeholder {
			t.Fatalf("body sent = %q, want the placeholder", aws.ToString(m.Body))
		}
		if n := wire.MessageSize(m.Body, m.MessageAttributes); 10*n > 9*len(body) {
			t.Errorf("a %d-byte body travels in %d bytes: no saving", len(body), n)
		}
		got, accept, err := Decode(m)
		if err != nil {
			t.Fatal(err)
		}
		if aws.ToString(got.Body) != body || accept {
			t.Errorf("Decode: body of %d bytes (want %d), accept %v", len(aws.ToString(got.Body)), len(body), accept)
		}
		if _, ok := got.MessageAttributes[BodyAttribute]; ok {
			t.Error("Decode left the carrier attribute")
		}
		if _, ok := got.MessageAttributes["user"]; !ok {
			t.Error("Decode dropped the user's attribute")
		}
		if _, ok := m.MessageAttributes[BodyAttribute]; !ok {
			t.Error("Decode changed the received message's attributes")
		}
	}
}

// TestEncodeOnlyWhenItPays: a body below the threshold, one that
// shrinks by less than a tenth, base64 of random bytes that would take
// as many billed chunks compressed, or a message without room for the
// carrier stay as they are.
func TestEncodeOnlyWhenItPays(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		body string
		room int
		want bool
	}{
		{"below the threshold", testbody.JSON(Threshold-1, 1), 1, false},
		{"at the threshold", testbody.JSON(Threshold, 1), 1, true},
		{"no room", testbody.JSON(64<<10, 1), 0, false},
		{"base64 shrinks by a fifth: a chunk less", testbody.Random(72<<10, 1), 1, true},
		{"base64 shrinks by a fifth: as many chunks", testbody.Random(64<<10, 1), 1, false},
		{"base64 shrinks by a fifth: as many chunks of several", testbody.Random(87384, 1), 1, false},
		{"base64 of 256 KiB: a chunk less", testbody.Random(349528, 1), 1, true},
		{"noise shrinks by too little", noise(64 << 10), 1, false},
		{"past MaxInflated", strings.Repeat("a", MaxInflated+1), 1, false},
	}
	for _, c := range cases {
		attrs := map[string]types.MessageAttributeValue{}
		body, ok := Encode(c.body, attrs, c.room)
		_, carried := attrs[BodyAttribute]
		if ok != c.want || carried != c.want || (body == c.body) == c.want {
			t.Errorf("%s: Encode compressed %v (carrier %v), want %v", c.name, ok, carried, c.want)
		}
	}
}

func TestDecodePlain(t *testing.T) {
	t.Parallel()
	m := types.Message{Body: aws.String("plain"), MessageAttributes: map[string]types.MessageAttributeValue{"a": wire.StringAttribute("b")}}
	got, accept, err := Decode(m)
	if err != nil || accept || aws.ToString(got.Body) != "plain" || len(got.MessageAttributes) != 1 {
		t.Errorf("Decode(plain) = %v, %v, %v", got, accept, err)
	}
}

func TestAccept(t *testing.T) {
	t.Parallel()
	attrs := map[string]types.MessageAttributeValue{"a": wire.StringAttribute("b")}
	if !Advertise(attrs, aws.String("x"), "https://sqs.us-east-1.amazonaws.com/1/q", Codec) {
		t.Fatal("Advertise found no room in a message with one attribute")
	}
	m := types.Message{Body: aws.String("x"), MessageAttributes: attrs}
	got, accept, err := Decode(m)
	if err != nil || !accept {
		t.Fatalf("Decode: accept %v, err %v", accept, err)
	}
	if _, ok := got.MessageAttributes[AcceptAttribute]; ok || len(got.MessageAttributes) != 1 {
		t.Errorf("Decode left %v", got.MessageAttributes)
	}
	for v, want := range map[string]bool{"gzip": true, "zstd, gzip": true, "zstd": false, "gzip2": false, "": false} {
		if got := Accepts(map[string]types.MessageAttributeValue{AcceptAttribute: wire.StringAttribute(v)}); got != want {
			t.Errorf("Accepts(%q) = %v, want %v", v, got, want)
		}
	}
	// No room: nine attributes, and a virtual queue's routing one to come.
	full := map[string]types.MessageAttributeValue{}
	for _, n := range []string{"1", "2", "3", "4", "5", "6", "7", "8", "9"} {
		full[n] = wire.StringAttribute(n)
	}
	if Advertise(full, aws.String("x"), "https://sqs.us-east-1.amazonaws.com/1/q#v", Codec) {
		t.Error("Advertise added an eleventh attribute")
	}
	if !Advertise(full, aws.String("x"), "https://sqs.us-east-1.amazonaws.com/1/q", Codec) {
		t.Error("Advertise found no room for a tenth attribute")
	}
}

func TestDecodeRefuses(t *testing.T) {
	t.Parallel()
	bomb := gzipped(strings.Repeat("a", MaxInflated+1))
	if len(bomb) > 100<<10 {
		t.Fatalf("the bomb is %d bytes: no bomb", len(bomb))
	}
	json := gzipped(testbody.JSON(4<<10, 1))
	cases := []struct {
		name string
		m    types.Message
		want error
	}{
		{"a zip bomb", carrier(bomb), ErrTooLarge},
		{"not gzip", carrier([]byte("not gzip at all")), ErrCorrupt},
		{"truncated", carrier(json[:len(json)/2]), ErrCorrupt},
		{"trailing garbage", carrier(append(json[:len(json):len(json)], "garbage"...)), ErrCorrupt},
		{"empty", carrier(gzipped("")), ErrCorrupt},
		{"not SQS text", carrier(gzipped("nul \x00 inside")), ErrCorrupt},
		{"invalid UTF-8", carrier(gzipped("\xff\xfe")), ErrCorrupt},
		{"another codec", types.Message{Body: aws.String(Placeholder), MessageAttributes: map[string]types.MessageAttributeValue{
			BodyAttribute: {DataType: aws.String("Binary.zstd"), BinaryValue: json},
		}}, ErrCorrupt},
		{"a String carrier", types.Message{Body: aws.String(Placeholder), MessageAttributes: map[string]types.MessageAttributeValue{
			BodyAttribute: wire.StringAttribute("x"),
		}}, ErrCorrupt},
	}
	for _, c := range cases {
		if _, _, err := Decode(c.m); !errors.Is(err, c.want) {
			t.Errorf("%s: Decode error %v, want %v", c.name, err, c.want)
		}
	}
	// Exactly MaxInflated is allowed.
	if _, _, err := Decode(carrier(gzipped(strings.Repeat("a", MaxInflated)))); err != nil {
		t.Errorf("Decode of exactly MaxInflated: %v", err)
	}
}

// FuzzDecode feeds Decode arbitrary carriers: it must not panic, and what
// it accepts is text SQS carries, within MaxInflated, without the
// carrier attribute.
func FuzzDecode(f *testing.F) {
	f.Add(gzipped("hello"), DataType)
	f.Add(gzipped(testbody.JSON(2<<10, 1)), DataType)
	f.Add([]byte{0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff}, DataType)
	f.Add([]byte("plain"), "Binary")
	f.Fuzz(func(t *testing.T, z []byte, dataType string) {
		m := types.Message{Body: aws.String(Placeholder), MessageAttributes: map[string]types.MessageAttributeValue{
			BodyAttribute:   {DataType: aws.String(dataType), BinaryValue: z},
			AcceptAttribute: wire.StringAttribute(Codec),
		}}
		got, _, err := Decode(m)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrTooLarge) {
				t.Fatalf("Decode error %v matches neither ErrCorrupt nor ErrTooLarge", err)
			}
			return
		}
		body := aws.ToString(got.Body)
		if len(body) == 0 || len(body) > MaxInflated || wire.CheckText("", "", body) != nil {
			t.Fatalf("Decode accepted a body of %d bytes SQS would not carry", len(body))
		}
		if len(got.MessageAttributes) != 0 {
			t.Fatalf("Decode left attributes %v", got.MessageAttributes)
		}
	})
}
