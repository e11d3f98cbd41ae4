package tempqueue_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/internal/awserr"
	"github.com/tempqueues/tempqueues/internal/testkit/leakcheck"
	"github.com/tempqueues/tempqueues/internal/testkit/observetest"
	"github.com/tempqueues/tempqueues/internal/testkit/sqstestenv"
	"github.com/tempqueues/tempqueues/internal/testkit/testtime"
	"github.com/tempqueues/tempqueues/internal/wire"
	"github.com/tempqueues/tempqueues/observe"
	"github.com/tempqueues/tempqueues/reaper"
	"github.com/tempqueues/tempqueues/sqsapi"
	"github.com/tempqueues/tempqueues/tempqueue"
)

// prefix returns a host-queue prefix unique to the test.
func prefix(t *testing.T) string {
	n := sqstestenv.QueueName(t, "")
	return "tqt" + n[len(n)-8:] + "_"
}

func listHosts(t *testing.T, raw *sqs.Client, p string) []string {
	t.Helper()
	out, err := raw.ListQueues(context.Background(), &sqs.ListQueuesInput{QueueNamePrefix: aws.String(p)})
	if err != nil {
		t.Fatal(err)
	}
	var hosts []string
	for _, u := range out.QueueUrls {
		if !strings.HasSuffix(u, "sweeper.fifo") {
			hosts = append(hosts, u)
		}
	}
	return hosts
}

func TestDropInTemporaryQueues(t *testing.T) {
	sqstestenv.Each(t, func(t *testing.T, b *sqstestenv.Backend) {
		raw, counter := b.Client(t)
		p := prefix(t)
		c, err := tempqueue.New(raw, func(o *tempqueue.Options) { o.Prefix = p; o.DisableSweeping = true })
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		create := func(name string, attrs map[string]string) string {
			t.Helper()
			out, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name), Attributes: attrs})
			if err != nil {
				t.Fatalf("CreateQueue %s: %v", name, err)
			}
			return *out.QueueUrl
		}
		a := create("jobs-a", nil)
		bq := create("jobs-b", nil)
		slow := create("jobs-slow", map[string]string{"VisibilityTimeout": "120"})
		before := counter.Total()
		for i := 0; i < 50; i++ {
			create("more-"+string(rune('a'+i%26))+strings.Repeat("x", i/26), nil)
		}
		if n := counter.Total() - before; n != 0 {
			t.Fatalf("50 more temporary queues made %d API calls", n)
		}
		hosts := listHosts(t, raw, p)
		if len(hosts) != 2 {
			t.Fatalf("host queues %v: want one per attribute set (2)", hosts)
		}
		for _, u := range []string{a, bq, slow} {
			if !wire.IsVirtualQueueURL(u) || !strings.HasPrefix(u, hosts[0]+"#") && !strings.HasPrefix(u, hosts[1]+"#") {
				t.Fatalf("temporary queue %s is not on a host queue %v", u, hosts)
			}
		}
		if wire.HostURLOf(a) != wire.HostURLOf(bq) || wire.HostURLOf(a) == wire.HostURLOf(slow) {
			t.Fatal("queues with the same attributes must share a host, others not")
		}
		// Host queues are named <prefix><uuid>-<n> and tagged for the reaper.
		for _, h := range hosts {
			name := h[strings.LastIndex(h, "/")+1:]
			if len(name) != len(p)+36+2 || !strings.HasPrefix(name, p) {
				t.Errorf("host queue name %q is not <prefix><uuid>-<n>", name)
			}
			tags, err := raw.ListQueueTags(ctx, &sqs.ListQueueTagsInput{QueueUrl: aws.String(h)})
			if err != nil || tags.Tags[sqsapi.RetentionTag] != "300" || tags.Tags[sqsapi.HeartbeatTag] == "" {
				t.Errorf("host %s tags %v %v", name, tags.Tags, err)
			}
		}
		attrs, err := c.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(a), AttributeNames: []types.QueueAttributeName{"All"}})
		if err != nil || attrs.Attributes[sqsapi.IdleQueueRetentionPeriodAttribute] != "300" {
			t.Fatalf("temporary queue attributes %v %v", attrs.Attributes, err)
		}
		// It is a working queue.
		if _, err := c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(a), MessageBody: aws.String("hi")}); err != nil {
			t.Fatal(err)
		}
		out, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(a), WaitTimeSeconds: 5})
		if err != nil || len(out.Messages) != 1 || *out.Messages[0].Body != "hi" {
			t.Fatalf("receive %v %v", out, err)
		}
		if err := c.Close(ctx); err != nil {
			t.Fatal(err)
		}
		if left := listHosts(t, raw, p); len(left) != 0 {
			t.Fatalf("host queues left after Close: %v", left)
		}
		if _, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("late")}); !errors.Is(err, sqsapi.ErrClosed) {
			t.Fatalf("CreateQueue after Close = %v", err)
		}
		leakcheck.Check(t)
	})
}

func TestHostQueueRecreatedAfterExternalDelete(t *testing.T) {
	sqstestenv.Each(t, func(t *testing.T, b *sqstestenv.Backend) {
		raw, _ := b.Client(t)
		p := prefix(t)
		c, err := tempqueue.New(raw, func(o *tempqueue.Options) { o.Prefix = p; o.DisableSweeping = true })
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close(context.Background())
		ctx := context.Background()
		old, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("before")})
		if err != nil {
			t.Fatal(err)
		}
		host, _, err := wire.ParseVirtualQueueURL(*old.QueueUrl)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := raw.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: aws.String(host)}); err != nil {
			t.Fatal(err)
		}
		// A receive finds the host gone; the virtual-queue state of the old
		// host went with it.
		if _, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: old.QueueUrl, WaitTimeSeconds: 5}); !awserr.IsQueueDoesNotExist(err) {
			t.Errorf("receive on the deleted host's queue = %v, want QueueDoesNotExist", err)
		}
		if n := c.Stats().VirtualQueues; n != 0 {
			t.Errorf("%d virtual queues left on the deleted host", n)
		}
		again, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("after")})
		if err != nil {
			t.Fatal(err)
		}
		newHost, _, _ := wire.ParseVirtualQueueURL(*again.QueueUrl)
		if newHost == host || !strings.HasSuffix(newHost, "-1") {
			t.Fatalf("recreated host %s (old %s): want a new queue with the next counter", newHost, host)
		}
	})
}

func TestBadOptionsAndAttributes(t *testing.T) {
	b := sqstestenv.SQSTest(t)
	raw, counter := b.Client(t)
	for _, fn := range []func(*tempqueue.Options){
		func(o *tempqueue.Options) { o.Prefix = strings.Repeat("p", 41) },
		func(o *tempqueue.Options) { o.Prefix = "has space" },
		func(o *tempqueue.Options) { o.IdleQueueRetention = 500 * time.Millisecond },
		func(o *tempqueue.Options) { o.HostQueueTags = map[string]string{sqsapi.RetentionTag: "60"} },
		func(o *tempqueue.Options) { o.HostQueueTags = map[string]string{"aws:owner": "me"} },
		func(o *tempqueue.Options) { o.HostQueueTags = map[string]string{"team": "a;b"} },
	} {
		if _, err := tempqueue.New(raw, fn); !errors.Is(err, sqsapi.ErrInvalidInput) {
			t.Errorf("New = %v, want ErrInvalidInput", err)
		}
	}
	if n := counter.Total(); n != 0 {
		t.Fatalf("bad options made %d API calls: %v", n, counter.Snapshot())
	}
	c, err := tempqueue.New(raw, func(o *tempqueue.Options) { o.Prefix = prefix(t); o.DisableSweeping = true })
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	counter.Reset()
	for name, attrs := range map[string]map[string]string{
		"fifo":      {"FifoQueue": "true"},
		"unknown":   {"Colour": "blue"},
		"retention": {sqsapi.IdleQueueRetentionPeriodAttribute: "0"},
	} {
		_, err := c.CreateQueue(context.Background(), &sqs.CreateQueueInput{QueueName: aws.String("q"), Attributes: attrs})
		if !errors.Is(err, sqsapi.ErrInvalidInput) {
			t.Errorf("%s: CreateQueue = %v, want ErrInvalidInput", name, err)
		}
	}
	if _, err := c.CreateQueue(context.Background(), &sqs.CreateQueueInput{QueueName: aws.String("bad name")}); !errors.Is(err, sqsapi.ErrInvalidInput) {
		t.Errorf("bad name: %v", err)
	}
	if n := counter.Total(); n != 0 {
		t.Fatalf("bad input made %d API calls: %v", n, counter.Snapshot())
	}
}

func TestHostQueueTags(t *testing.T) {
	sqstestenv.Each(t, func(t *testing.T, b *sqstestenv.Backend) {
		raw, _ := b.Client(t)
		p := prefix(t)
		c, err := tempqueue.New(raw, func(o *tempqueue.Options) {
			o.Prefix = p
			o.DisableSweeping = true
			o.IdleQueueRetention = 3 * time.Second // a heartbeat every second
			o.HostQueueTags = map[string]string{"team": "payments", "app": "billing-api"}
		})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close(context.Background())
		ctx := context.Background()
		if _, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("jobs")}); err != nil {
			t.Fatal(err)
		}
		hosts := listHosts(t, raw, p)
		if len(hosts) != 1 {
			t.Fatalf("host queues %v, want 1", hosts)
		}
		check := func(when string) string {
			t.Helper()
			out, err := raw.ListQueueTags(ctx, &sqs.ListQueueTagsInput{QueueUrl: aws.String(hosts[0])})
			if err != nil {
				t.Fatal(err)
			}
			tags := out.Tags
			if tags["team"] != "payments" || tags["app"] != "billing-api" || tags[sqsapi.RetentionTag] != "3" || tags[sqsapi.HeartbeatTag] == "" || len(tags) != 4 {
				t.Fatalf("%s: host queue tags %v, want the user's 2 and the reaper's 2", when, tags)
			}
			return tags[sqsapi.HeartbeatTag]
		}
		first := check("after CreateQueue")
		// Heartbeats (TagQueue) move the reaper's tag and keep the user's.
		testtime.Eventually(t, 5*time.Second, "a heartbeat", func() bool { return check("after a heartbeat") != first })
	})
}

// The Observer hears the client's reaper: its first sweep (a new fleet
// sweeps at once), with a reaper.Report, and a host queue that a heartbeat
// found deleted.
func TestObserverHearsTheReaper(t *testing.T) {
	b := sqstestenv.SQSTest(t)
	raw, _ := b.Client(t)
	p := prefix(t)
	var rec observetest.Recorder
	c, err := tempqueue.New(raw, func(o *tempqueue.Options) {
		o.Prefix = p
		o.IdleQueueRetention = 3 * time.Second // a heartbeat every second
		o.Observer = &rec
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if !rec.Wait(ctx, observe.Swept, "", 1) {
		t.Fatal("no sweep heard")
	}
	for _, e := range rec.Events() {
		if _, ok := e.Detail.(reaper.Report); e.Kind == observe.Swept && !ok {
			t.Errorf("Swept with Detail %T, want a reaper.Report", e.Detail)
		}
	}
	q, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("watched")})
	if err != nil {
		t.Fatal(err)
	}
	host, _, _ := wire.ParseVirtualQueueURL(*q.QueueUrl)
	if _, err := raw.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: aws.String(host)}); err != nil {
		t.Fatal(err)
	}
	if !rec.Wait(ctx, observe.QueueGone, "", 1) {
		t.Fatal("the deleted host queue was not heard of")
	}
	for _, e := range rec.Events() {
		if e.Kind == observe.QueueGone && (e.Queue != host || !awserr.IsQueueDoesNotExist(e.Err)) {
			t.Errorf("QueueGone %+v, want %s with QueueDoesNotExist", e, host)
		}
	}
}

// The client's reaper sweeps the client's own prefix at Options.SweepPeriod,
// and tells the client's Observer what it swept.
func TestSweepPeriodAndObserver(t *testing.T) {
	b := sqstestenv.SQSTest(t)
	raw, _ := b.Client(t)
	p := prefix(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	idle, err := raw.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(p + "idle"),
		Tags: map[string]string{sqsapi.RetentionTag: "1"}}) // temporary, and never heartbeated
	if err != nil {
		t.Fatal(err)
	}
	var rec observetest.Recorder
	c, err := tempqueue.New(raw, func(o *tempqueue.Options) {
		o.Prefix = p
		o.Observer = &rec
		o.SweepPeriod = 10 * time.Minute // the first sweep comes at once all the same
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	if !rec.Wait(ctx, observe.Swept, "", 1) {
		t.Fatal("no sweep heard")
	}
	for _, e := range rec.Events() {
		if r, ok := e.Detail.(reaper.Report); e.Kind == observe.Swept && (!ok || !slices.Contains(r.Deleted, *idle.QueueUrl)) {
			t.Errorf("Swept %+v: want the idle queue of the client's own prefix reported", e.Detail)
		}
	}
}
