package sqstest_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/tempqueues/tempqueues/sqstest"
)

// A second server on a data directory in use refuses to start, naming the
// directory and the pid that holds it; once the first closes, it starts.
func TestDataDirLockedByOneServer(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	opts := func(o *sqstest.Options) { o.DataDir = dir }
	s1 := sqstest.NewServer(opts)
	c := s1.Client()
	q, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("jobs")})
	if err != nil {
		t.Fatal(err)
	}

	if _, err := sqstest.NewHandler(opts); err == nil {
		t.Fatal("a second server on the same directory started")
	} else {
		for _, want := range []string{dir, "pid " + strconv.Itoa(os.Getpid()), "in use"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not say %q", err, want)
			}
		}
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Error("NewServer on a locked directory did not panic")
			}
		}()
		sqstest.NewServer(opts)
	}()
	// The refused servers touched nothing: the first one's sends survive.
	if _, err := c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: q.QueueUrl, MessageBody: aws.String("kept")}); err != nil {
		t.Fatal(err)
	}
	if err := s1.Close(ctx); err != nil {
		t.Fatal(err)
	}
	s2 := sqstest.Start(t, opts)
	if msgs, err := s2.Messages("jobs"); err != nil || len(msgs) != 1 || msgs[0].Body != "kept" {
		t.Fatalf("after the first server closed: %+v, %v", msgs, err)
	}
}

// FIFO deduplication ids, explicit and content-based, hold across a
// restart for the rest of their five minutes, for messages still queued
// and deleted ones alike.
func TestDataDirDeduplicationSurvivesRestart(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	clock := sqstest.NewClock(time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC))
	opts := func(o *sqstest.Options) { o.DataDir = dir; o.Clock = clock }
	s1 := sqstest.NewServer(opts)
	c := s1.Client()
	mk := func(c *sqs.Client, name string, content bool) string {
		out, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name),
			Attributes: map[string]string{"FifoQueue": "true", "ContentBasedDeduplication": strconv.FormatBool(content)}})
		if err != nil {
			t.Fatal(err)
		}
		return *out.QueueUrl
	}
	explicit, content := mk(c, "explicit.fifo", false), mk(c, "content.fifo", true)
	send := func(c *sqs.Client, url, body, dedup string) string {
		in := &sqs.SendMessageInput{QueueUrl: &url, MessageBody: &body, MessageGroupId: aws.String("g")}
		if dedup != "" {
			in.MessageDeduplicationId = &dedup
		}
		out, err := c.SendMessage(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		return *out.MessageId
	}
	ids := map[string]string{
		"kept":         send(c, explicit, "one", "kept"),
		"deleted":      send(c, explicit, "two", "deleted"),
		"content-kept": send(c, content, "three", ""),
		"content-gone": send(c, content, "four", ""),
	}
	// Delete "two" and "four": their ids must still deduplicate.
	for _, url := range []string{explicit, content} {
		out, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &url, MaxNumberOfMessages: 2, VisibilityTimeout: 60})
		if err != nil || len(out.Messages) != 2 {
			t.Fatalf("receive: %v, %d messages", err, len(out.Messages))
		}
		if _, err := c.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: &url, ReceiptHandle: out.Messages[1].ReceiptHandle}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s1.Close(ctx); err != nil {
		t.Fatal(err)
	}

	clock.Advance(4 * time.Minute)
	s2 := sqstest.NewServer(opts)
	c2 := s2.Client()
	u := func(name string) string { return s2.URL() + "/000000000000/" + name }
	resend := func(c *sqs.Client) map[string]string {
		return map[string]string{
			"kept":         send(c, u("explicit.fifo"), "one again", "kept"),
			"deleted":      send(c, u("explicit.fifo"), "two again", "deleted"),
			"content-kept": send(c, u("content.fifo"), "three", ""),
			"content-gone": send(c, u("content.fifo"), "four", ""),
		}
	}
	for k, id := range resend(c2) {
		if id != ids[k] {
			t.Errorf("%s: a resend 4 minutes later, after a restart, got a new MessageId %s (first %s)", k, id, ids[k])
		}
	}
	for _, q := range []string{"explicit.fifo", "content.fifo"} {
		if msgs, _ := s2.Messages(q); len(msgs) != 1 {
			t.Errorf("%s holds %d messages after the resends, want 1", q, len(msgs))
		}
	}
	// A compaction (each start makes one) keeps them too, and the window
	// still ends five minutes after the first send.
	if err := s2.Close(ctx); err != nil {
		t.Fatal(err)
	}
	s3 := sqstest.Start(t, opts)
	for k, id := range resend(s3.Client()) {
		if id != ids[k] {
			t.Errorf("%s: a resend after a second restart got a new MessageId", k)
		}
	}
	clock.Advance(61 * time.Second)
	for k, id := range resend(s3.Client()) {
		if id == ids[k] {
			t.Errorf("%s: deduplicated more than five minutes after the first send", k)
		}
	}
}

// The journal is compacted while the server runs: a workload that sends,
// receives and deletes far more than it keeps leaves a journal within a
// small multiple of the live data plus the slack, and a restart finds
// exactly the state the server had.
func TestDataDirCompactsOnline(t *testing.T) {
	const slack = 256 << 10
	defer sqstest.SetCompactSlack(slack)()
	ctx := context.Background()
	dir := t.TempDir()
	opts := func(o *sqstest.Options) { o.DataDir = dir }
	s := sqstest.NewServer(opts)
	c := s.Client()
	q, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("churn")})
	if err != nil {
		t.Fatal(err)
	}
	body := strings.Repeat("x", 8<<10)
	const rounds, live = 600, 20 // 600 x 8 KiB through, at most 30 queued
	var biggest int64
	for i := range rounds {
		if _, err := c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: q.QueueUrl, MessageBody: aws.String(body + strconv.Itoa(i))}); err != nil {
			t.Fatal(err)
		}
		if i < live {
			continue
		}
		out, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: q.QueueUrl})
		if err != nil || len(out.Messages) != 1 {
			t.Fatalf("receive %d: %v", i, err)
		}
		if _, err := c.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: q.QueueUrl, ReceiptHandle: out.Messages[0].ReceiptHandle}); err != nil {
			t.Fatal(err)
		}
		if i%10 == 0 {
			size, _, _ := sqstest.JournalStats(s)
			biggest = max(biggest, size)
			if fi, err := os.Stat(filepath.Join(dir, "sqstest.journal")); err != nil || fi.Size() != size {
				t.Fatalf("journal file: %v, %v; the server counts %d bytes", fi, err, size)
			}
		}
	}
	size, compactions, _ := sqstest.JournalStats(s)
	// About 8.3 KiB a message as JSON: the live data is ~170 KiB.
	liveBytes := int64(live+1) * (8<<10 + 400)
	bound := 2*liveBytes + slack + 4*(8<<10+400) // what grew while a compaction ran
	t.Logf("%d sends of 8 KiB, %d live: %d compactions, journal at most %d bytes (bound %d), %d at the end",
		rounds, live, compactions, biggest, bound, size)
	if compactions < 5 {
		t.Fatalf("%d compactions for %d MiB through the journal", compactions, rounds*8/1024)
	}
	if biggest > bound {
		t.Fatalf("journal reached %d bytes, bound %d", biggest, bound)
	}
	before, err := s.Messages("churn")
	if err != nil || len(before) != live {
		t.Fatalf("%d messages, %v; want %d", len(before), err, live)
	}
	handlesBefore := sqstest.ReceiptHandles(s, "churn")
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	s2 := sqstest.Start(t, opts)
	after, err := s2.Messages("churn")
	if err != nil || len(after) != live {
		t.Fatalf("after a restart: %d messages, %v", len(after), err)
	}
	handlesAfter := sqstest.ReceiptHandles(s2, "churn")
	for i := range after {
		if after[i].ID != before[i].ID || after[i].Body != before[i].Body || handlesAfter[i] != handlesBefore[i] {
			t.Fatalf("message %d differs after a restart: %+v, was %+v", i, after[i], before[i])
		}
	}
}

// Requests keep being served, and answered only once durable, while
// compactions run: concurrent senders and deleters, with the slack so low
// that compactions overlap their requests, lose nothing across a restart.
func TestDataDirCompactsUnderLoad(t *testing.T) {
	defer sqstest.SetCompactSlack(16 << 10)()
	ctx := context.Background()
	dir := t.TempDir()
	opts := func(o *sqstest.Options) { o.DataDir = dir }
	s := sqstest.NewServer(opts)
	c := s.Client()
	q, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("load")})
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 4)
	for w := range 4 {
		go func() {
			var err error
			for i := 0; i < 150 && err == nil; i++ {
				_, err = c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: q.QueueUrl, MessageBody: aws.String(strings.Repeat("y", 500) + strconv.Itoa(w*1000+i))})
				if err != nil || i%2 == 0 {
					continue
				}
				var out *sqs.ReceiveMessageOutput
				if out, err = c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: q.QueueUrl}); err == nil && len(out.Messages) == 1 {
					_, err = c.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: q.QueueUrl, ReceiptHandle: out.Messages[0].ReceiptHandle})
				}
			}
			errc <- err
		}()
	}
	var errs []error
	for range 4 {
		errs = append(errs, <-errc)
	}
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	_, compactions, _ := sqstest.JournalStats(s)
	before, _ := s.Messages("load")
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	after, _ := sqstest.Start(t, opts).Messages("load")
	t.Logf("%d compactions; %d messages left", compactions, len(before))
	if compactions == 0 || len(before) != len(after) {
		t.Fatalf("%d compactions; %d messages before a restart, %d after", compactions, len(before), len(after))
	}
	for i := range after {
		if after[i].ID != before[i].ID {
			t.Fatalf("message %d differs after a restart", i)
		}
	}
}
