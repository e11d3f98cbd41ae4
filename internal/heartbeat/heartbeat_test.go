package heartbeat_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"

	"github.com/tempqueues/tempqueues/internal/callcount"
	"github.com/tempqueues/tempqueues/internal/clock"
	"github.com/tempqueues/tempqueues/internal/heartbeat"
	"github.com/tempqueues/tempqueues/internal/testkit/leakcheck"
	"github.com/tempqueues/tempqueues/internal/testkit/sqstestenv"
	"github.com/tempqueues/tempqueues/internal/testkit/testtime"
	"github.com/tempqueues/tempqueues/sqsapi"
)

// TestRefreshesAtFraction runs in a bubble on an in-process sqstest: the
// bubble's clock makes the counts exact.
func TestRefreshesAtFraction(t *testing.T) {
	t.Parallel()
	inBubble(t, func(t *testing.T, client *sqs.Client, counter *callcount.Counter) {
		u := createQueue(t, client, hostName(t))
		counter.Reset()

		h := heartbeat.New(client, heartbeat.Options{})
		defer func() { _ = h.Close(context.Background()) }()
		if err := h.Add(u, 3*time.Second); err != nil { // interval 1 s ±10%
			t.Fatal(err)
		}
		testtime.Advance(2500 * time.Millisecond)
		if n := counter.Get("TagQueue"); n != 3 {
			t.Errorf("%d TagQueue calls in 2.5 s at a 1 s interval (±10%%), want 3: at once, then about 1 s and 2 s", n)
		}
		if got := tagsOf(t, client, u)[sqsapi.RetentionTag]; got != "3" {
			t.Errorf("retention tag %q, want \"3\"", got)
		}
		// Adding again with the same retention keeps the schedule.
		if err := h.Add(u, 3*time.Second); err != nil {
			t.Fatal(err)
		}
		h.Remove(u)
		n := counter.Get("TagQueue")
		testtime.Advance(time.Hour)
		if got := counter.Get("TagQueue"); got != n {
			t.Errorf("%d TagQueue calls after Remove", got-n)
		}
		if h.Len() != 0 {
			t.Errorf("Len = %d after Remove", h.Len())
		}
	})
}

// TestAddTaggedSkipsFirstTag runs in a bubble; TestTagsOnRealServers
// checks the merge of tags on fauxqs too.
func TestAddTaggedSkipsFirstTag(t *testing.T) {
	t.Parallel()
	inBubble(t, func(t *testing.T, client *sqs.Client, counter *callcount.Counter) {
		now := time.Now()
		u := createTagged(t, client, now)
		counter.Reset()

		h := heartbeat.New(client, heartbeat.Options{})
		defer func() { _ = h.Close(context.Background()) }()
		if err := h.AddTagged(u, 3*time.Second, tagsOf(t, client, u)); err != nil {
			t.Fatal(err)
		}
		// The first refresh of a queue tagged now comes at a random point of
		// its interval (1 s ±10%) after the interval's first tenth: not by
		// 89 ms, and once by 1.1 s.
		testtime.Advance(89 * time.Millisecond)
		if got := counter.Get("TagQueue"); got != 0 {
			t.Errorf("%d TagQueue calls before a tenth of the first interval of a pre-tagged queue", got)
		}
		testtime.Eventually(t, 1100*time.Millisecond-89*time.Millisecond, "the first refresh, within one interval",
			func() bool { return counter.Get("TagQueue") > 0 })
		if got := counter.Get("TagQueue"); got != 1 {
			t.Fatalf("%d TagQueue calls at the first refresh, want 1", got)
		}
		checkMerged(t, client, u, now)
	})
}

// TestTagsOnRealServers checks, on fauxqs and sqstest, that a heartbeat of
// a tagged queue merges its tags: it moves the heartbeat and keeps the
// retention and the user's tags. It waits in real time for the first
// refresh (about 100 ms): the server is a real process.
func TestTagsOnRealServers(t *testing.T) {
	t.Parallel()
	sqstestenv.Each(t, func(t *testing.T, b *sqstestenv.Backend) {
		t.Parallel()
		client, counter := b.Client(t)
		now := time.Now()
		u := createTagged(t, client, now)
		counter.Reset()
		h := heartbeat.New(client, heartbeat.Options{})
		defer func() { _ = h.Close(context.Background()) }()
		if err := h.AddTagged(u, 3*time.Second, tagsOf(t, client, u)); err != nil {
			t.Fatal(err)
		}
		// The counter counts a call when it starts: wait for its effect.
		testtime.Eventually(t, 5*time.Second, "the first refresh", func() bool {
			return tagsOf(t, client, u)[sqsapi.HeartbeatTag] != strconv.FormatInt(now.UnixMilli(), 10)
		})
		checkMerged(t, client, u, now)
		if n := counter.Get("TagQueue"); n != 1 {
			t.Errorf("%d TagQueue calls, want the first refresh only", n)
		}
	})
}

// createTagged creates a host queue tagged as of now with a retention of
// 3 s, and a user's tag beside the heartbeat tags, as host queues carry.
func createTagged(t *testing.T, client *sqs.Client, now time.Time) string {
	t.Helper()
	tags := heartbeat.Tags(3*time.Second, now)
	tags["team"] = "payments"
	out, err := client.CreateQueue(context.Background(), &sqs.CreateQueueInput{
		QueueName: aws.String(hostName(t)),
		Tags:      tags,
	})
	if err != nil {
		t.Fatal(err)
	}
	u := aws.ToString(out.QueueUrl)
	t.Cleanup(func() { _, _ = client.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: out.QueueUrl}) })
	if tags := tagsOf(t, client, u); tags[sqsapi.RetentionTag] != "3" || tags[sqsapi.HeartbeatTag] != strconv.FormatInt(now.UnixMilli(), 10) {
		t.Fatalf("created with tags %v", tags)
	}
	return u
}

// checkMerged checks that a heartbeat moved the heartbeat tag of u, tagged
// at created, and kept the rest.
func checkMerged(t *testing.T, client *sqs.Client, u string, created time.Time) {
	t.Helper()
	tags := tagsOf(t, client, u)
	if tags["team"] != "payments" || tags[sqsapi.RetentionTag] != "3" || tags[sqsapi.HeartbeatTag] == strconv.FormatInt(created.UnixMilli(), 10) || len(tags) != 3 {
		t.Errorf("tags after a heartbeat %v: want the user's tag kept and the heartbeat moved", tags)
	}
}

func TestReportsDeletedQueue(t *testing.T) {
	t.Parallel()
	inBubble(t, func(t *testing.T, client *sqs.Client, counter *callcount.Counter) {
		u := createQueue(t, client, hostName(t))
		if _, err := client.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: aws.String(u)}); err != nil {
			t.Fatal(err)
		}
		counter.Reset()

		gone := make(chan error, 1)
		h := heartbeat.New(client, heartbeat.Options{OnQueueGone: func(queueURL string, err error) {
			if queueURL != u {
				t.Errorf("OnQueueGone(%q), want %q", queueURL, u)
			}
			gone <- err
		}})
		defer func() { _ = h.Close(context.Background()) }()
		if err := h.Add(u, 3*time.Second); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-gone:
			var qdne *types.QueueDoesNotExist
			if !errors.As(err, &qdne) {
				t.Errorf("OnQueueGone error %v is not a *types.QueueDoesNotExist", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("OnQueueGone not called")
		}
		testtime.Advance(time.Hour)
		if got := counter.Get("TagQueue"); got != 1 {
			t.Errorf("%d TagQueue calls, want 1: a deleted queue must be dropped", got)
		}
		if st := h.Stats(); st.QueuesGone != 1 || h.Len() != 0 {
			t.Errorf("stats %+v, Len %d", st, h.Len())
		}
	})
}

func TestBacksOffWhenThrottled(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		const throttled = 1500 * time.Millisecond
		until := time.Now().Add(throttled)
		var mu sync.Mutex
		var calls []time.Time
		f := &tagger{fail: func(string) error {
			mu.Lock()
			defer mu.Unlock()
			now := time.Now()
			calls = append(calls, now)
			if now.Before(until) {
				return &smithy.GenericAPIError{Code: "ThrottlingException", Message: "Rate exceeded", Fault: smithy.FaultClient}
			}
			return nil
		}}
		h := heartbeat.New(f, heartbeat.Options{})
		defer func() { _ = h.Close(context.Background()) }()
		// Retention 2 s: interval 667 ms, retries between 25 ms and 667 ms.
		if err := h.Add("https://sqs.example/123/q", 2*time.Second); err != nil {
			t.Fatal(err)
		}
		testtime.Advance(throttled + 2*time.Second)
		if h.Stats().Heartbeats < 1 {
			t.Fatal("no heartbeat 2 s after the throttling ended")
		}

		mu.Lock()
		defer mu.Unlock()
		fails := 0
		for _, c := range calls {
			if c.Before(until) {
				fails++
			}
		}
		if fails < 2 {
			t.Fatalf("only %d throttled calls: the test did not exercise backoff", fails)
		}
		// Exponential backoff: a handful of retries in 1.5 s, not a hot loop.
		if fails > 15 {
			t.Errorf("%d TagQueue calls while throttled for %v: hot loop", fails, throttled)
		}
		for i := 1; i < len(calls); i++ {
			if gap := calls[i].Sub(calls[i-1]); gap < 20*time.Millisecond {
				t.Errorf("retry %d came %v after the previous call", i, gap)
			}
		}
		if st := h.Stats(); st.Failures != int64(fails) || h.Len() != 1 {
			t.Errorf("stats %+v, Len %d; want %d failures and the queue kept", st, h.Len(), fails)
		}
	})
}

// TestJavaWireFormat checks the tags are written as the Java client reads
// them, at the Clock's time, and the Java rule (reimplemented here from its
// description) judges them live, then idle after the retention.
func TestJavaWireFormat(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		at := time.UnixMilli(1_767_225_600_123)
		f := &tagger{}
		h := heartbeat.New(f, heartbeat.Options{Clock: clock.Clock{NowFunc: func() time.Time { return at }}})
		defer func() { _ = h.Close(context.Background()) }()
		if err := h.Add("https://sqs.example/123/q", 300*time.Second); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if n := h.Stats().Heartbeats; n != 1 {
			t.Fatalf("%d heartbeats, want the first at once", n)
		}
		tags := f.last()
		want := map[string]string{sqsapi.RetentionTag: "300", sqsapi.HeartbeatTag: "1767225600123"}
		if len(tags) != 2 || tags[sqsapi.RetentionTag] != want[sqsapi.RetentionTag] || tags[sqsapi.HeartbeatTag] != want[sqsapi.HeartbeatTag] {
			t.Fatalf("first TagQueue wrote %v, want %v", tags, want)
		}
		if got := heartbeat.Tags(300*time.Second, at); got[sqsapi.RetentionTag] != "300" || got[sqsapi.HeartbeatTag] != "1767225600123" || len(got) != 2 {
			t.Errorf("Tags = %v, want %v", got, want)
		}
		javaIdle := func(tags map[string]string, nowMillis int64) bool {
			r, ok := tags[sqsapi.RetentionTag]
			if !ok {
				return false
			}
			ret, _ := strconv.ParseInt(r, 10, 64) // Java: Long.parseLong
			last, ok := tags[sqsapi.HeartbeatTag]
			if !ok {
				return true
			}
			l, _ := strconv.ParseInt(last, 10, 64)
			return nowMillis-l > ret*1000
		}
		if javaIdle(tags, at.UnixMilli()+300_000) {
			t.Error("Java rule calls a heartbeat as old as the retention idle")
		}
		if !javaIdle(tags, at.UnixMilli()+300_001) {
			t.Error("Java rule does not call a heartbeat older than the retention idle")
		}
	})
}

// TestFraction checks the interval follows Fraction, and that a value
// outside (0, MaxFraction] falls back to the default. With a frozen clock, a
// queue tagged exactly one interval ago is due at once, and one tagged a
// second less than a tenth of an interval ago (the first heartbeat comes
// after the interval's first tenth) is not due for as long as the frozen
// clock says.
func TestFraction(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		now := time.Now()
		frozen := clock.Clock{NowFunc: func() time.Time { return now }}
		for _, c := range []struct {
			fraction float64
			interval time.Duration
		}{{0, 100 * time.Second}, {0.9, 100 * time.Second}, {-1, 100 * time.Second}, {0.25, 75 * time.Second}, {0.5, 150 * time.Second}} {
			f := &tagger{}
			h := heartbeat.New(f, heartbeat.Options{Fraction: c.fraction, Clock: frozen})
			if err := h.AddTagged("https://sqs.example/1/early", 300*time.Second, heartbeat.Tags(300*time.Second, now.Add(-c.interval/10+time.Second))); err != nil {
				t.Fatal(err)
			}
			if err := h.AddTagged("https://sqs.example/1/due", 300*time.Second, heartbeat.Tags(300*time.Second, now.Add(-c.interval))); err != nil {
				t.Fatal(err)
			}
			testtime.Advance(time.Minute)
			if n := f.count(); n != 1 || h.Stats().Heartbeats != 1 {
				t.Errorf("Fraction %v: %d TagQueue calls, want 1 (interval %v)", c.fraction, n, c.interval)
			}
			if tags := f.last(); tags[sqsapi.RetentionTag] != "" {
				t.Errorf("Fraction %v: a pre-tagged queue got its retention tag rewritten: %v", c.fraction, tags)
			}
			if err := h.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
	})
}

func TestInvalidInput(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		h := heartbeat.New(&tagger{}, heartbeat.Options{})
		for _, tc := range []struct {
			url string
			ret time.Duration
		}{{"", time.Minute}, {"https://sqs.example/1/", time.Minute}, {"https://sqs.example/1/q", 500 * time.Millisecond}, {"https://sqs.example/1/q", 1500 * time.Millisecond}} {
			if err := h.Add(tc.url, tc.ret); !errors.Is(err, sqsapi.ErrInvalidInput) {
				t.Errorf("Add(%q, %v) = %v, want invalid input", tc.url, tc.ret, err)
			}
		}
		for _, tags := range []map[string]string{
			nil,
			{sqsapi.RetentionTag: "60"},
			{sqsapi.HeartbeatTag: "1700000000000"},
			{sqsapi.RetentionTag: "6O", sqsapi.HeartbeatTag: "1700000000000"},
			{sqsapi.RetentionTag: "60", sqsapi.HeartbeatTag: "-1"},
		} {
			if err := h.AddTagged("https://sqs.example/1/q", time.Minute, tags); !errors.Is(err, sqsapi.ErrInvalidInput) {
				t.Errorf("AddTagged with tags %v = %v, want invalid input", tags, err)
			}
		}
		if h.Len() != 0 {
			t.Errorf("Len = %d after invalid calls", h.Len())
		}
		if err := h.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
	})
}

// loopRunning reports whether a heartbeat goroutine is alive.
func loopRunning() bool {
	for _, g := range leakcheck.Leaked() {
		if strings.Contains(g, "heartbeat.(*Heartbeater).loop") {
			return true
		}
	}
	return false
}

// TestGoroutineOnlyWhileQueues checks the goroutine starts on the first Add,
// ends when the last queue is removed, starts again on the next Add, and
// that a Heartbeater with no queue makes no call.
func TestGoroutineOnlyWhileQueues(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// Not parallel: it looks at the process's goroutines.
		leakcheck.Check(t)
		f := &tagger{}
		h := heartbeat.New(f, heartbeat.Options{})
		testtime.Advance(time.Hour)
		if loopRunning() || f.count() != 0 {
			t.Fatalf("a Heartbeater with no queue runs a goroutine (%v) or made %d calls", loopRunning(), f.count())
		}
		if err := h.Add("https://sqs.example/1/a", time.Minute); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if n := h.Stats().Heartbeats; n != 1 {
			t.Fatalf("%d heartbeats, want the first at once", n)
		}
		if !loopRunning() {
			t.Fatal("no goroutine while a queue is registered")
		}
		h.Remove("https://sqs.example/1/a")
		leakcheck.Check(t) // the goroutine ended with the last queue
		if err := h.Add("https://sqs.example/1/b", time.Minute); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if n := h.Stats().Heartbeats; n != 2 {
			t.Fatalf("%d heartbeats, want the second at once after the restart", n)
		}
		if err := h.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		leakcheck.Check(t)
	})
}

// TestCloseContract checks Close: it cancels a call in flight at once and
// returns nil; it is idempotent; Add fails with ErrClosed afterwards; and
// when the goroutine cannot stop in time (a blocked OnQueueGone), Close
// returns ctx's error, later calls wait again, and return nil once it has
// stopped.
func TestCloseContract(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		f := &tagger{block: true}
		h := heartbeat.New(f, heartbeat.Options{})
		if err := h.Add("https://sqs.example/1/q", time.Minute); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if n := f.count(); n != 1 {
			t.Fatalf("%d calls, want the first in flight", n)
		}
		start := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := h.Close(ctx); err != nil {
			t.Fatalf("Close = %v", err)
		}
		if d := time.Since(start); d != 0 {
			t.Errorf("Close took %v with a call in flight, want it cancelled at once", d)
		}
		if err := h.Close(ctx); err != nil {
			t.Errorf("second Close = %v", err)
		}
		if err := h.Add("https://sqs.example/1/q", time.Minute); !errors.Is(err, sqsapi.ErrClosed) {
			t.Errorf("Add after Close = %v, want ErrClosed", err)
		}
		if st := h.Stats(); st.Failures != 0 {
			t.Errorf("a call cut short by Close counted as a failure: %+v", st)
		}

		release := make(chan struct{})
		entered := make(chan struct{})
		g := heartbeat.New(&tagger{fail: func(string) error { return &types.QueueDoesNotExist{} }}, heartbeat.Options{
			OnQueueGone: func(string, error) { close(entered); <-release },
		})
		if err := g.Add("https://sqs.example/1/gone", time.Minute); err != nil {
			t.Fatal(err)
		}
		<-entered
		short, cancelShort := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancelShort()
		if err := g.Close(short); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Close with the goroutine stuck = %v, want DeadlineExceeded", err)
		}
		if err := g.Close(short); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("second Close with the goroutine stuck = %v, want DeadlineExceeded", err)
		}
		close(release)
		// The first Close's result stands, as for every closable part
		// (internal/lifecycle).
		if err := g.Close(context.Background()); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Close after the goroutine stopped = %v, want the first Close's result", err)
		}
	})
}
