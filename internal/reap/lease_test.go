package reap_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/internal/callcount"
	"github.com/tempqueues/tempqueues/internal/reap"
	"github.com/tempqueues/tempqueues/internal/testkit/sqstestenv"
	"github.com/tempqueues/tempqueues/internal/testkit/testtime"
	"github.com/tempqueues/tempqueues/observe"
)

// The lease tests run in synctest bubbles (inBubble) at a 2 s period; the
// poll window is then 1 s long and starts 1 s after each period boundary.
const (
	testPeriod = 2 * time.Second
	testMargin = time.Second
)

// fleet is a set of Reapers sharing a prefix, each with its own client, as
// separate processes would be.
type fleet struct {
	t      *testing.T
	b      *sqstestenv.Backend
	prefix string

	mu      sync.Mutex
	sweeps  []sweepRecord
	members []*member
}

type sweepRecord struct {
	id int
	at time.Time
}

type member struct {
	id      int
	r       *reap.Reaper
	counter *callcount.Counter
	host    string // its host queue, when it has one
}

// addHost gives the member a requester host queue with a 2 s retention:
// the default 300 s scaled like testPeriod (150 times).
func (f *fleet) addHost(m *member) {
	f.t.Helper()
	client, _ := f.b.Client(f.t)
	m.host = createQueue(f.t, client, hostName(f.prefix, 0), nil)
	if err := m.r.Add(m.host, 2*time.Second); err != nil {
		f.t.Fatal(err)
	}
}

func newFleet(t *testing.T, b *sqstestenv.Backend) *fleet {
	return &fleet{t: t, b: b, prefix: testPrefix(t)}
}

func (f *fleet) start(optFns ...func(*reap.Config)) *member {
	f.t.Helper()
	client, counter := f.b.Client(f.t)
	f.mu.Lock()
	id := len(f.members)
	f.mu.Unlock()
	opts := append([]func(*reap.Config){func(o *reap.Config) {
		o.Prefix = f.prefix
		o.Period = testPeriod
		o.Observer = observe.Func(func(_ context.Context, e observe.Event) func(*types.Message, error) {
			if e.Kind == observe.Swept {
				f.mu.Lock()
				f.sweeps = append(f.sweeps, sweepRecord{id: id, at: time.Now().Add(-e.Detail.(reap.Tally).Duration)})
				f.mu.Unlock()
			}
			return nil
		})
	}}, optFns...)
	r, err := reap.New(client, opts...)
	if err != nil {
		f.t.Fatal(err)
	}
	m := &member{id: id, r: r, counter: counter}
	f.mu.Lock()
	f.members = append(f.members, m)
	f.mu.Unlock()
	f.t.Cleanup(func() { _ = r.Close(context.Background()) })
	return m
}

func (f *fleet) records() []sweepRecord {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]sweepRecord(nil), f.sweeps...)
}

// bucket is the lease period a sweep belongs to: from one window start to
// the next.
func bucket(at time.Time) time.Time { return at.Add(-testMargin).Truncate(testPeriod) }

// checkOnePerPeriod fails when two sweeps fall in one period.
func (f *fleet) checkOnePerPeriod() {
	f.t.Helper()
	seen := map[time.Time]sweepRecord{}
	for _, s := range f.records() {
		if prev, ok := seen[bucket(s.at)]; ok {
			f.t.Errorf("two sweeps in one period: reaper %d at %v and reaper %d at %v",
				prev.id, prev.at.Format("15:04:05.000"), s.id, s.at.Format("15:04:05.000"))
		}
		seen[bucket(s.at)] = s
	}
}

func (f *fleet) sweepsSince(t0 time.Time) []sweepRecord {
	var out []sweepRecord
	for _, s := range f.records() {
		if !s.at.Before(t0) {
			out = append(out, s)
		}
	}
	return out
}

func TestLeaseOneSweepPerPeriodAndTakeover(t *testing.T) {
	t.Parallel()
	inBubble(t, func(t *testing.T, b *sqstestenv.Backend) {
		f := newFleet(t, b)

		a := f.start()
		f.addHost(a)
		testtime.Eventually(t, 5*time.Second, "the first reaper to create and take the token", func() bool { return reap.LeaseCountsOf(a.r).Won == 1 })
		if lc := reap.LeaseCountsOf(a.r); lc.Created != 1 {
			t.Fatalf("lease counts %+v, want one token created", lc)
		}
		f.addHost(f.start())

		// Two reapers: one sweep per period.
		t0 := time.Now()
		testtime.Advance(4 * testPeriod)
		f.checkOnePerPeriod()
		if n := len(f.sweepsSince(t0)); n < 3 || n > 5 {
			t.Errorf("%d sweeps in 4 periods with 2 reapers, want about 4", n)
		}

		// Three reapers.
		f.addHost(f.start())
		t1 := time.Now()
		before := make([]int64, len(f.members))
		beforeTags := make([]int64, len(f.members))
		for i, m := range f.members {
			before[i] = m.counter.Total()
			beforeTags[i] = m.counter.Snapshot()["TagQueue"]
		}
		testtime.Advance(4 * testPeriod)
		elapsed := time.Since(t1)
		f.checkOnePerPeriod()
		// Each process's calls per hour at the defaults (time scaled 150
		// times): docs/cost.md gives an idle requester 60 to 72, 36 of them
		// heartbeats; the project's target is at most 120. The window is
		// short, so the bounds leave room for the phases of the periods.
		hours := elapsed.Seconds() * 150 / 3600
		for i, m := range f.members {
			perHour := float64(m.counter.Total()-before[i]) / hours
			tagsPerHour := float64(m.counter.Snapshot()["TagQueue"]-beforeTags[i]) / hours
			t.Logf("fleet of 3, reaper %d: %.0f calls/hour at the defaults (%v)", i, perHour, m.counter.Snapshot())
			if perHour > 120 {
				t.Errorf("fleet of 3, reaper %d: %.0f calls/hour, want at most 120", i, perHour)
			}
			if tagsPerHour < 18 {
				t.Errorf("fleet of 3, reaper %d: %.0f heartbeats (TagQueue)/hour, want about 36", i, tagsPerHour)
			}
		}
		recent := f.sweepsSince(t1)
		if n := len(recent); n < 3 || n > 5 {
			t.Errorf("%d sweeps in 4 periods with 3 reapers, want about 4", n)
		}
		created := int64(0)
		for _, m := range f.members {
			created += reap.LeaseCountsOf(m.r).Created
		}
		if created != 1 {
			t.Errorf("%d tokens created, want 1", created)
		}

		// Stop the last sweeper while it holds the token: another reaper takes
		// over at the next window, within one period.
		all := f.records()
		last := f.members[all[len(all)-1].id]
		if err := last.r.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		closedAt := time.Now()
		testtime.Advance(testPeriod + 2*testMargin + 1500*time.Millisecond)
		var takeover *sweepRecord
		for _, s := range f.sweepsSince(closedAt) {
			if s.id == last.id {
				t.Errorf("closed reaper %d swept at %v", s.id, s.at)
			}
			if takeover == nil {
				takeover = &s
			}
		}
		if takeover == nil {
			t.Fatalf("no sweep within %v after the sweeper stopped", testPeriod+2*testMargin+1500*time.Millisecond)
		}
		t.Logf("sweeper %d stopped; reaper %d took over %v later", last.id, takeover.id, takeover.at.Sub(closedAt).Round(time.Millisecond))
		if d := takeover.at.Sub(closedAt); d > testPeriod+testMargin {
			t.Errorf("reaper %d took over %v after the sweeper stopped, want within a period and a window", takeover.id, d)
		}

		// The stopped process's host queue goes idle after its retention (2 s)
		// and the next sweep deletes it; the live ones stay.
		client, _ := f.b.Client(t)
		testtime.Eventually(t, 2*testPeriod+2*time.Second, "the stopped reaper's host queue to be swept", func() bool { return !exists(t, client, last.host) })
		for _, m := range f.members {
			if m != last && !exists(t, client, m.host) {
				t.Errorf("live reaper %d lost its host queue", m.id)
			}
		}
		f.checkOnePerPeriod()
	})
}

// A fleet whose reapers start at the same instant on a period boundary
// sweeps once per period. In a bubble they did 1 run in 7: their first
// long polls, parked when the first token was sent, took it with the
// visibility computed when they started polling, so it reappeared in the
// same period and was taken again. Forty bubbles make a regression all
// but certain to show.
func TestLeaseFleetStartingTogetherSweepsOncePerPeriod(t *testing.T) {
	t.Parallel()
	for range 40 {
		inBubble(t, func(t *testing.T, b *sqstestenv.Backend) {
			f := newFleet(t, b)
			for range 3 {
				f.start()
			}
			testtime.Advance(3 * testPeriod)
			f.checkOnePerPeriod()
			if n := len(f.records()); n < 2 {
				t.Errorf("%d sweeps in 3 periods, want one a period", n)
			}
		})
	}
}

// TestLeaseDuplicateTokensConverge starts reapers at the same instant, so
// several may send a token at once; one token results and one sweep per
// period. It runs in real time, on fauxqs and sqstest, for a real
// server's FIFO deduplication; the bubbled start is
// TestLeaseFleetStartingTogetherSweepsOncePerPeriod.
func TestLeaseDuplicateTokensConverge(t *testing.T) {
	t.Parallel()
	sqstestenv.Each(t, func(t *testing.T, b *sqstestenv.Backend) {
		t.Parallel()
		f := newFleet(t, b)
		// New returns at once and each reaper polls in its own goroutine, so
		// the three first polls race.
		for range 3 {
			f.start()
		}
		time.Sleep(3 * testPeriod) // real: see the test's comment
		var created, dups int64
		for _, m := range f.members {
			lc := reap.LeaseCountsOf(m.r)
			created += lc.Created
			dups += lc.Duplicates
		}
		// Concurrent creations in one period share a deduplication id: SQS
		// keeps one token however many processes sent one.
		t.Logf("%d token sends, %d duplicates deleted", created, dups)
		if created < 1 {
			t.Errorf("no token created")
		}
		client, _ := f.b.Client(t)
		out, err := client.GetQueueUrl(context.Background(), &sqs.GetQueueUrlInput{QueueName: aws.String(f.prefix + reap.CoordinationQueueSuffix)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _, _ = client.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: out.QueueUrl}) })
		attrs, err := client.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{QueueUrl: out.QueueUrl, AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameAll}})
		if err != nil {
			t.Fatal(err)
		}
		total := 0
		for _, k := range []string{"ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible", "ApproximateNumberOfMessagesDelayed"} {
			n, _ := strconv.Atoi(attrs.Attributes[k])
			total += n
		}
		if total != 1 {
			t.Errorf("coordination queue holds %d messages, want the one token", total)
		}
		if tags := tagsOf(t, client, aws.ToString(out.QueueUrl)); len(tags) != 0 {
			t.Errorf("coordination queue has tags %v: a sweeper might delete it", tags)
		}
		f.checkOnePerPeriod()
	})
}

// firstSweep waits for the fleet's first sweep and returns a client and
// the coordination queue's URL, which that sweep created.
func (f *fleet) firstSweep(t *testing.T) (*sqs.Client, *sqs.GetQueueUrlOutput) {
	t.Helper()
	testtime.Eventually(t, 5*time.Second, "the first sweep", func() bool { return len(f.records()) == 1 })
	client, _ := f.b.Client(t)
	out, err := client.GetQueueUrl(context.Background(), &sqs.GetQueueUrlInput{QueueName: aws.String(f.prefix + reap.CoordinationQueueSuffix)})
	if err != nil {
		t.Fatal(err)
	}
	return client, out
}

// TestLeaseRecreatesDeletedCoordinationQueue deletes the coordination queue
// under a running reaper; it recreates queue and token and sweeps again.
func TestLeaseRecreatesDeletedCoordinationQueue(t *testing.T) {
	t.Parallel()
	inBubble(t, func(t *testing.T, b *sqstestenv.Backend) {
		f := newFleet(t, b)
		a := f.start()
		client, out := f.firstSweep(t)
		if _, err := client.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: out.QueueUrl}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _, _ = client.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: out.QueueUrl}) })
		testtime.Eventually(t, 4*testPeriod, "a sweep after the coordination queue was deleted", func() bool {
			return reap.LeaseCountsOf(a.r).Created == 2 && len(f.records()) >= 2
		})
	})
}

// TestIdleCostScaled runs one idle process, the worst case (it is alone, so
// it sweeps every period), with retention and period scaled down 150 times
// from the defaults (300 s, 5 min), and converts the counted calls to calls
// per hour at the defaults.
func TestIdleCostScaled(t *testing.T) {
	t.Parallel()
	inBubble(t, func(t *testing.T, b *sqstestenv.Backend) {
		const scale = 150 // 300 s / 2 s
		f := newFleet(t, b)
		client, _ := f.b.Client(t)
		host := createQueue(t, client, hostName(f.prefix, 0), nil)
		m := f.start()
		if err := m.r.Add(host, 2*time.Second); err != nil {
			t.Fatal(err)
		}
		// Let the one-time calls (coordination queue, token) happen first.
		testtime.Eventually(t, 5*time.Second, "the first sweep", func() bool { return len(f.records()) == 1 })
		testtime.Advance(testPeriod) // start measuring at an arbitrary phase
		before := m.counter.Snapshot()
		start := time.Now()
		testtime.Advance(12 * time.Second)
		after := m.counter.Snapshot()
		elapsed := time.Since(start)

		hours := elapsed.Seconds() * scale / 3600
		perHour := map[string]float64{}
		total := 0.0
		for op, n := range after {
			perHour[op] = float64(n-before[op]) / hours
			total += perHour[op]
		}
		t.Logf("idle process alone, at the defaults: %.0f calls/hour: %v", total, perHour)
		// 36 TagQueue + 12 ReceiveMessage + 12 ListQueues = 60. The lower
		// bounds (two thirds of each) fail a process that stops its
		// heartbeats, lease checks or sweeps, which the total alone would
		// let pass.
		if total > 70 {
			t.Errorf("%.0f calls/hour, want about 60", total)
		}
		for op, want := range map[string]float64{"TagQueue": 36, "ReceiveMessage": 12, "ListQueues": 12} {
			if perHour[op] < want*2/3 {
				t.Errorf("%.0f %s/hour, want about %.0f", perHour[op], op, want)
			}
		}
		if n := perHour["ListQueueTags"]; n != 0 {
			t.Errorf("%.0f ListQueueTags/hour: the process's own queue and the coordination queue must be skipped", n)
		}
	})
}

// The coordination queue carries the user's tags of the fleet's queues
// (requester.Options.HostQueueTags), never the reaper's own: here the
// process learns them after its first sweep created the queue untagged,
// and its next win of the lease tags it.
func TestLeaseQueueGetsTheUsersTags(t *testing.T) {
	t.Parallel()
	inBubble(t, func(t *testing.T, b *sqstestenv.Backend) {
		f := newFleet(t, b)
		a := f.start()
		client, out := f.firstSweep(t)
		t.Cleanup(func() { _, _ = client.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: out.QueueUrl}) })
		if tags := tagsOf(t, client, *out.QueueUrl); len(tags) != 0 {
			t.Fatalf("coordination queue tagged %v before any tag was known", tags)
		}
		tags := javaTags(2, time.Now())
		tags["team"] = "payments"
		host := createQueue(t, client, hostName(f.prefix, 0), tags)
		if err := a.r.AddTagged(host, 2*time.Second, tags); err != nil {
			t.Fatal(err)
		}
		testtime.Eventually(t, 4*testPeriod, "the user's tag on the coordination queue", func() bool {
			return tagsOf(t, client, *out.QueueUrl)["team"] == "payments"
		})
		if got := tagsOf(t, client, *out.QueueUrl); len(got) != 1 {
			t.Errorf("coordination queue tags %v, want only the user's", got)
		}
	})
}

// TestLeaseOnRealServers checks the lease's use of a FIFO queue on fauxqs
// and sqstest: one reaper creates the coordination queue and its one token,
// takes it and sweeps. It waits in real time (a period of 2 s at most) for
// the first sweep: the server is a real process.
func TestLeaseOnRealServers(t *testing.T) {
	t.Parallel()
	sqstestenv.Each(t, func(t *testing.T, b *sqstestenv.Backend) {
		t.Parallel()
		f := newFleet(t, b)
		a := f.start()
		f.addHost(a)
		client, out := f.firstSweep(t)
		t.Cleanup(func() { _, _ = client.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: out.QueueUrl}) })
		if lc := reap.LeaseCountsOf(a.r); lc.Created != 1 || lc.Won != 1 {
			t.Errorf("lease counts %+v, want one token created and won", lc)
		}
		attrs, err := client.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{QueueUrl: out.QueueUrl,
			AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameFifoQueue}})
		if err != nil {
			t.Fatal(err)
		}
		if attrs.Attributes["FifoQueue"] != "true" {
			t.Errorf("coordination queue attributes %v, want a FIFO queue", attrs.Attributes)
		}
		if !exists(t, client, a.host) {
			t.Error("the sweep deleted the live reaper's host queue")
		}
	})
}
