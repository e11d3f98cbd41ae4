package wire

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/sqsapi"
)

func TestStampDeadline(t *testing.T) {
	at := time.UnixMilli(1_800_000_000_123)
	attrs := func(n int) map[string]types.MessageAttributeValue {
		m := map[string]types.MessageAttributeValue{}
		for i := range n {
			m[fmt.Sprint("a", i)] = StringAttribute("v")
		}
		return m
	}
	plain, virtual := "http://127.0.0.1:1/000000000000/q", "http://127.0.0.1:1/000000000000/h#vq"
	big := strings.Repeat("x", sqsapi.MaxMessageSize-20)
	for _, c := range []struct {
		name     string
		attrs    int
		body     string
		queueURL string
		deadline time.Time
		want     bool
	}{
		{"room", 9, "b", plain, at, true},
		{"no room", 10, "b", plain, at, false},
		{"routing attribute to come", 9, "b", virtual, at, false},
		{"room beside routing", 8, "b", virtual, at, true},
		{"no deadline", 0, "b", plain, time.Time{}, false},
		{"too large", 0, big, plain, at, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := attrs(c.attrs)
			if got := StampDeadline(m, &c.body, c.queueURL, c.deadline); got != c.want {
				t.Fatalf("StampDeadline = %v, want %v", got, c.want)
			}
			d, ok, err := Deadline(types.Message{MessageAttributes: m})
			if err != nil || ok != c.want || (ok && !d.Equal(at)) {
				t.Fatalf("Deadline = %v, %v, %v; want %v, %v", d, ok, err, at, c.want)
			}
		})
	}
}

func TestDeadlineRejectsMalformedValues(t *testing.T) {
	for _, v := range []string{"", "soon", "-5", "0", "1.5", "99999999999999999999"} {
		m := types.Message{MessageAttributes: map[string]types.MessageAttributeValue{sqsapi.DeadlineAttribute: StringAttribute(v)}}
		if _, ok, err := Deadline(m); ok || err == nil {
			t.Errorf("Deadline(%q) = %v, %v; want an error", v, ok, err)
		}
	}
}

// FuzzDeadline checks that any attribute value parses to an error or to a
// deadline that formats back to the same milliseconds.
func FuzzDeadline(f *testing.F) {
	for _, s := range []string{"1800000000123", "0", "-1", "x", "", "9223372036854775807"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		m := types.Message{MessageAttributes: map[string]types.MessageAttributeValue{sqsapi.DeadlineAttribute: StringAttribute(v)}}
		d, ok, err := Deadline(m)
		if err != nil {
			return
		}
		if !ok || fmt.Sprint(d.UnixMilli()) != strings.TrimLeft(strings.TrimPrefix(v, "+"), "0") {
			t.Fatalf("Deadline(%q) = %v (%d ms), %v", v, d, d.UnixMilli(), ok)
		}
	})
}
