package wire

import (
	"errors"
	"strings"
	"testing"

	"github.com/tempqueues/tempqueues/sqsapi"
)

func TestParseVirtualQueueURL(t *testing.T) {
	const host = "https://sqs.us-east-1.amazonaws.com/123456789012/__RequesterClientQueues__abc-0"
	good := []struct{ in, name string }{
		{host + "#reply", "reply"},
		{host + "#a-B_9", "a-B_9"},
		{"http://127.0.0.1:4566/000000000000/h#x", "x"},
		{host + "#" + strings.Repeat("n", 80), strings.Repeat("n", 80)},
	}
	for _, c := range good {
		h, n, err := ParseVirtualQueueURL(c.in)
		if err != nil || n != c.name || !strings.HasPrefix(c.in, h+"#") {
			t.Errorf("ParseVirtualQueueURL(%q) = %q, %q, %v", c.in, h, n, err)
		}
		if VirtualQueueURL(h, n) != c.in {
			t.Errorf("round trip of %q failed", c.in)
		}
	}
	bad := []string{
		host,                                 // not virtual
		"#name",                              // no host
		host + "#",                           // no name
		host + "#bad name",                   // space
		host + "#a#b",                        // second '#'
		host + "#" + strings.Repeat("n", 81), // too long
		host + "#q.fifo",                     // virtual queues are never FIFO
		"not a url#name",
		"https://sqs.example.com#name", // no queue path
	}
	for _, in := range bad {
		_, _, err := ParseVirtualQueueURL(in)
		var ie *sqsapi.InvalidInputError
		if !errors.As(err, &ie) || !errors.Is(err, sqsapi.ErrInvalidInput) {
			t.Errorf("ParseVirtualQueueURL(%q) = %v, want *sqsapi.InvalidInputError", in, err)
		}
	}
}

func FuzzParseVirtualQueueURL(f *testing.F) {
	for _, s := range []string{
		"https://sqs.us-east-1.amazonaws.com/1/h#v", "#", "a#b#c", "http://x/y#", "http://x/y#" + strings.Repeat("z", 90),
		"http://127.0.0.1:1/000000000000/q#n-_1", "\x00#\x00", "http://x/y#ünï",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		h, n, err := ParseVirtualQueueURL(s)
		if err != nil {
			if !errors.Is(err, sqsapi.ErrInvalidInput) {
				t.Fatalf("error %v is not ErrInvalidInput", err)
			}
			return
		}
		if !IsVirtualQueueURL(s) || IsVirtualQueueURL(h) || strings.Contains(n, "#") {
			t.Fatalf("%q parsed into host %q name %q", s, h, n)
		}
		if VirtualQueueURL(h, n) != s {
			t.Fatalf("round trip of %q gave %q", s, VirtualQueueURL(h, n))
		}
		if !ValidQueueName(n) || len(n) == 0 || len(n) > MaxQueueNameLength {
			t.Fatalf("invalid name %q accepted", n)
		}
	})
}
