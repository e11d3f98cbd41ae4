package reap_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/tempqueues/tempqueues/internal/reap"
	"github.com/tempqueues/tempqueues/internal/testkit/sqstestenv"
	"github.com/tempqueues/tempqueues/sqsapi"
)

// TestQueuesAndDryRun lists queues with their verdicts, and checks a dry-run
// sweep reports the idle queues and deletes none.
func TestQueuesAndDryRun(t *testing.T) {
	sqstestenv.Each(t, func(t *testing.T, b *sqstestenv.Backend) {
		client, counter := b.Client(t)
		ctx := context.Background()
		prefix := testPrefix(t)
		clk := frozenClock()
		now := clk.Now()
		urls := map[string]string{
			"idle":   createQueue(t, client, hostName(prefix, 0), javaTags(300, now.Add(-10*time.Minute))),
			"live":   createQueue(t, client, hostName(prefix, 1), javaTags(300, now.Add(-time.Minute))),
			"future": createQueue(t, client, hostName(prefix, 2), javaTags(300, now.Add(time.Hour))),
			"plain":  createQueue(t, client, prefix+"plain", nil),
			"bad":    createQueue(t, client, prefix+"bad", map[string]string{sqsapi.RetentionTag: "soon"}),
			"lease":  createQueue(t, client, prefix+reap.CoordinationQueueSuffix, nil),
		}
		s, err := reap.NewSweeper(client, func(o *reap.Config) { o.Prefix = prefix }, clk.option())
		if err != nil {
			t.Fatal(err)
		}
		qs, err := s.Queues(ctx)
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]reap.Verdict{
			urls["idle"]: reap.VerdictIdle, urls["live"]: reap.VerdictLive, urls["future"]: reap.VerdictFutureHeartbeat,
			urls["plain"]: reap.VerdictNotTemporary, urls["bad"]: reap.VerdictError, urls["lease"]: reap.VerdictReserved,
		}
		if len(qs) != len(want) {
			t.Fatalf("Queues returned %d queues, want %d: %+v", len(qs), len(want), qs)
		}
		for _, q := range qs {
			if q.Verdict != want[q.QueueURL] {
				t.Errorf("%s: verdict %s, want %s", q.Name, q.Verdict, want[q.QueueURL])
			}
			if (q.Verdict == reap.VerdictError) != errors.Is(q.Err, reap.ErrBadTag) {
				t.Errorf("%s: err %v", q.Name, q.Err)
			}
		}
		for _, q := range qs {
			if q.QueueURL == urls["live"] {
				if age := now.Sub(q.Heartbeat); age < time.Minute-time.Second || age > time.Minute+time.Second || q.Retention != 300*time.Second || !q.RequesterHostQueue {
					t.Errorf("live queue: %+v, age %v", q, age)
				}
			}
		}

		dry, err := reap.NewSweeper(client, func(o *reap.Config) { o.Prefix = prefix; o.DryRun = true }, clk.option())
		if err != nil {
			t.Fatal(err)
		}
		counter.Reset()
		rep, err := dry.Sweep(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(rep.Deleted) != 1 || rep.Deleted[0] != urls["idle"] || counter.Get("DeleteQueue") != 0 {
			t.Fatalf("dry run: %+v, calls %v", rep, counter.Snapshot())
		}
		for name, u := range urls {
			if !exists(t, client, u) {
				t.Errorf("dry run deleted %s", name)
			}
		}
	})
}
