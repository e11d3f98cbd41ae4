package sqstest_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/sqstest"
)

// Tests of the direct state API: Seed, Messages, QueueURLs, QueueAttributes
// and QueueTags.

func stateServer(t *testing.T) (*sqstest.Server, *sqstest.Clock, *sqs.Client) {
	clock := sqstest.NewClock(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
	srv := sqstest.Start(t, func(o *sqstest.Options) { o.Clock = clock })
	return srv, clock, srv.Client(func(o *sqs.Options) { o.RetryMaxAttempts = 1 })
}

func messages(t *testing.T, srv *sqstest.Server, queue string) []sqstest.Message {
	t.Helper()
	ms, err := srv.Messages(queue)
	if err != nil {
		t.Fatal(err)
	}
	return ms
}

func receive(t *testing.T, c *sqs.Client, url string, max int32) []types.Message {
	t.Helper()
	out, err := c.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: &url, MaxNumberOfMessages: max,
		MessageAttributeNames:       []string{"All"},
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll}})
	if err != nil {
		t.Fatal(err)
	}
	return out.Messages
}

// Seeded messages, attributes included, are received through the SDK,
// which checks their MD5 digests.
func TestSeedReceivedBySDK(t *testing.T) {
	srv, _, c := stateServer(t)
	url := newQueue(t, c, "jobs", nil)
	err := srv.Seed("jobs",
		sqstest.Message{Body: "a", Attributes: map[string]types.MessageAttributeValue{
			"kind": {DataType: aws.String("String"), StringValue: aws.String("resize")},
			"blob": {DataType: aws.String("Binary"), BinaryValue: []byte{1, 2, 3}},
		}},
		sqstest.Message{Body: "b"})
	if err != nil {
		t.Fatal(err)
	}
	got := receive(t, c, url, 10)
	if len(got) != 2 {
		t.Fatalf("received %d messages, want 2", len(got))
	}
	for _, m := range got {
		if *m.Body == "a" && aws.ToString(m.MessageAttributes["kind"].StringValue) != "resize" {
			t.Fatalf("attributes %v", m.MessageAttributes)
		}
	}
}

func TestSeedValidatesAndAddsAllOrNothing(t *testing.T) {
	srv, clock, c := stateServer(t)
	newQueue(t, c, "std", nil)
	newQueue(t, c, "f.fifo", map[string]string{"FifoQueue": "true"})
	now := clock.Now()
	for _, tc := range []struct {
		queue string
		m     sqstest.Message
		want  string
	}{
		{"missing", sqstest.Message{Body: "x"}, "QueueDoesNotExist"},
		{"std", sqstest.Message{}, "MissingParameter"},
		{"std", sqstest.Message{Body: "\x00"}, "InvalidMessageContents"},
		{"std", sqstest.Message{Body: strings.Repeat("x", 1<<20+1)}, "shorter than"},
		{"std", sqstest.Message{Body: "x", ReceiveCount: -1}, "negative"},
		{"std", sqstest.Message{Body: "x", SentAt: now.Add(time.Second)}, "after the server's now"},
		{"std", sqstest.Message{Body: "x", VisibleAt: now.Add(16 * time.Minute)}, "15 min"},
		{"std", sqstest.Message{Body: "x", ReceiveCount: 1, VisibleAt: now.Add(13 * time.Hour)}, "12 h"},
		{"f.fifo", sqstest.Message{Body: "x", DeduplicationID: "d"}, "MessageGroupId"},
		{"f.fifo", sqstest.Message{Body: "x", GroupID: "g"}, "ContentBasedDeduplication"},
	} {
		fine := sqstest.Message{Body: "fine"}
		if strings.HasSuffix(tc.queue, ".fifo") {
			fine.GroupID, fine.DeduplicationID = "g", "ok"
		}
		err := srv.Seed(tc.queue, fine, tc.m)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Seed(%s, %+v) = %v, want an error with %q", tc.queue, tc.m.Body, err, tc.want)
		}
	}
	for _, q := range []string{"std", "f.fifo"} {
		if ms := messages(t, srv, q); len(ms) != 0 {
			t.Errorf("%s holds %d messages after failed seeds, want none", q, len(ms))
		}
	}
}

// A message seeded in flight hides until its visibility deadline, its
// receipt handle works, and its receive count carries on.
func TestSeedInFlight(t *testing.T) {
	srv, clock, c := stateServer(t)
	url := newQueue(t, c, "work", nil)
	deadline := clock.Now().Add(time.Minute)
	if err := srv.Seed(url, sqstest.Message{Body: "held", ReceiveCount: 2, VisibleAt: deadline},
		sqstest.Message{Body: "deleted", ReceiveCount: 1, VisibleAt: deadline}); err != nil {
		t.Fatal(err)
	}
	ms := messages(t, srv, "work")
	handles := sqstest.ReceiptHandles(srv, "work")
	if len(ms) != 2 || ms[0].ReceiveCount != 2 || !ms[0].VisibleAt.Equal(deadline) || len(handles) != 2 || handles[1] == "" {
		t.Fatalf("seeded in-flight messages look like %+v, handles %q", ms, handles)
	}
	if n := len(receive(t, c, url, 10)); n != 0 {
		t.Fatalf("received %d in-flight messages", n)
	}
	if _, err := c.DeleteMessage(context.Background(), &sqs.DeleteMessageInput{QueueUrl: &url, ReceiptHandle: &handles[1]}); err != nil {
		t.Fatalf("deleting with the seeded receipt handle: %v", err)
	}
	clock.Advance(time.Minute)
	got := receive(t, c, url, 10)
	if len(got) != 1 || *got[0].Body != "held" || got[0].Attributes["ApproximateReceiveCount"] != "3" {
		t.Fatalf("after the deadline received %+v, want held with receive count 3", got)
	}
}

// Seeding wakes a parked long poll: at once for a visible message, when
// the clock passes VisibleAt for a delayed one.
func TestSeedWakesParkedReceive(t *testing.T) {
	srv, clock, c := stateServer(t)
	url := newQueue(t, c, "q", nil)

	ch := receiveAsync(c, url, 20)
	waitParked(t, srv, 1)
	if err := srv.Seed("q", sqstest.Message{Body: "now"}); err != nil {
		t.Fatal(err)
	}
	wantResult(t, ch, 1)

	ch = receiveAsync(c, url, 20)
	waitParked(t, srv, 1)
	if err := srv.Seed("q", sqstest.Message{Body: "later", VisibleAt: clock.Now().Add(10 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	if ms := messages(t, srv, "q"); len(ms) != 2 || ms[1].ReceiveCount != 0 || !ms[1].VisibleAt.After(clock.Now()) {
		t.Fatalf("messages %+v, want the second delayed", ms)
	}
	wantPending(t, ch)
	clock.Advance(10 * time.Second)
	if out := wantResult(t, ch, 1); *out.Messages[0].Body != "later" {
		t.Fatalf("received %q", *out.Messages[0].Body)
	}
}

// A message seeded with maxReceiveCount receives goes to the dead-letter
// queue at the next receive, and Messages shows it there.
func TestSeedReceiveCountRedrives(t *testing.T) {
	srv, clock, c := stateServer(t)
	dlq := newQueue(t, c, "dlq", nil)
	attrs, err := srv.QueueAttributes(dlq)
	if err != nil {
		t.Fatal(err)
	}
	url := newQueue(t, c, "src", map[string]string{
		"RedrivePolicy": `{"deadLetterTargetArn":"` + attrs["QueueArn"] + `","maxReceiveCount":"3"}`})
	if err := srv.Seed("src", sqstest.Message{Body: "poison", ReceiveCount: 3}, sqstest.Message{Body: "ok"}); err != nil {
		t.Fatal(err)
	}
	if got := receive(t, c, url, 10); len(got) != 1 || *got[0].Body != "ok" {
		t.Fatalf("received %+v, want only ok", got)
	}
	ms := messages(t, srv, "dlq")
	if len(ms) != 1 || ms[0].Body != "poison" || ms[0].VisibleAt.After(clock.Now()) || ms[0].ReceiveCount != 3 {
		t.Fatalf("dead-letter queue holds %+v", ms)
	}
}

// Messages reports what SDK calls did: in flight with the receive's
// deadline, FIFO sequence numbers in send order; expired messages go.
func TestMessagesAfterSDKCalls(t *testing.T) {
	srv, clock, c := stateServer(t)
	ctx := context.Background()
	url := newQueue(t, c, "f.fifo", map[string]string{"FifoQueue": "true", "ContentBasedDeduplication": "true",
		"VisibilityTimeout": "30", "MessageRetentionPeriod": "60"})
	for i := range 3 {
		if _, err := c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String("m" + strconv.Itoa(i)),
			MessageGroupId: aws.String("g")}); err != nil {
			t.Fatal(err)
		}
	}
	start := clock.Now()
	clock.Advance(5 * time.Second)
	if got := receive(t, c, url, 1); len(got) != 1 {
		t.Fatalf("received %d", len(got))
	}
	ms := messages(t, srv, "f.fifo")
	if len(ms) != 3 {
		t.Fatalf("%d messages", len(ms))
	}
	if ms[0].ReceiveCount != 1 || !ms[0].VisibleAt.Equal(start.Add(35*time.Second)) {
		t.Fatalf("first message %+v, want in flight until start+35s", ms[0])
	}
	seqs := sqstest.SequenceNumbers(srv, "f.fifo")
	for i, m := range ms {
		if m.Body != "m"+strconv.Itoa(i) || m.GroupID != "g" || m.DeduplicationID == "" || !m.SentAt.Equal(start) {
			t.Fatalf("message %d: %+v", i, m)
		}
		if i > 0 && (m.ReceiveCount != 0 || m.VisibleAt.After(clock.Now()) || seqs[i] <= seqs[i-1]) {
			t.Fatalf("message %d: %+v (sequence number %s) after %+v (%s)", i, m, seqs[i], ms[i-1], seqs[i-1])
		}
	}
	clock.Advance(time.Minute)
	if ms := messages(t, srv, "f.fifo"); len(ms) != 0 {
		t.Fatalf("%d messages past retention", len(ms))
	}
}

func TestQueueAccessors(t *testing.T) {
	srv, _, c := stateServer(t)
	ctx := context.Background()
	b := newQueue(t, c, "b", map[string]string{"VisibilityTimeout": "45"})
	a := newQueue(t, c, "a", nil)
	if _, err := c.TagQueue(ctx, &sqs.TagQueueInput{QueueUrl: &b, Tags: map[string]string{"team": "core"}}); err != nil {
		t.Fatal(err)
	}
	if got := srv.QueueURLs(); len(got) != 2 || got[0] != a || got[1] != b {
		t.Fatalf("QueueURLs() = %v, want [%s %s]", got, a, b)
	}
	if err := srv.Seed("b", sqstest.Message{Body: "x"}); err != nil {
		t.Fatal(err)
	}
	attrs, err := srv.QueueAttributes("b")
	if err != nil {
		t.Fatal(err)
	}
	if attrs["VisibilityTimeout"] != "45" || attrs["ApproximateNumberOfMessages"] != "1" || !strings.HasSuffix(attrs["QueueArn"], ":b") {
		t.Fatalf("attributes %v", attrs)
	}
	tags, err := srv.QueueTags(b)
	if err != nil || len(tags) != 1 || tags["team"] != "core" {
		t.Fatalf("QueueTags = %v, %v", tags, err)
	}
	for _, fn := range []func(string) error{
		func(q string) error { _, err := srv.Messages(q); return err },
		func(q string) error { _, err := srv.QueueAttributes(q); return err },
		func(q string) error { _, err := srv.QueueTags(q); return err },
	} {
		if err := fn("nope"); err == nil || !strings.Contains(err.Error(), "QueueDoesNotExist") {
			t.Errorf("missing queue: %v", err)
		}
	}
}

// The state API and SDK calls run concurrently (go test -race).
func TestStateAPIConcurrent(t *testing.T) {
	srv := sqstest.Start(t)
	c := srv.Client()
	url := newQueue(t, c, "q", nil)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				switch w {
				case 0:
					if err := srv.Seed(url, sqstest.Message{Body: fmt.Sprint(i)}); err != nil {
						t.Error(err)
						return
					}
				case 1:
					if _, err := srv.Messages("q"); err != nil {
						t.Error(err)
						return
					}
				case 2:
					_ = srv.QueueURLs()
					if _, err := srv.QueueAttributes("q"); err != nil {
						t.Error(err)
						return
					}
				default:
					if _, err := c.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: &url}); err != nil {
						t.Error(err)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	if ms := messages(t, srv, "q"); len(ms) != 50 {
		t.Fatalf("%d messages, want the 50 seeded", len(ms))
	}
}
