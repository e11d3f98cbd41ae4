package virtualqueue_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/internal/awserr"
	"github.com/tempqueues/tempqueues/internal/testkit/leakcheck"
	"github.com/tempqueues/tempqueues/internal/testkit/observetest"
	"github.com/tempqueues/tempqueues/internal/testkit/sqstestenv"
	"github.com/tempqueues/tempqueues/internal/testkit/testtime"
	"github.com/tempqueues/tempqueues/observe"
	"github.com/tempqueues/tempqueues/sqsapi"
	"github.com/tempqueues/tempqueues/virtualqueue"
)

func TestRoutingAcrossManyVirtualQueues(t *testing.T) {
	t.Parallel()
	sqstestenv.Each(t, func(t *testing.T, b *sqstestenv.Backend) {
		e := newEnv(t, b, 30)
		c := e.client()
		const queues, perQueue = 12, 4
		urls := make([]string, queues)
		for i := range urls {
			urls[i] = e.createVQ(c, fmt.Sprintf("vq-%d", i))
		}
		if got := e.counter.Total(); got != 1 {
			t.Fatalf("creating %d virtual queues made %d API calls, want 1 (host attributes once): %v", queues, got, e.counter.Snapshot())
		}
		for i, u := range urls {
			for j := 0; j < perQueue; j++ {
				send(t, c, u, fmt.Sprintf("%d/%d", i, j))
			}
		}
		var wg sync.WaitGroup
		for i, u := range urls {
			wg.Add(1)
			go func() {
				defer wg.Done()
				msgs := receiveN(t, c, u, perQueue, 20*time.Second)
				var bodies []string
				for _, m := range msgs {
					bodies = append(bodies, *m.Body)
					if _, err := c.DeleteMessage(context.Background(), &sqs.DeleteMessageInput{QueueUrl: aws.String(u), ReceiptHandle: m.ReceiptHandle}); err != nil {
						t.Errorf("DeleteMessage: %v", err)
					}
				}
				sort.Strings(bodies)
				for j, b := range bodies {
					if want := fmt.Sprintf("%d/%d", i, j); b != want {
						t.Errorf("queue %d got %q, want %q", i, b, want)
					}
				}
			}()
		}
		wg.Wait()
		if s := c.Stats(); s.Orphaned != 0 {
			t.Fatalf("stats %+v: want 0 orphaned", s)
		}
		testtime.Eventually(t, 5*time.Second, "host queue empty", func() bool { v, f := e.hostCounts(); return v == 0 && f == 0 })
	})
}

func TestJavaWireFormat(t *testing.T) {
	t.Parallel()
	sqstestenv.Each(t, func(t *testing.T, b *sqstestenv.Backend) {
		e := newEnv(t, b, 30)
		c := e.client()
		u := e.createVQ(c, "java-peer")
		if want := e.host + "#java-peer"; u != want {
			t.Fatalf("virtual URL %q, want %q", u, want)
		}
		// A Java peer sends to the host with only the routing attribute.
		_, err := e.raw.SendMessage(context.Background(), &sqs.SendMessageInput{
			QueueUrl: aws.String(e.host), MessageBody: aws.String("from java"),
			MessageAttributes: map[string]types.MessageAttributeValue{
				"__AmazonSQSVirtualQueuesClient.QueueName": {DataType: aws.String("String"), StringValue: aws.String("java-peer")},
				"custom": {DataType: aws.String("Number"), StringValue: aws.String("7")},
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		m := receiveN(t, c, u, 1, 10*time.Second)[0]
		if *m.Body != "from java" || *m.MessageAttributes["custom"].StringValue != "7" {
			t.Fatalf("got %q with %v", *m.Body, m.MessageAttributes)
		}
		// And our send reaches the host in the same format a Java poller routes.
		send(t, c, e.host+"#somebody-else", "to java")
		out, err := e.raw.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(e.host), WaitTimeSeconds: 5, MessageAttributeNames: []string{"All"},
		})
		if err != nil || len(out.Messages) != 1 {
			t.Fatalf("raw receive: %v, %d messages", err, len(out.Messages))
		}
		attr := out.Messages[0].MessageAttributes[sqsapi.VirtualQueueNameAttribute]
		if aws.ToString(attr.DataType) != "String" || aws.ToString(attr.StringValue) != "somebody-else" {
			t.Fatalf("routing attribute %+v", attr)
		}
	})
}

func TestIdleExpiryAndRecreation(t *testing.T) {
	t.Parallel()
	inBubble(t, func(t *testing.T, b *sqstestenv.Backend) {
		e := newEnv(t, b, 30)
		c := e.client()
		idle := e.createVQ(c, "idle", sqsapi.IdleQueueRetentionPeriodAttribute, "1")
		busy := e.createVQ(c, "busy", sqsapi.IdleQueueRetentionPeriodAttribute, "1")
		// A receive in progress keeps "busy" alive past its retention.
		done := make(chan error, 1)
		go func() {
			_, err := c.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(busy), WaitTimeSeconds: 3})
			done <- err
		}()
		testtime.Eventually(t, 5*time.Second, "idle queue expiry", func() bool {
			_, err := c.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{QueueUrl: aws.String(idle)})
			var qdne *types.QueueDoesNotExist
			return errors.As(err, &qdne)
		})
		if err := <-done; err != nil {
			t.Fatalf("receive on busy queue: %v", err)
		}
		if _, err := c.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{QueueUrl: aws.String(busy)}); err != nil {
			t.Fatalf("busy queue expired during a receive: %v", err)
		}

		// Re-creating returns the same URL; other settings are a typed error.
		again := e.createVQ(c, "busy", sqsapi.IdleQueueRetentionPeriodAttribute, "1")
		if again != busy {
			t.Fatalf("re-create gave %q, want %q", again, busy)
		}
		_, err := c.CreateQueue(context.Background(), &sqs.CreateQueueInput{QueueName: aws.String("busy"), Attributes: map[string]string{
			sqsapi.HostQueueURLAttribute: e.host, sqsapi.IdleQueueRetentionPeriodAttribute: "60",
		}})
		var exists *types.QueueNameExists
		if !errors.As(err, &exists) {
			t.Fatalf("re-create with another retention = %v, want *types.QueueNameExists", err)
		}

		// An old expiry must not delete a newer queue of the same name.
		short := e.createVQ(c, "reborn", sqsapi.IdleQueueRetentionPeriodAttribute, "1")
		if _, err := c.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: aws.String(short)}); err != nil {
			t.Fatal(err)
		}
		reborn := e.createVQ(c, "reborn")
		testtime.Advance(1500 * time.Millisecond)
		if _, err := c.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{QueueUrl: aws.String(reborn)}); err != nil {
			t.Fatalf("re-created queue without retention was deleted: %v", err)
		}
	})
}

func TestOrphansDeletedCountedOrReleased(t *testing.T) {
	t.Parallel()
	inBubble(t, func(t *testing.T, b *sqstestenv.Backend) {
		e := newEnv(t, b, 30)
		c := e.client()
		u := e.createVQ(c, "known")
		send(t, e.raw, e.host, "no attribute")
		send(t, c, e.host+"#unknown", "unknown name")
		send(t, c, u, "known")
		receiveN(t, c, u, 1, 10*time.Second)
		testtime.Eventually(t, 10*time.Second, "two orphans", func() bool { return c.Stats().Orphaned == 2 })
		// Deleted: only the known message remains (in flight, not yet deleted).
		testtime.Eventually(t, 5*time.Second, "orphans deleted", func() bool { v, f := e.hostCounts(); return v == 0 && f == 1 })

		// Release policy: an orphan stays on the host for another process.
		e2 := newEnv(t, b, 30)
		var handled sync.Map
		c2 := e2.client(func(o *virtualqueue.Options) {
			o.OrphanHandler = func(_ context.Context, hostURL, name string, m types.Message) virtualqueue.OrphanAction {
				handled.Store(name, *m.Body)
				return virtualqueue.ReleaseOrphan
			}
			o.OrphanReleaseDelay = time.Hour
		})
		u2 := e2.createVQ(c2, "known")
		send(t, c2, e2.host+"#stranger", "for someone else")
		send(t, c2, u2, "mine")
		receiveN(t, c2, u2, 1, 10*time.Second)
		testtime.Eventually(t, 10*time.Second, "orphan handled", func() bool { _, ok := handled.Load("stranger"); return ok })
		if _, inflight := e2.hostCounts(); inflight != 2 {
			t.Fatalf("released orphan: host has %d in flight, want 2 (mine, and the orphan hidden for an hour)", inflight)
		}
	})
}

func TestAtLeastOnceAcrossClose(t *testing.T) {
	inBubble(t, func(t *testing.T, b *sqstestenv.Backend) {
		e := newEnv(t, b, 2)
		var rec observetest.Recorder
		c1 := mustNew(t, e.raw, func(o *virtualqueue.Options) { o.PollWaitTime = time.Second; o.Observer = &rec })
		u := e.createVQ(c1, "worker")
		other := e.createVQ(c1, "other")
		send(t, c1, u, "received, never deleted")
		receiveN(t, c1, u, 1, 10*time.Second)
		// A message for "other" gets buffered while someone waits on "worker".
		send(t, c1, other, "buffered")
		go c1.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(u), WaitTimeSeconds: 5})
		testtime.Eventually(t, 10*time.Second, "buffered message", func() bool {
			out, err := c1.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{
				QueueUrl: aws.String(other), AttributeNames: []types.QueueAttributeName{"ApproximateNumberOfMessages"},
			})
			return err == nil && out.Attributes["ApproximateNumberOfMessages"] == "1"
		})
		if err := c1.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		if n := rec.Count(observe.Released, "closed"); n < 1 {
			t.Fatalf("Close released %d buffered messages", n)
		}
		// A new process gets both back: the buffered one at once (released), the
		// received one when its visibility timeout ends.
		c2 := e.client()
		u2 := e.createVQ(c2, "worker")
		other2 := e.createVQ(c2, "other")
		// Released so that a receive Close cancelled (1 s) cannot take it.
		if m := receiveN(t, c2, other2, 1, 6*time.Second)[0]; *m.Body != "buffered" {
			t.Fatalf("got %q", *m.Body)
		}
		if m := receiveN(t, c2, u2, 1, 10*time.Second)[0]; *m.Body != "received, never deleted" {
			t.Fatalf("got %q", *m.Body)
		}
		leakcheckAfterClose(t, c2)
	})
}

func leakcheckAfterClose(t *testing.T, c *virtualqueue.Client) {
	t.Helper()
	if err := c.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	leakcheck.Check(t)
}

func TestBufferedMessagesReleasedBeforeVisibilityEnds(t *testing.T) {
	t.Parallel()
	inBubble(t, func(t *testing.T, b *sqstestenv.Backend) {
		e := newEnv(t, b, 2)
		var rec observetest.Recorder
		c := e.client(func(o *virtualqueue.Options) { o.Observer = &rec }) // releases 500ms before the 2s visibility ends
		waiting := e.createVQ(c, "waiting")
		idle := e.createVQ(c, "idle")
		send(t, c, idle, "nobody takes me")
		go c.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(waiting), WaitTimeSeconds: 1})
		testtime.Eventually(t, 5*time.Second, "release", func() bool { return rec.Count(observe.Released, "expiring") >= 1 })
		// Released, not lost: a receive on the idle queue gets it routed again.
		if m := receiveN(t, c, idle, 1, 10*time.Second)[0]; *m.Body != "nobody takes me" {
			t.Fatalf("got %q", *m.Body)
		}
	})
}

func TestBatchingCoalescesCalls(t *testing.T) {
	// Not parallel: the send-batching policy measures real call latency,
	// and other tests' CPU changes what it coalesces.
	sqstestenv.Each(t, func(t *testing.T, b *sqstestenv.Backend) {
		e := newEnv(t, b, 30)
		c := e.client()
		u := e.createVQ(c, "batch")
		const n = 50
		var wg sync.WaitGroup
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func() { defer wg.Done(); send(t, c, u, fmt.Sprint(i)) }()
		}
		wg.Wait()
		calls := c.Stats().Calls
		if sends := calls["SendMessageBatch"] + calls["SendMessage"]; sends >= n/2 {
			t.Fatalf("%d send calls for %d concurrent sends", sends, n)
		}
		msgs := receiveN(t, c, u, n, 20*time.Second)
		for _, m := range msgs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := c.DeleteMessage(context.Background(), &sqs.DeleteMessageInput{QueueUrl: aws.String(u), ReceiptHandle: m.ReceiptHandle}); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		calls = c.Stats().Calls
		if calls["DeleteMessage"] != 0 || calls["DeleteMessageBatch"] >= n/2 {
			t.Fatalf("deletes not coalesced: %v", calls)
		}
		t.Logf("calls for %d sends, receives and deletes: %v", n, calls)
	})
}

// TestIdleHostCostsNoCalls checks that a host whose virtual queues nobody
// receives from makes no call at all, for an hour of a synctest bubble's
// clock, and that the same host polls as soon as a receive waits (so that
// the count could see a poller).
func TestIdleHostCostsNoCalls(t *testing.T) {
	t.Parallel()
	inBubble(t, func(t *testing.T, b *sqstestenv.Backend) {
		e := newEnv(t, b, 30)
		c := e.client()
		a := e.createVQ(c, "a")
		e.createVQ(c, "b")
		synctest.Wait()
		before := e.counter.Snapshot()
		testtime.Advance(time.Hour)
		if after := e.counter.Snapshot(); !maps.Equal(before, after) {
			t.Fatalf("an idle host made calls in an hour: %v before, %v after", before, after)
		}
		if got := c.Stats().Calls["ReceiveMessage"]; got != 0 {
			t.Fatalf("idle host polled %d times", got)
		}
		// A receiver makes it poll at once.
		done := make(chan error, 1)
		go func() {
			_, err := c.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(a), WaitTimeSeconds: 1})
			done <- err
		}()
		synctest.Wait()
		if got := c.Stats().Calls["ReceiveMessage"]; got != 1 {
			t.Errorf("%d host receives with a receiver waiting, want 1", got)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})
}

// TestLingerPollsOnceMore checks Options.Linger: after a receive that
// brought messages, the poller makes exactly one more receive although
// nobody waits, and stops when it comes back empty. Without Linger it stops
// at once.
func TestLingerPollsOnceMore(t *testing.T) {
	t.Parallel()
	inBubble(t, func(t *testing.T, b *sqstestenv.Backend) {
		for _, linger := range []bool{false, true} {
			e := newEnv(t, b, 30)
			c := e.client(func(o *virtualqueue.Options) { o.Linger = linger; o.PollWaitTime = time.Second })
			u := e.createVQ(c, "v")
			send(t, c, u, "one")
			receiveN(t, c, u, 1, 10*time.Second)
			want := int64(1)
			if linger {
				want = 2
			}
			testtime.Eventually(t, 5*time.Second, "lingering receive", func() bool { return c.Stats().Calls["ReceiveMessage"] >= want })
			testtime.Advance(2500 * time.Millisecond) // the lingering long poll runs out, and nothing follows
			if got := c.Stats().Calls["ReceiveMessage"]; got != want {
				t.Errorf("Linger %v: %d receives, want %d", linger, got, want)
			}
		}
	})
}

func TestHostQueueDeletedUnderClient(t *testing.T) {
	t.Parallel()
	inBubble(t, func(t *testing.T, b *sqstestenv.Backend) {
		e := newEnv(t, b, 30)
		c := e.client()
		u := e.createVQ(c, "v")
		errc := make(chan error, 1)
		go func() {
			_, err := c.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(u), WaitTimeSeconds: 20})
			errc <- err
		}()
		testtime.Advance(200 * time.Millisecond)
		if _, err := e.raw.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: aws.String(e.host)}); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-errc:
			if !awserr.IsQueueDoesNotExist(err) {
				t.Fatalf("receive after host deletion = %v, want QueueDoesNotExist", err)
			}
		case <-time.After(25 * time.Second):
			t.Fatal("waiting receiver not told that the host queue is gone")
		}
	})
}

// Deleting a host queue through the client (or finding it gone) drops its
// virtual queues and wakes their receivers.
func TestDeletingTheHostDropsItsQueuesAndWakesReceivers(t *testing.T) {
	t.Parallel()
	inBubble(t, func(t *testing.T, b *sqstestenv.Backend) {
		e := newEnv(t, b, 30)
		c := e.client()
		u := e.createVQ(c, "v")
		e.createVQ(c, "w")
		errc := make(chan error, 1)
		go func() {
			_, err := c.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(u), WaitTimeSeconds: 20})
			errc <- err
		}()
		testtime.Eventually(t, 5*time.Second, "the receive waits", func() bool { return c.Stats().Calls["ReceiveMessage"] >= 1 })
		calls := e.counter.Total()

		if _, err := c.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: aws.String(e.host)}); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-errc:
			if !awserr.IsQueueDoesNotExist(err) {
				t.Fatalf("waiting receive = %v, want QueueDoesNotExist", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("deleting the host left a receiver waiting")
		}
		if _, err := c.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(u)}); !awserr.IsQueueDoesNotExist(err) {
			t.Errorf("receive on a deleted host's queue = %v, want QueueDoesNotExist", err)
		}
		if n := c.Stats().VirtualQueues; n != 0 {
			t.Errorf("%d virtual queues left", n)
		}
		// Dropping the host's state is local and cancels its long poll: the
		// DeleteQueue is the only call, but for one receive that the poller
		// may have made when the server ended its poll on the deleted queue
		// before the DeleteQueue's response arrived.
		if got := e.counter.Total() - calls; got < 1 || got > 2 {
			t.Errorf("deleting the host made %d calls, want the DeleteQueue and at most one receive", got)
		}
	})
}

func TestCloseWakesReceiversAndStopsEverything(t *testing.T) {
	inBubble(t, func(t *testing.T, b *sqstestenv.Backend) {
		e := newEnv(t, b, 30)
		c := mustNew(t, e.raw)
		u := e.createVQ(c, "v")
		errc := make(chan error, 2)
		go func() {
			_, err := c.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(u), WaitTimeSeconds: 20})
			errc <- err
		}()
		go func() {
			_, err := c.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(u), WaitTimeSeconds: 20})
			errc <- err
		}()
		testtime.Advance(200 * time.Millisecond)
		start := time.Now()
		if err := c.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 2; i++ {
			if err := <-errc; !errors.Is(err, sqsapi.ErrClosed) {
				t.Fatalf("waiting receiver got %v, want sqsapi.ErrClosed", err)
			}
		}
		if d := time.Since(start); d > 3*time.Second {
			t.Fatalf("Close took %v with a 20 s poll in flight", d)
		}
		if err := c.Close(context.Background()); err != nil {
			t.Fatalf("second Close: %v", err)
		}
		if _, err := c.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(u)}); !errors.Is(err, sqsapi.ErrClosed) {
			t.Fatalf("receive after Close = %v", err)
		}
		leakcheck.Check(t)
	})
}

func TestVirtualQueueAttributesAndTags(t *testing.T) {
	t.Parallel()
	sqstestenv.Each(t, func(t *testing.T, b *sqstestenv.Backend) {
		e := newEnv(t, b, 17)
		c := e.client()
		out, err := c.CreateQueue(context.Background(), &sqs.CreateQueueInput{
			QueueName:  aws.String("attrs"),
			Attributes: map[string]string{sqsapi.HostQueueURLAttribute: e.host, sqsapi.IdleQueueRetentionPeriodAttribute: "300"},
			Tags:       map[string]string{"team": "a"},
		})
		if err != nil {
			t.Fatal(err)
		}
		u := out.QueueUrl
		before := e.counter.Total()
		attrs, err := c.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{QueueUrl: u, AttributeNames: []types.QueueAttributeName{"All"}})
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]string{"HostQueueUrl": e.host, "IdleQueueRetentionPeriodSeconds": "300", "VisibilityTimeout": "17", "ApproximateNumberOfMessages": "0"}
		for k, v := range want {
			if attrs.Attributes[k] != v {
				t.Errorf("attribute %s = %q, want %q", k, attrs.Attributes[k], v)
			}
		}
		if _, err := c.TagQueue(context.Background(), &sqs.TagQueueInput{QueueUrl: u, Tags: map[string]string{"env": "test"}}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.UntagQueue(context.Background(), &sqs.UntagQueueInput{QueueUrl: u, TagKeys: []string{"team"}}); err != nil {
			t.Fatal(err)
		}
		tags, err := c.ListQueueTags(context.Background(), &sqs.ListQueueTagsInput{QueueUrl: u})
		if err != nil || len(tags.Tags) != 1 || tags.Tags["env"] != "test" {
			t.Fatalf("tags %v, %v", tags.Tags, err)
		}
		if e.counter.Total() != before {
			t.Fatalf("local attribute and tag calls reached SQS: %v", e.counter.Snapshot())
		}
		// Purge is local: buffered messages are deleted from the host.
		if _, err := c.PurgeQueue(context.Background(), &sqs.PurgeQueueInput{QueueUrl: u}); err != nil {
			t.Fatal(err)
		}
	})
}

func TestRealURLsPassThrough(t *testing.T) {
	t.Parallel()
	sqstestenv.Each(t, func(t *testing.T, b *sqstestenv.Backend) {
		e := newEnv(t, b, 30)
		c := e.client()
		send(t, c, e.host, "plain")
		out, err := c.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(e.host), WaitTimeSeconds: 2})
		if err != nil || len(out.Messages) != 1 {
			t.Fatalf("pass-through receive: %v %d", err, len(out.Messages))
		}
		if _, err := c.DeleteMessage(context.Background(), &sqs.DeleteMessageInput{QueueUrl: aws.String(e.host), ReceiptHandle: out.Messages[0].ReceiptHandle}); err != nil {
			t.Fatal(err)
		}
		calls := c.Stats().Calls
		if calls["SendMessage"] != 1 || calls["ReceiveMessage"] != 1 || calls["DeleteMessage"] != 1 {
			t.Fatalf("pass-through calls %v", calls)
		}
		if c.Stats().Orphaned != 0 {
			t.Fatal("pass-through traffic was routed")
		}
	})
}

// A receive whose response is lost hides its messages only for
// ReceiveVisibilityTimeout, not the host queue's visibility timeout.
func TestReceiveVisibilityBoundsLostResponses(t *testing.T) {
	t.Parallel()
	sqstestenv.Each(t, func(t *testing.T, b *sqstestenv.Backend) {
		e := newEnv(t, b, 60)
		lossy := &losing{Client: e.raw}
		lossy.lose.Store(true)
		c := mustNew(t, lossy, func(o *virtualqueue.Options) { o.ReceiveVisibilityTimeout = 2 * time.Second })
		defer c.Close(context.Background())
		u := e.createVQ(c, "v")
		send(t, c, u, "survives a lost response")
		start := time.Now()
		m := receiveN(t, c, u, 1, 10*time.Second)[0]
		if *m.Body != "survives a lost response" {
			t.Fatalf("got %q", *m.Body)
		}
		if d := time.Since(start); d > 6*time.Second {
			t.Fatalf("redelivered after %v; the host's 60s visibility applied", d)
		}
	})
}

// losing drops the response of the first receive that brought messages, as
// a connection dying after the server answered would.
type losing struct {
	sqsapi.Client
	lose atomic.Bool
}

func (l *losing) ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, o ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	out, err := l.Client.ReceiveMessage(ctx, in, o...)
	if err == nil && len(out.Messages) > 0 && l.lose.CompareAndSwap(true, false) {
		return &sqs.ReceiveMessageOutput{}, nil
	}
	return out, err
}

// A virtual queue holding messages nobody has taken is not idle: expiring it
// would delete them (orphans) unread.
func TestBufferedMessagesKeepQueueAlive(t *testing.T) {
	t.Parallel()
	inBubble(t, func(t *testing.T, b *sqstestenv.Backend) {
		e := newEnv(t, b, 30)
		c := e.client()
		u := e.createVQ(c, "slow-consumer", sqsapi.IdleQueueRetentionPeriodAttribute, "1")
		send(t, c, u, "one")
		send(t, c, u, "two")
		first, err := c.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(u), WaitTimeSeconds: 5, MaxNumberOfMessages: 1})
		if err != nil || len(first.Messages) != 1 {
			t.Fatalf("first receive: %v %v", first, err)
		}
		// Wait for the second to be buffered, then stay idle past the retention.
		testtime.Eventually(t, 5*time.Second, "second message buffered", func() bool {
			out, err := c.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{
				QueueUrl: aws.String(u), AttributeNames: []types.QueueAttributeName{"ApproximateNumberOfMessages"},
			})
			return err == nil && out.Attributes["ApproximateNumberOfMessages"] == "1"
		})
		testtime.Advance(2500 * time.Millisecond)
		if _, err := c.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{QueueUrl: aws.String(u)}); err != nil || c.Stats().Orphaned != 0 {
			t.Fatalf("the queue expired with a buffered message: %v, %+v", err, c.Stats())
		}
		second := receiveN(t, c, u, 1, 5*time.Second)[0]
		if *second.Body == *first.Messages[0].Body {
			t.Fatalf("got %q twice", *second.Body)
		}
	})
}

// An OrphanHandler that panics does not end the process: the orphan stays
// in flight (to reappear after its visibility timeout) and the client
// goes on serving its queues.
func TestPanickingOrphanHandlerIsRecovered(t *testing.T) {
	t.Parallel()
	sqstestenv.Each(t, func(t *testing.T, b *sqstestenv.Backend) {
		e := newEnv(t, b, 30)
		var calls atomic.Int32
		c := e.client(func(o *virtualqueue.Options) {
			o.OrphanHandler = func(context.Context, string, string, types.Message) virtualqueue.OrphanAction {
				calls.Add(1)
				panic("a user's mistake")
			}
		})
		u := e.createVQ(c, "known")
		send(t, c, e.host+"#stranger", "orphan")
		send(t, c, u, "mine")
		receiveN(t, c, u, 1, 10*time.Second)
		testtime.Eventually(t, 10*time.Second, "handler called", func() bool { return calls.Load() == 1 })
		send(t, c, u, "after the panic")
		receiveN(t, c, u, 1, 10*time.Second)
		if _, inflight := e.hostCounts(); inflight < 2 {
			t.Fatalf("host has %d in flight: want the orphan kept in flight beside the received messages", inflight)
		}
	})
}
