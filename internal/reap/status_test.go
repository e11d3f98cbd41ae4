package reap_test

import (
	"context"
	"errors"
	"path"
	"sync"
	"testing"
	"time"

	"github.com/tempqueues/tempqueues/internal/reap"
	"github.com/tempqueues/tempqueues/internal/testkit/sqstestenv"
	"github.com/tempqueues/tempqueues/sqsapi"
)

// TestQueuesAndDryRun lists queues with the idle rule's verdicts, and checks a dry-run
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
		type listed struct {
			name           string
			host, reserved bool
			verdict        string
			retention      time.Duration
			heartbeat      time.Time
			err            error
		}
		var mu sync.Mutex
		qs := map[string]listed{}
		err = s.List(ctx, func(url string, host, reserved bool, tags map[string]string, err error) {
			q := listed{name: path.Base(url), host: host, reserved: reserved, err: err}
			if !reserved && err == nil {
				q.verdict, q.retention, q.heartbeat, q.err = reap.Idle(tags, s.Now())
			}
			mu.Lock()
			qs[url] = q
			mu.Unlock()
		})
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]string{
			urls["idle"]: reap.VerdictIdle, urls["live"]: reap.VerdictLive, urls["future"]: reap.VerdictFutureHeartbeat,
			urls["plain"]: reap.VerdictNotTemporary, urls["bad"]: reap.VerdictError, urls["lease"]: "",
		}
		if len(qs) != len(want) {
			t.Fatalf("List gave %d queues, want %d: %+v", len(qs), len(want), qs)
		}
		for u, q := range qs {
			if q.verdict != want[u] || q.reserved != (u == urls["lease"]) {
				t.Errorf("%s: verdict %q (reserved %v), want %q", q.name, q.verdict, q.reserved, want[u])
			}
			if (q.verdict == reap.VerdictError) != errors.Is(q.err, reap.ErrBadTag) {
				t.Errorf("%s: err %v", q.name, q.err)
			}
		}
		if q := qs[urls["live"]]; true {
			if age := now.Sub(q.heartbeat); age < time.Minute-time.Second || age > time.Minute+time.Second || q.retention != 300*time.Second || !q.host {
				t.Errorf("live queue: %+v, age %v", q, age)
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
