package sqstest_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/sqstest"
)

// snapshot is everything a restart must keep.
type snapshot struct {
	URLs  []string
	Attrs map[string]map[string]string
	Tags  map[string]map[string]string
	Msgs  map[string][]sqstest.Message
}

func snap(t *testing.T, s *sqstest.Server) snapshot {
	t.Helper()
	out := snapshot{Attrs: map[string]map[string]string{}, Tags: map[string]map[string]string{}, Msgs: map[string][]sqstest.Message{}}
	for _, u := range s.QueueURLs() {
		name := u[strings.LastIndexByte(u, '/')+1:]
		out.URLs = append(out.URLs, name)
		var err error
		if out.Attrs[name], err = s.QueueAttributes(u); err != nil {
			t.Fatal(err)
		}
		if out.Tags[name], err = s.QueueTags(u); err != nil {
			t.Fatal(err)
		}
		if out.Msgs[name], err = s.Messages(u); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// A server on the same DataDir starts with the state the last one left:
// queues with their attributes and tags, messages with their attributes,
// delays, visibility, receive counts and receipt handles, dead-lettered
// messages; deleted messages and queues and purges stay done.
func TestDataDirRestart(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	clock := sqstest.NewClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	opts := func(o *sqstest.Options) { o.DataDir = dir; o.Clock = clock }
	s1 := sqstest.NewServer(opts)
	c := s1.Client()
	mk := func(name string, attrs map[string]string) string {
		out, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name), Attributes: attrs,
			Tags: map[string]string{"team": name}})
		if err != nil {
			t.Fatal(err)
		}
		return *out.QueueUrl
	}
	dlq := mk("dlq", nil)
	dlqArn, _ := s1.QueueAttributes(dlq)
	jobs := mk("jobs", map[string]string{"VisibilityTimeout": "40",
		"RedrivePolicy": `{"deadLetterTargetArn":"` + dlqArn["QueueArn"] + `","maxReceiveCount":"1"}`})
	fifo := mk("f.fifo", map[string]string{"FifoQueue": "true", "ContentBasedDeduplication": "true"})
	gone := mk("gone", nil)
	purged := mk("purged", nil)
	for _, body := range []string{"a", "b", "c", "d"} {
		if _, err := c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &jobs, MessageBody: aws.String(body),
			MessageAttributes: map[string]types.MessageAttributeValue{"k": {DataType: aws.String("Binary"), BinaryValue: []byte{0, 1, 2}}}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &jobs, MessageBody: aws.String("later"), DelaySeconds: 300}); err != nil {
		t.Fatal(err)
	}
	for _, g := range []string{"g1", "g1", "g2"} {
		if _, err := c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &fifo, MessageBody: aws.String(g + clock.Now().String()), MessageGroupId: aws.String(g)}); err != nil {
			t.Fatal(err)
		}
		clock.Advance(time.Millisecond)
	}
	if _, err := c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &purged, MessageBody: aws.String("x")}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.PurgeQueue(ctx, &sqs.PurgeQueueInput{QueueUrl: &purged}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: &gone}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.TagQueue(ctx, &sqs.TagQueueInput{QueueUrl: &jobs, Tags: map[string]string{"more": "1"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.UntagQueue(ctx, &sqs.UntagQueueInput{QueueUrl: &dlq, TagKeys: []string{"team"}}); err != nil {
		t.Fatal(err)
	}
	rcv, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &jobs, MaxNumberOfMessages: 3})
	if err != nil || len(rcv.Messages) != 3 {
		t.Fatalf("receive: %v, %d messages", err, len(rcv.Messages))
	}
	if _, err := c.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: &jobs, ReceiptHandle: rcv.Messages[0].ReceiptHandle}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: &jobs,
		ReceiptHandle: rcv.Messages[1].ReceiptHandle, VisibilityTimeout: 0}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: &jobs,
		ReceiptHandle: rcv.Messages[2].ReceiptHandle, VisibilityTimeout: 100}); err != nil {
		t.Fatal(err)
	}
	// Received once with maxReceiveCount 1: the next receive moves it to
	// the dead-letter queue.
	if _, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &jobs, MaxNumberOfMessages: 10}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &fifo}); err != nil {
		t.Fatal(err)
	}
	before := snap(t, s1)
	if len(before.Msgs["dlq"]) == 0 || len(before.Msgs["jobs"]) == 0 || len(before.Msgs["f.fifo"]) != 3 {
		t.Fatalf("setup went wrong: %+v", before.Msgs)
	}
	if err := s1.Close(ctx); err != nil {
		t.Fatal(err)
	}

	s2 := sqstest.Start(t, opts)
	if after := snap(t, s2); !reflect.DeepEqual(before, after) {
		t.Fatalf("state after restart differs:\nbefore %+v\nafter  %+v", before, after)
	}
	// Receipt handles from before the restart still work.
	c2 := s2.Client()
	if _, err := c2.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(s2.URL() + "/000000000000/jobs"),
		ReceiptHandle: rcv.Messages[2].ReceiptHandle}); err != nil {
		t.Fatal(err)
	}
	msgs, _ := s2.Messages("jobs")
	for _, m := range msgs {
		if m.ID == *rcv.Messages[2].MessageId {
			t.Fatalf("message %s still there after deleting it with its old handle", m.ID)
		}
	}
}

// A record cut short by a crash is dropped; a corrupt record before
// others is an error rather than silently lost data.
func TestDataDirTornAndCorrupt(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	opts := func(o *sqstest.Options) { o.DataDir = dir }
	s1 := sqstest.NewServer(opts)
	for _, n := range []string{"one", "two"} {
		if _, err := s1.Client().CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(n)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s1.Close(ctx); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "sqstest.journal")
	good, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, append(append([]byte(nil), good...), `1234abcd {"t":"q","q":"thr`...), 0o644); err != nil {
		t.Fatal(err)
	}
	s2 := sqstest.NewServer(opts)
	if got := len(s2.QueueURLs()); got != 2 {
		t.Fatalf("%d queues after a torn record, want 2", got)
	}
	if err := s2.Close(ctx); err != nil {
		t.Fatal(err)
	}
	good, _ = os.ReadFile(path)
	bad := []byte(strings.Replace(string(good), `"one"`, `"onf"`, 1))
	if err := os.WriteFile(path, bad, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := sqstest.NewHandler(opts); err == nil || !strings.Contains(err.Error(), "corrupt") {
		t.Fatalf("NewHandler on a corrupt journal: %v, want a corruption error", err)
	}
}

// Concurrent requests share fsyncs (group commit); each is still answered
// only once its change is on disk, and a restart sees exactly the changes
// that were answered.
func TestDataDirConcurrent(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	opts := func(o *sqstest.Options) { o.DataDir = dir }
	s1 := sqstest.NewServer(opts)
	c := s1.Client()
	q, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("par")})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errc := make(chan error, 8)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 25 {
				out, err := c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: q.QueueUrl, MessageBody: aws.String(fmt.Sprintf("%d-%d", w, i))})
				if err != nil {
					errc <- err
					return
				}
				if i%2 == 0 {
					continue
				}
				r, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: q.QueueUrl, VisibilityTimeout: 600})
				if err != nil || len(r.Messages) != 1 {
					errc <- fmt.Errorf("receive after send %s: %v, %d messages", *out.MessageId, err, len(r.Messages))
					return
				}
				if _, err := c.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: q.QueueUrl, ReceiptHandle: r.Messages[0].ReceiptHandle}); err != nil {
					errc <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	before, _ := s1.Messages("par")
	if len(before) != 8*13 {
		t.Fatalf("%d messages, want %d", len(before), 8*13)
	}
	if err := s1.Close(ctx); err != nil {
		t.Fatal(err)
	}
	after, err := sqstest.Start(t, opts).Messages("par")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(wallClock(before), wallClock(after)) {
		t.Fatalf("restart changed the messages:\nbefore %v\nafter  %v", before, after)
	}
}

// wallClock drops the monotonic readings and locations of a real clock's
// times, which a journal cannot keep.
func wallClock(msgs []sqstest.Message) []sqstest.Message {
	out := make([]sqstest.Message, len(msgs))
	for i, m := range msgs {
		m.SentAt, m.VisibleAt = m.SentAt.UTC().Round(0), m.VisibleAt.UTC().Round(0)
		out[i] = m
	}
	return out
}
