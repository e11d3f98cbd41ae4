package wire

import (
	"fmt"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// textProblem describes the first thing in s that SQS does not accept in
// a body or a string attribute value, or returns "". SQS accepts valid
// UTF-8 of #x9, #xA, #xD, #x20-#xD7FF, #xE000-#xFFFD and
// #x10000-#x10FFFF; valid UTF-8 already excludes the surrogates and
// anything above #x10FFFF, which leaves the other control characters,
// U+FFFE and U+FFFF.
func textProblem(s string) string {
	for i := 0; i < len(s); {
		// 32, then 8 bytes at a time while they are printable ASCII,
		// which is nearly all of a JSON or base64 body: a byte loop made
		// this check most of the CPU a 16 MiB body cost, and it runs on
		// every body sent and every body read from a store.
		for i+32 <= len(s) {
			if notPrintable(word(s, i))|notPrintable(word(s, i+8))|
				notPrintable(word(s, i+16))|notPrintable(word(s, i+24)) != 0 {
				break
			}
			i += 32
		}
		for i+8 <= len(s) && notPrintable(word(s, i)) == 0 {
			i += 8
		}
		if i >= len(s) {
			break
		}
		c := s[i]
		if c < utf8.RuneSelf {
			if c < 0x20 && c != '\t' && c != '\n' && c != '\r' {
				return fmt.Sprintf("%U at byte %d is not a character SQS accepts", c, i)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			return fmt.Sprintf("invalid UTF-8 at byte %d", i)
		case r == 0xFFFE || r == 0xFFFF:
			return fmt.Sprintf("%U at byte %d is not a character SQS accepts", r, i)
		}
		i += size
	}
	return ""
}

// word is the eight bytes of s at i, little-endian; the compiler makes it
// one load.
func word(s string, i int) uint64 {
	s = s[i : i+8]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

// notPrintable is non-zero when a byte of w is at or above 0x80, or below
// 0x20 (its subtraction borrows into its top bit).
func notPrintable(w uint64) uint64 {
	return (w | (w - 0x2020202020202020)) & 0x8080808080808080
}

// SafeText returns s as SQS accepts it, for text the library passes on
// (an error's message in a session's abort): what SQS refuses becomes
// U+FFFD, and the text is cut to at most max bytes, on a rune boundary.
func SafeText(s string, max int) string {
	if textProblem(s) != "" {
		b := make([]rune, 0, len(s))
		for _, r := range s {
			if r < 0x20 && r != '\t' && r != '\n' && r != '\r' || r == 0xFFFE || r == 0xFFFF {
				r = utf8.RuneError
			}
			b = append(b, r) // invalid UTF-8 ranges as utf8.RuneError already
		}
		s = string(b)
	}
	if len(s) > max {
		cut := max
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut]
	}
	return s
}

// CheckText rejects s unless SQS accepts it as a message body or string
// attribute value: valid UTF-8 of #x9, #xA, #xD, #x20-#xD7FF,
// #xE000-#xFFFD and #x10000-#x10FFFF. Without the check a NUL or U+FFFE
// fails only as a batch entry's InvalidMessageContents, and invalid UTF-8
// is delivered altered and fails the SDK's checksum although it went out.
func CheckText(op, param, s string) error {
	if p := textProblem(s); p != "" {
		return Invalid(op, param, "%s", p)
	}
	return nil
}

// CheckMessageText applies CheckText to a message's body and to the
// string values (StringValue and StringListValues) of its attributes.
func CheckMessageText(op string, body *string, attrs map[string]types.MessageAttributeValue) error {
	if body != nil {
		if err := CheckText(op, "MessageBody", *body); err != nil {
			return err
		}
	}
	for name, v := range attrs {
		if v.StringValue != nil {
			if p := textProblem(*v.StringValue); p != "" {
				return Invalid(op, "MessageAttributes", "attribute %q: %s", name, p)
			}
		}
		for _, s := range v.StringListValues {
			if p := textProblem(s); p != "" {
				return Invalid(op, "MessageAttributes", "attribute %q: %s", name, p)
			}
		}
	}
	return nil
}
