package responder

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/tempqueues/tempqueues/sqsapi"
)

// A reply to a FIFO response queue carries what SQS requires: the reply
// queue as its group, or the request id for a plain FIFO queue, and a
// deduplication id of its own; a reply to a standard queue carries neither.
func TestBuildReplyFIFOIDs(t *testing.T) {
	const host = "https://sqs.eu-west-1.amazonaws.com/1/h"
	for _, c := range []struct {
		url, requestID, group string
	}{
		{host + ".fifo#reply-1", "req-1", "reply-1"},
		{host + ".fifo", "req-1", "req-1"},
		{host + ".fifo", "has space", "hashed"},
		{host + "#reply-1", "req-1", ""},
		{host, "req-1", ""},
	} {
		req := msgWith(map[string]string{sqsapi.ResponseQueueURLAttribute: c.url, sqsapi.RequestIDAttribute: c.requestID})
		_, a, err := buildReply(req, &Reply{Body: "ok"}, nil, false)
		if err != nil {
			t.Fatal(err)
		}
		_, b, _ := buildReply(req, &Reply{Body: "ok"}, nil, false)
		switch g := aws.ToString(a.MessageGroupId); {
		case c.group == "":
			if a.MessageGroupId != nil || a.MessageDeduplicationId != nil {
				t.Errorf("%s: standard queue reply has group %v dedup %v", c.url, g, aws.ToString(a.MessageDeduplicationId))
			}
		case c.requestID == "has space":
			if len(g) != 64 {
				t.Errorf("%s: group %q, want a 64-digit hash of an invalid request id", c.url, g)
			}
		case g != c.group:
			t.Errorf("%s: group %q, want %q", c.url, g, c.group)
		}
		if c.group != "" && (a.MessageDeduplicationId == nil || *a.MessageDeduplicationId == aws.ToString(b.MessageDeduplicationId)) {
			t.Errorf("%s: dedup ids %v %v: want a new one per reply", c.url, aws.ToString(a.MessageDeduplicationId), aws.ToString(b.MessageDeduplicationId))
		}
	}
}
