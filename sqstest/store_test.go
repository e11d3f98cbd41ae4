package sqstest_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/tempqueues/tempqueues/sqstest"
)

// A receive walks only the messages that may be visible: in-flight and
// delayed messages of a standard queue wait apart, ordered by the time they
// become visible, and come back when it passes.
func TestReceiveSkipsInFlightWithoutWalking(t *testing.T) {
	srv, clock, c := stateServer(t)
	ctx := context.Background()
	url := newQueue(t, c, "busy", map[string]string{"VisibilityTimeout": "30"})
	batch := make([]sqstest.Message, 1000)
	for i := range batch {
		batch[i] = sqstest.Message{Body: "in flight", ReceiveCount: 1, VisibleAt: clock.Now().Add(time.Duration(60+i) * time.Second)}
	}
	if err := srv.Seed("busy", batch...); err != nil {
		t.Fatal(err)
	}
	if err := srv.Seed("busy", sqstest.Message{Body: "visible"}, sqstest.Message{Body: "delayed", VisibleAt: clock.Now().Add(10 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	if n := sqstest.ListedMessages(srv, "busy"); n != 1 {
		t.Fatalf("a receive would walk %d messages, want 1 (the visible one)", n)
	}
	got := receive(t, c, url, 10)
	if len(got) != 1 || *got[0].Body != "visible" {
		t.Fatalf("received %d messages", len(got))
	}
	if n := sqstest.ListedMessages(srv, "busy"); n != 0 {
		t.Fatalf("after the receive, %d messages to walk, want 0", n)
	}
	clock.Advance(10 * time.Second)
	if got := receive(t, c, url, 10); len(got) != 1 || *got[0].Body != "delayed" {
		t.Fatalf("after the delay: %d messages", len(got))
	}
	clock.Advance(25 * time.Second) // the first receive's timeout has ended
	if got := receive(t, c, url, 10); len(got) != 1 || *got[0].Body != "visible" {
		t.Fatalf("after the visibility timeout: %d messages", len(got))
	}
	// ChangeMessageVisibility to 0 brings a message back at once.
	// At 65 s: six seeded messages, "delayed" and "visible" again.
	clock.Advance(30 * time.Second)
	first := receive(t, c, url, 10)
	if len(first) != 8 {
		t.Fatalf("at 65 s: %d messages, want 8", len(first))
	}
	if _, err := c.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: &url,
		ReceiptHandle: first[0].ReceiptHandle, VisibilityTimeout: 0}); err != nil {
		t.Fatal(err)
	}
	if got := receive(t, c, url, 10); len(got) != 1 || *got[0].MessageId != *first[0].MessageId {
		t.Fatalf("after ChangeMessageVisibility 0: %d messages", len(got))
	}
	a, _ := srv.QueueAttributes(url)
	if a["ApproximateNumberOfMessagesNotVisible"] != "1002" || a["ApproximateNumberOfMessages"] != "0" {
		t.Fatalf("counts %s visible, %s not", a["ApproximateNumberOfMessages"], a["ApproximateNumberOfMessagesNotVisible"])
	}
}
