package reap_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/tempqueues/tempqueues/internal/reap"
	"github.com/tempqueues/tempqueues/internal/testkit/sqstestenv"
	"github.com/tempqueues/tempqueues/internal/testkit/testtime"
	"github.com/tempqueues/tempqueues/sqsapi"
)

// TestSweepIdleRule covers every branch of the idle rule on one fleet of
// queues, tagged exactly as the Java client tags them, with the sweeper's
// clock moved instead of waiting.
func TestSweepIdleRule(t *testing.T) {
	t.Parallel()
	sqstestenv.Each(t, func(t *testing.T, b *sqstestenv.Backend) {
		t.Parallel()
		client, counter := b.Client(t)
		ctx := context.Background()
		prefix := testPrefix(t)
		clk := frozenClock()
		now := clk.Now()
		stale := now.Add(-10 * time.Minute) // older than the 300 s retention
		fresh := now.Add(-100 * time.Second)

		type queue struct {
			name, url string
			wantGone  bool
		}
		var qs []*queue
		mk := func(name string, tags map[string]string, wantGone bool) *queue {
			q := &queue{name: name, url: createQueue(t, client, name, tags), wantGone: wantGone}
			qs = append(qs, q)
			return q
		}

		// Requester host queues: deleted when idle even with leftover replies.
		staleHost := mk(hostName(prefix, 0), javaTags(300, stale), true)
		send(t, client, staleHost.url, 0)
		send(t, client, staleHost.url, 0)
		mk(hostName(prefix, 1), javaTags(300, fresh), false)
		mk(hostName(prefix, 2), map[string]string{sqsapi.RetentionTag: "300"}, true) // no heartbeat: idle (Java rule)
		mk(hostName(prefix, 3), javaTags(300, now.Add(time.Hour)), false)            // heartbeat in the future
		// Exactly at the retention is not "older than" it.
		mk(hostName(prefix, 4), javaTags(300, now.Add(-300*time.Second)), false)

		// Other prefixed queues: deleted when idle only if empty.
		mk(prefix+"auto-empty", javaTags(60, stale), true)
		full := mk(prefix+"auto-visible", javaTags(60, stale), false)
		send(t, client, full.url, 0)
		inflight := mk(prefix+"auto-inflight", javaTags(60, stale), false)
		send(t, client, inflight.url, 0)
		if out, err := client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(inflight.url), VisibilityTimeout: 600}); err != nil || len(out.Messages) != 1 {
			t.Fatalf("receive: %v", err)
		}
		delayed := mk(prefix+"auto-delayed", javaTags(60, stale), false)
		send(t, client, delayed.url, 600)

		// Never temporary.
		mk(prefix+"plain", nil, false)
		mk(prefix+"hb-only", map[string]string{sqsapi.HeartbeatTag: strconv.FormatInt(stale.UnixMilli(), 10)}, false)
		mk(prefix+"bad-tag", map[string]string{sqsapi.RetentionTag: "five minutes"}, false)
		// Reserved names, even tagged as idle.
		mk(prefix+reap.CoordinationQueueSuffix, javaTags(1, stale), false)
		mk(prefix, javaTags(1, stale), false) // the Java sweeper's queue
		mk(prefix+"_DLQ", javaTags(1, stale), false)
		// Not under the prefix.
		mk("x"+hostName(prefix, 0), javaTags(1, stale), false)

		s, err := reap.NewSweeper(client, func(o *reap.Config) { o.Prefix = prefix }, clk.option())
		if err != nil {
			t.Fatal(err)
		}
		counter.Reset()
		rep, err := s.Sweep(ctx)
		if err != nil {
			t.Fatal(err)
		}

		d := rep.Outcomes
		if rep.Listed != 15 || rep.Kept() != 8 {
			t.Errorf("listed %d, kept %d; want 15, 8", rep.Listed, rep.Kept())
		}
		if want := (reap.Outcomes{Skipped: 3, Candidates: 12, NotTemporary: 2, Live: 2, Future: 1, NotEmpty: 3}); d != want {
			t.Errorf("detail = %+v\nwant     %+v", d, want)
		}
		if len(rep.Deleted) != 3 {
			t.Errorf("deleted %d queues, want 3: %v", len(rep.Deleted), rep.Deleted)
		}
		if len(rep.Errors) != 1 || !errors.Is(rep.Errors[0], reap.ErrBadTag) {
			t.Errorf("errors = %v, want one ErrBadTag", rep.Errors)
		}
		if len(rep.Errors) == 1 && !strings.Contains(rep.Errors[0].Error(), prefix+"bad-tag") {
			t.Errorf("error %v does not name the queue", rep.Errors[0])
		}
		// Cost: 1 ListQueues, 1 ListQueueTags per candidate, GetQueueAttributes
		// only for the 4 idle non-host queues, 1 DeleteQueue per deletion.
		wantCalls := map[string]int64{"ListQueues": 1, "ListQueueTags": 12, "GetQueueAttributes": 4, "DeleteQueue": 3}
		for op, n := range wantCalls {
			if got := counter.Get(op); got != n {
				t.Errorf("%s calls = %d, want %d (all: %v)", op, got, n, counter.Snapshot())
			}
		}
		if rep.Calls != int(counter.Total()) {
			t.Errorf("calls counted %d, counter total %d", rep.Calls, counter.Total())
		}
		for _, q := range qs {
			if got := !exists(t, client, q.url); got != q.wantGone {
				t.Errorf("queue %s: deleted = %v, want %v", q.name, got, q.wantGone)
			}
		}

		// Later, the fresh queues are idle too; the kept non-empty ones stay.
		clk.Advance(2 * time.Hour)
		rep, err = s.Sweep(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if d := rep.Outcomes; len(rep.Deleted) != 3 || d.Future != 0 || d.NotEmpty != 3 {
			t.Errorf("second sweep: %+v, want the 3 remaining host queues deleted", rep)
		}
	})
}

// TestJavaWireFormat checks a Reaper writes the tags as the Java client
// reads them, and the Java rule (reimplemented here from its description)
// judges them as our Sweeper does.
func TestJavaWireFormat(t *testing.T) {
	t.Parallel()
	sqstestenv.Each(t, func(t *testing.T, b *sqstestenv.Backend) {
		t.Parallel()
		client, _ := b.Client(t)
		prefix := testPrefix(t)
		u := createQueue(t, client, hostName(prefix, 0), nil)

		h, err := reap.New(client, func(o *reap.Config) { o.DisableSweeping = true })
		if err != nil {
			t.Fatal(err)
		}
		before := time.Now().UnixMilli()
		if err := h.Add(u, 300*time.Second); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = h.Close(context.Background()) }()
		testtime.Eventually(t, 5*time.Second, "first heartbeat", func() bool { return h.Stats().Heartbeats == 1 })
		after := time.Now().UnixMilli()

		tags := tagsOf(t, client, u)
		if tags[sqsapi.RetentionTag] != "300" {
			t.Errorf("retention tag = %q, want \"300\"", tags[sqsapi.RetentionTag])
		}
		hb, err := strconv.ParseInt(tags[sqsapi.HeartbeatTag], 10, 64) // Java: Long.parseLong
		if err != nil || hb < before || hb > after {
			t.Fatalf("heartbeat tag = %q, want epoch ms in [%d, %d]", tags[sqsapi.HeartbeatTag], before, after)
		}
		javaIdle := func(tags map[string]string, nowMillis int64) bool {
			r, ok := tags[sqsapi.RetentionTag]
			if !ok {
				return false
			}
			ret, _ := strconv.ParseInt(r, 10, 64)
			last, ok := tags[sqsapi.HeartbeatTag]
			if !ok {
				return true
			}
			l, _ := strconv.ParseInt(last, 10, 64)
			return nowMillis-l > ret*1000
		}
		v, retention, heartbeat, err := reap.Idle(tags, time.UnixMilli(after))
		if v != reap.VerdictLive || retention != 300*time.Second || heartbeat.UnixMilli() != hb || err != nil {
			t.Errorf("Idle of a fresh heartbeat = %s, %v, %v, %v", v, retention, heartbeat, err)
		}
		if v, _, _, _ := reap.Idle(tags, time.UnixMilli(after+301_000)); v != reap.VerdictIdle {
			t.Errorf("Idle 301 s later = %s, want idle", v)
		}
		if javaIdle(tags, after) {
			t.Error("Java rule calls a fresh Go heartbeat idle")
		}
		if !javaIdle(tags, after+301_000) {
			t.Error("Java rule does not call a 301 s old Go heartbeat idle")
		}
	})
}

// TestSweepPagesBeyond1000 lists more than one ListQueues page, on an
// in-process sqstest in a synctest bubble: the sweep reads tags at 10 a
// second, 100 s of the bubble's time here, which fauxqs would take in real
// time (TestSweepIdleRule runs the sweep on fauxqs).
func TestSweepPagesBeyond1000(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("creates 1,010 queues")
	}
	synctest.Test(t, func(t *testing.T) {
		client, counter := sqstestenv.InProcess(t).Client(t)
		ctx := context.Background()
		prefix := testPrefix(t)
		now := time.Now()
		const n = 1010
		// A third stale host queues (deleted without a count), a third stale
		// other queues (counted, deleted), a third fresh.
		names := make([]string, n)
		tags := make([]map[string]string, n)
		for i := range names {
			switch i % 3 {
			case 0:
				names[i], tags[i] = hostName(prefix, i), javaTags(60, now.Add(-time.Hour))
			case 1:
				names[i], tags[i] = fmt.Sprintf("%sother-%04d", prefix, i), javaTags(60, now.Add(-time.Hour))
			default:
				// Live for an hour: the sweep paces its tag reads, 10 a
				// second, over 101 s.
				names[i], tags[i] = hostName(prefix, i), javaTags(3600, now)
			}
		}
		var wg sync.WaitGroup
		work := make(chan int)
		var mu sync.Mutex
		var urls []string
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range work {
					out, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(names[i]), Tags: tags[i]})
					if err != nil {
						t.Error(err)
						continue
					}
					mu.Lock()
					urls = append(urls, aws.ToString(out.QueueUrl))
					mu.Unlock()
				}
			}()
		}
		for i := range names {
			work <- i
		}
		close(work)
		wg.Wait()
		t.Cleanup(func() {
			for _, u := range urls {
				_, _ = client.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: aws.String(u)})
			}
		})
		if t.Failed() {
			t.FailNow()
		}

		s, err := reap.NewSweeper(client, func(o *reap.Config) { o.Prefix = prefix })
		if err != nil {
			t.Fatal(err)
		}
		counter.Reset()
		start := time.Now()
		rep, err := s.Sweep(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if d := rep.Outcomes; rep.Listed != n || d.Candidates != n {
			t.Fatalf("listed %d, candidates %d, want %d", rep.Listed, d.Candidates, n)
		}
		wantDeleted := 0
		for i := range n {
			if i%3 != 2 {
				wantDeleted++
			}
		}
		if live := rep.Outcomes.Live; len(rep.Deleted) != wantDeleted || live != n-wantDeleted || rep.Kept() != live || len(rep.Errors) != 0 {
			t.Fatalf("report: deleted %d (want %d), live %d, kept %d, errors %v", len(rep.Deleted), wantDeleted, live, rep.Kept(), rep.Errors)
		}
		if got := counter.Get("ListQueues"); got != 2 {
			t.Errorf("ListQueues calls = %d, want 2 pages", got)
		}
		deletes := counter.Get("DeleteQueue")
		perQueue := float64(counter.Total()-deletes) / float64(rep.Listed)
		t.Logf("sweep of %d queues: %v, calls %v; %.2f calls per listed queue plus %d deletes", n, time.Since(start).Round(time.Millisecond), counter.Snapshot(), perQueue, deletes)
		if perQueue > 2 {
			t.Errorf("%.2f calls per listed queue, want at most 2 plus the delete", perQueue)
		}
		slices.Sort(rep.Deleted)
		if len(slices.Compact(rep.Deleted)) != wantDeleted {
			t.Error("a queue was deleted twice")
		}
	})
}
