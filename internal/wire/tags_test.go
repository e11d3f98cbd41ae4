package wire

import (
	"errors"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/tempqueues/tempqueues/sqsapi"
)

var reserved = []string{sqsapi.RetentionTag, sqsapi.HeartbeatTag}

func TestCheckQueueTags(t *testing.T) {
	many := func(n int) map[string]string {
		m := make(map[string]string, n)
		for i := range n {
			m["k"+strconv.Itoa(i)] = "v"
		}
		return m
	}
	good := []map[string]string{
		nil,
		{},
		{"team": "payments", "cost-center": "4711"},
		{"Owner": ""}, // values may be empty
		{"a b_c.d:e/f=g+h-i@j": "x y_z.1:2/3=4+5-6@7"},
		{"équipe": "données", "チーム": "決済", "٣": "٤"}, // letters and digits of any script
		{strings.Repeat("k", MaxTagKeyLength): strings.Repeat("v", MaxTagValueLength)},
		{strings.Repeat("é", MaxTagKeyLength): strings.Repeat("ü", MaxTagValueLength)}, // characters, not bytes
		{"awsaccount": "aws"},  // only the prefix "aws:" is reserved
		{"x": "my aws: thing"}, // not as a prefix
		many(MaxQueueTags - len(reserved)),
	}
	for _, tags := range good {
		if err := CheckQueueTags("op", "Tags", tags, reserved...); err != nil {
			t.Errorf("CheckQueueTags(%v) = %v", tags, err)
		}
	}
	bad := map[string]map[string]string{
		"too many":           many(MaxQueueTags - len(reserved) + 1),
		"retention key":      {sqsapi.RetentionTag: "60"},
		"heartbeat key":      {sqsapi.HeartbeatTag: "0"},
		"empty key":          {"": "v"},
		"long key":           {strings.Repeat("k", MaxTagKeyLength+1): "v"},
		"long value":         {"k": strings.Repeat("v", MaxTagValueLength+1)},
		"comma in key":       {"a,b": "v"},
		"comma in value":     {"k": "a,b"},
		"tab":                {"k": "a\tb"},
		"newline":            {"k\n": "v"},
		"quote":              {"k": `"v"`},
		"invalid utf-8 key":  {"k\xff": "v"},
		"invalid utf-8 val":  {"k": "\xc3"},
		"aws: key":           {"aws:team": "v"},
		"AWS: key any case":  {"AwS:team": "v"},
		"aws: value":         {"k": "aws:cloudformation"},
		"emoji (not letter)": {"k": "🙂"},
	}
	for name, tags := range bad {
		err := CheckQueueTags("hostq.New", "HostQueueTags", tags, reserved...)
		var ie *sqsapi.InvalidInputError
		if !errors.Is(err, sqsapi.ErrInvalidInput) || !errors.As(err, &ie) || ie.Op != "hostq.New" || ie.Param != "HostQueueTags" {
			t.Errorf("%s: CheckQueueTags = %v, want an InvalidInputError for hostq.New HostQueueTags", name, err)
		}
	}
	// Without reserved keys the whole 50 are the caller's.
	if err := CheckQueueTags("op", "Tags", many(MaxQueueTags)); err != nil {
		t.Errorf("50 tags without reserved keys: %v", err)
	}
	if err := CheckQueueTags("op", "Tags", many(MaxQueueTags+1)); err == nil {
		t.Error("51 tags accepted")
	}
}

// tagPattern is AWS's documented pattern for tag keys and values, an
// independent oracle for validTagText.
var tagPattern = regexp.MustCompile(`^[\p{L}\p{Z}\p{N}_.:/=+\-@]*$`)

func FuzzCheckQueueTags(f *testing.F) {
	for _, s := range [][2]string{{"team", "payments"}, {"aws:x", ""}, {"é", "ü"}, {"a\tb", "c"}, {"k\xff", "v"}, {sqsapi.RetentionTag, "1"}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, k, v string) {
		err := CheckQueueTags("op", "Tags", map[string]string{k: v}, reserved...)
		want := k != "" && utf8.ValidString(k) && utf8.ValidString(v) &&
			utf8.RuneCountInString(k) <= MaxTagKeyLength && utf8.RuneCountInString(v) <= MaxTagValueLength &&
			tagPattern.MatchString(k) && tagPattern.MatchString(v) &&
			!strings.HasPrefix(strings.ToLower(k), "aws:") && !strings.HasPrefix(strings.ToLower(v), "aws:") &&
			k != sqsapi.RetentionTag && k != sqsapi.HeartbeatTag
		if (err == nil) != want {
			t.Fatalf("CheckQueueTags(%q: %q) = %v, want accepted %v", k, v, err, want)
		}
		if err != nil && !errors.Is(err, sqsapi.ErrInvalidInput) {
			t.Fatalf("error %v does not match ErrInvalidInput", err)
		}
	})
}
