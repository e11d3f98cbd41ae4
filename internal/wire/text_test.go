package wire

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/sqsapi"
)

// sqsAccepts is SQS's rule read straight from its documentation, rune by
// rune: the reference CheckText is held to.
func sqsAccepts(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		ok := r == 0x9 || r == 0xA || r == 0xD ||
			0x20 <= r && r <= 0xD7FF || 0xE000 <= r && r <= 0xFFFD || 0x10000 <= r && r <= 0x10FFFF
		if !ok {
			return false
		}
	}
	return true
}

// textSeeds are the edges of the rule; FuzzCheckText runs them as an
// ordinary test.
var textSeeds = []string{
	"", "hello", "tab\there", "line\nfeed", "cr\r", "\x7f del is allowed",
	"\x00", "nul\x00inside", "\x01", "\x08", "\x0b", "\x0c", "\x1f",
	"\ud7ff", "\ue000", "\ufffd", "\ufffe", "\uffff", "\U00010000", "\U0010ffff",
	"\xff", "\xc3", "caf\xc3", "\xed\xa0\x80", // a lone byte, a cut rune, an encoded surrogate
	"\xf4\x90\x80\x80", // above U+10FFFF
	"\xc0\x80",         // an overlong NUL
	"héllo wörld ✓ 😀",
}

func FuzzCheckText(f *testing.F) {
	for _, s := range textSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		err := CheckText("op", "MessageBody", s)
		if want := sqsAccepts(s); (err == nil) != want {
			t.Fatalf("CheckText(%+q) = %v, SQS accepts it: %v", s, err, want)
		}
		if err != nil && !errors.Is(err, sqsapi.ErrInvalidInput) {
			t.Fatalf("CheckText(%+q) = %v, not an ErrInvalidInput", s, err)
		}
	})
}

func TestCheckMessageText(t *testing.T) {
	str := func(v string) types.MessageAttributeValue { return StringAttribute(v) }
	list := func(v ...string) types.MessageAttributeValue {
		return types.MessageAttributeValue{DataType: aws.String("String.list"), StringListValues: v}
	}
	for _, c := range []struct {
		name  string
		body  *string
		attrs map[string]types.MessageAttributeValue
		param string // "" = accepted
	}{
		{"fine", aws.String("ok"), map[string]types.MessageAttributeValue{"a": str("v"), "b": list("x", "y")}, ""},
		{"nil body", nil, nil, ""},
		{"binary is not text", aws.String("ok"), map[string]types.MessageAttributeValue{"b": {DataType: aws.String("Binary"), BinaryValue: []byte{0, 0xff}}}, ""},
		{"NUL body", aws.String("a\x00"), nil, "MessageBody"},
		{"U+FFFE body", aws.String("\ufffe"), nil, "MessageBody"},
		{"bad UTF-8 body", aws.String("\xff"), nil, "MessageBody"},
		{"bad string value", aws.String("ok"), map[string]types.MessageAttributeValue{"a": str("\x00")}, "MessageAttributes"},
		{"bad number value", aws.String("ok"), map[string]types.MessageAttributeValue{"n": {DataType: aws.String("Number"), StringValue: aws.String("1\xff")}}, "MessageAttributes"},
		{"bad list value", aws.String("ok"), map[string]types.MessageAttributeValue{"l": list("fine", "\uffff")}, "MessageAttributes"},
	} {
		err := CheckMessageText("op", c.body, c.attrs)
		var ie *sqsapi.InvalidInputError
		switch {
		case c.param == "" && err != nil:
			t.Errorf("%s: err = %v", c.name, err)
		case c.param != "" && (!errors.As(err, &ie) || ie.Param != c.param):
			t.Errorf("%s: err = %v, want an InvalidInputError on %s", c.name, err, c.param)
		case c.param == "MessageAttributes" && !strings.Contains(err.Error(), "attribute \""):
			t.Errorf("%s: err = %v does not name the attribute", c.name, err)
		}
	}
}

func TestSafeText(t *testing.T) {
	for in, want := range map[string]string{
		"plain":             "plain",
		"nul\x00here":       "nul\uFFFDhere",
		"bad \xff utf8":     "bad \uFFFD utf8",
		"tab\tand\nnewline": "tab\tand\nnewline",
	} {
		if got := SafeText(in, 100); got != want || CheckText("", "", got) != nil {
			t.Errorf("SafeText(%q) = %q, want %q, text SQS takes", in, got, want)
		}
	}
	if got := SafeText("ab☺cd", 4); got != "ab" {
		t.Errorf("cut inside a rune: %q, want %q", got, "ab")
	}
}

// BenchmarkCheckText checks a 1 MiB JSON-like body, the common case.
func BenchmarkCheckText(b *testing.B) {
	s := strings.Repeat(`{"id":12345,"name":"item","tags":["a","b"]},`, 1<<20/45)
	b.SetBytes(int64(len(s)))
	for b.Loop() {
		if err := CheckText("op", "MessageBody", s); err != nil {
			b.Fatal(err)
		}
	}
}

// TestCheckTextFindsEveryPosition puts a character SQS refuses at every
// byte of a body long enough for the 32- and 8-byte strides, and their
// tails: each is found, at its byte.
func TestCheckTextFindsEveryPosition(t *testing.T) {
	base := strings.Repeat("0123456789abcdef", 5) // 80 bytes
	for _, bad := range []string{"\x00", "\x1f", "\xff", "\ufffe"} {
		for i := 0; i+len(bad) <= len(base); i++ {
			s := base[:i] + bad + base[i+len(bad):]
			want := fmt.Sprintf("byte %d", i)
			if p := textProblem(s); !strings.Contains(p, want) {
				t.Fatalf("%+q at %d: %q, want a problem at %s", bad, i, p, want)
			}
		}
	}
	if p := textProblem(base + "\t\r\n~ "); p != "" {
		t.Fatalf("printable text refused: %s", p)
	}
}
