package tempqueue_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/tempqueues/tempqueues/internal/testkit/sqstestenv"
	"github.com/tempqueues/tempqueues/sqsapi"
	"github.com/tempqueues/tempqueues/tempqueue"
)

// A CreateQueue that asks for a FIFO queue as SQS wants it (a .fifo name,
// FifoQueue true) gets a virtual queue of that name on a FIFO host queue of
// its own, which keeps send order; Close deletes the host.
func TestFIFOTemporaryQueue(t *testing.T) {
	sqstestenv.Each(t, func(t *testing.T, b *sqstestenv.Backend) {
		raw, counter := b.Client(t)
		p := prefix(t)
		c, err := tempqueue.New(raw, func(o *tempqueue.Options) { o.Prefix = p; o.DisableSweeping = true })
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		counter.Reset()
		for name, attrs := range map[string]map[string]string{
			"jobs":      {"FifoQueue": "true"},
			"jobs.fifo": nil,
			"x.fifo":    {"FifoQueue": "false"},
			"y.fifo":    {"FifoQueue": "true", "DeduplicationScope": "everywhere"},
		} {
			if _, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name), Attributes: attrs}); !errors.Is(err, sqsapi.ErrInvalidInput) {
				t.Errorf("%s %v: %v, want ErrInvalidInput", name, attrs, err)
			}
		}
		if n := counter.Total(); n != 0 {
			t.Fatalf("bad FIFO input made %d calls: %v", n, counter.Snapshot())
		}
		out, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("jobs.fifo"),
			Attributes: map[string]string{"FifoQueue": "true", "ContentBasedDeduplication": "true"}})
		if err != nil {
			t.Fatal(err)
		}
		u := *out.QueueUrl
		host, _, _ := strings.Cut(u, "#")
		if !strings.HasSuffix(u, ".fifo#jobs.fifo") || !strings.HasPrefix(host[strings.LastIndexByte(host, '/')+1:], p) {
			t.Fatalf("URL %s: want <prefix>...fifo#jobs.fifo", u)
		}
		std, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("plain")})
		if err != nil {
			t.Fatal(err)
		}
		if h, _, _ := strings.Cut(*std.QueueUrl, "#"); h == host {
			t.Fatal("a standard temporary queue shares the FIFO host")
		}
		for i := range 20 {
			if _, err := c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(u), MessageBody: aws.String(strconv.Itoa(i))}); err != nil {
				t.Fatal(err)
			}
		}
		next := 0
		for deadline := time.Now().Add(20 * time.Second); next < 20 && time.Now().Before(deadline); {
			r, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(u), MaxNumberOfMessages: 10, WaitTimeSeconds: 1})
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range r.Messages {
				if *m.Body != strconv.Itoa(next) {
					t.Fatalf("got %s, want %d", *m.Body, next)
				}
				next++
				if _, err := c.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(u), ReceiptHandle: m.ReceiptHandle}); err != nil {
					t.Fatal(err)
				}
			}
		}
		if next != 20 {
			t.Fatalf("received %d of 20", next)
		}
		if err := c.Close(ctx); err != nil {
			t.Fatal(err)
		}
		if hosts := listHosts(t, raw, p); len(hosts) != 0 {
			t.Fatalf("hosts left after Close: %v", hosts)
		}
	})
}

// A prefix that leaves no room for ".fifo" fails a FIFO CreateQueue before
// any call.
func TestFIFOPrefixTooLong(t *testing.T) {
	b := sqstestenv.SQSTest(t)
	raw, counter := b.Client(t)
	c, err := tempqueue.New(raw, func(o *tempqueue.Options) { o.Prefix = strings.Repeat("p", 40); o.DisableSweeping = true })
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	counter.Reset()
	_, err = c.CreateQueue(context.Background(), &sqs.CreateQueueInput{QueueName: aws.String("q.fifo"), Attributes: map[string]string{"FifoQueue": "true"}})
	if !errors.Is(err, sqsapi.ErrInvalidInput) || counter.Total() != 0 {
		t.Fatalf("%v after %d calls, want ErrInvalidInput before any", err, counter.Total())
	}
}
