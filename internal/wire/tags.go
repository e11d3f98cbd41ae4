package wire

import (
	"maps"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// SQS's rules for queue tags (the developer guide's queue quotas).
const (
	// MaxQueueTags is the most tags a queue should carry.
	MaxQueueTags = 50
	// MaxTagKeyLength and MaxTagValueLength are in characters.
	MaxTagKeyLength   = 128
	MaxTagValueLength = 256
)

// CheckQueueTags checks tags against SQS's rules for queue tags, leaving
// room for the reserved keys the library adds to the same queue: those keys
// are rejected, so a user's tag can neither override nor collide with them.
// Keys and values are UTF-8 of Unicode letters, digits, spaces and
// _ . : / = + - @; a key has 1 to 128 characters and a value at most 256;
// neither may start with the reserved prefix "aws:". It returns an
// *sqsapi.InvalidInputError naming op and param, reporting the first
// offending key in sorted order so the error is stable.
func CheckQueueTags(op, param string, tags map[string]string, reserved ...string) error {
	if max := MaxQueueTags - len(reserved); len(tags) > max {
		return Invalid(op, param, "%d tags exceed the %d left by SQS's limit of %d tags per queue (tempqueues adds %d)", len(tags), max, MaxQueueTags, len(reserved))
	}
	for _, k := range slices.Sorted(maps.Keys(tags)) {
		v := tags[k]
		switch {
		case slices.Contains(reserved, k):
			return Invalid(op, param, "tag %q is reserved: tempqueues sets it for the reaper", k)
		case k == "" || utf8.RuneCountInString(k) > MaxTagKeyLength:
			return Invalid(op, param, "tag key %q must have 1 to %d characters", k, MaxTagKeyLength)
		case utf8.RuneCountInString(v) > MaxTagValueLength:
			return Invalid(op, param, "the value of tag %q has more than %d characters", k, MaxTagValueLength)
		case !validTagText(k):
			return Invalid(op, param, "tag key %q must be UTF-8 letters, digits, spaces and _ . : / = + - @", k)
		case !validTagText(v):
			return Invalid(op, param, "the value of tag %q must be UTF-8 letters, digits, spaces and _ . : / = + - @", k)
		case awsPrefixed(k):
			return Invalid(op, param, "tag key %q starts with the prefix \"aws:\", which AWS reserves", k)
		case awsPrefixed(v):
			return Invalid(op, param, "the value of tag %q starts with the prefix \"aws:\", which AWS reserves", k)
		}
	}
	return nil
}

// validTagText reports whether s is valid UTF-8 of the characters SQS
// allows in tags: letters, digits (any script), space separators (the
// \p{Z} of AWS's tag pattern) and _ . : / = + - @.
func validTagText(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if !unicode.In(r, unicode.L, unicode.N, unicode.Z) && !strings.ContainsRune("_.:/=+-@", r) {
			return false
		}
	}
	return true
}

// awsPrefixed reports whether s starts with "aws:" in any case, as AWS
// reserves it case-insensitively.
func awsPrefixed(s string) bool {
	return len(s) >= 4 && strings.EqualFold(s[:4], "aws:")
}
