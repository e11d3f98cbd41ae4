package protocol

import (
	"bytes"
)

// encoding/json decodes a lone UTF-16 surrogate escape ("\ud83d" without
// its pair) as U+FFFD, which would silently change a message body. SQS
// rejects such a character with InvalidMessageContents, as this server does
// when the query protocol carries it (as invalid UTF-8). markLoneSurrogates
// rewrites each lone surrogate escape in a JSON request as \uffff, a
// character SQS does not allow either, so that the same checks reject it
// wherever it appears (message bodies, attribute values). It returns body
// itself, unchanged, when there is none: the usual case costs a scan.
func markLoneSurrogates(body []byte) []byte {
	if !bytes.Contains(body, []byte(`\u`)) {
		return body
	}
	var out []byte
	for i := 0; i < len(body); i++ {
		if body[i] != '\\' || i+1 >= len(body) {
			continue
		}
		if body[i+1] != 'u' {
			i++ // an escaped character, perhaps a backslash
			continue
		}
		r, ok := hex4(body, i+2)
		if !ok || r < 0xD800 || r > 0xDFFF {
			i += 5
			continue
		}
		if r < 0xDC00 { // high: a low one must follow
			if lo, ok := hex4(body, i+8); ok && i+7 < len(body) && body[i+6] == '\\' && body[i+7] == 'u' && lo >= 0xDC00 && lo <= 0xDFFF {
				i += 11
				continue
			}
		}
		if out == nil {
			out = bytes.Clone(body)
		}
		copy(out[i+2:i+6], "ffff")
		i += 5
	}
	if out == nil {
		return body
	}
	return out
}

// hex4 reads four hex digits at b[i:].
func hex4(b []byte, i int) (rune, bool) {
	if i < 0 || i+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}
