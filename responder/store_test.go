package responder

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/tempqueues/tempqueues/internal/wire"
)

func TestMemoryStoreLifecycle(t *testing.T) {
	ctx := context.Background()
	now := time.Unix(1000, 0)
	var s memoryStore // the zero value is ready
	s.now = func() time.Time { return now }

	if e, err := s.Begin(ctx, "k", "a", 10*time.Second); err != nil || e.Status != Acquired {
		t.Fatalf("first Begin = %v, %v", e, err)
	}
	if e, _ := s.Begin(ctx, "k", "b", 10*time.Second); e.Status != InProgress {
		t.Fatalf("Begin while leased = %v, want InProgress", e.Status)
	}
	if err := s.Renew(ctx, "k", "b", time.Second); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("Renew by a non-owner = %v", err)
	}
	now = now.Add(8 * time.Second)
	if err := s.Renew(ctx, "k", "a", 10*time.Second); err != nil {
		t.Fatalf("Renew = %v", err)
	}
	now = now.Add(8 * time.Second) // past the first lease, within the renewed one
	if e, _ := s.Begin(ctx, "k", "b", 10*time.Second); e.Status != InProgress {
		t.Fatalf("Begin after renewal = %v, want InProgress", e.Status)
	}
	// Release by a non-owner does nothing; by the owner frees the key.
	_ = s.Release(ctx, "k", "b")
	if e, _ := s.Begin(ctx, "k", "c", time.Second); e.Status != InProgress {
		t.Fatal("a non-owner released the lease")
	}
	_ = s.Release(ctx, "k", "a")
	if e, _ := s.Begin(ctx, "k", "c", time.Second); e.Status != Acquired {
		t.Fatal("released lease not acquirable")
	}

	// An expired lease (crashed owner) is taken over.
	now = now.Add(2 * time.Second)
	if err := s.Renew(ctx, "k", "c", time.Second); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("Renew of an expired lease = %v", err)
	}
	if e, _ := s.Begin(ctx, "k", "d", time.Minute); e.Status != Acquired {
		t.Fatal("expired lease not taken over")
	}

	// Complete stores the reply, which later Begins return as a copy.
	reply := &Reply{Body: "answer", Attributes: nAttrs(1)}
	if err := s.Complete(ctx, "k", "d", reply, time.Hour); err != nil {
		t.Fatal(err)
	}
	reply.Attributes["late"] = wire.StringAttribute("x") // the caller's map is not shared
	e, _ := s.Begin(ctx, "k", "e", time.Minute)
	if e.Status != Done || e.Reply.Body != "answer" || len(e.Reply.Attributes) != 1 {
		t.Fatalf("Begin after Complete = %+v", e)
	}
	if err := s.Complete(ctx, "nil", "x", nil, time.Hour); err != nil {
		t.Fatal(err)
	}
	if e, _ := s.Begin(ctx, "nil", "y", time.Minute); e.Status != Done || e.Reply != nil {
		t.Fatalf("nil reply stored as %+v", e)
	}

	// Expiry: answers vanish after their TTL; sweeps drop dead entries
	// without a goroutine.
	now = now.Add(2 * time.Hour)
	if e, _ := s.Begin(ctx, "k", "f", time.Second); e.Status != Acquired {
		t.Fatalf("Begin after TTL = %v", e.Status)
	}
	now = now.Add(time.Hour)
	_ = s.Release(ctx, "other", "z")
	if n := s.len(); n != 0 {
		t.Fatalf("%d entries after everything expired", n)
	}
	if Done.String() != "done" || Status(9).String() != "unknown" {
		t.Error("Status.String")
	}
}

func TestOptionsValidation(t *testing.T) {
	e := &faultClient{}
	bad := []func(*Options){
		func(o *Options) { o.MaxConcurrency = -1 },
		func(o *Options) { o.PollWaitTime = 21 * time.Second },
		func(o *Options) { o.PollWaitTime = time.Millisecond },
		func(o *Options) { o.VisibilityTimeout = 1500 * time.Millisecond },
		func(o *Options) { o.VisibilityTimeout = 13 * time.Hour },
		func(o *Options) { o.BackoffCap = -1 },
		func(o *Options) { o.InProgressDelay = 13 * time.Hour },
		func(o *Options) { o.DrainTimeout = -1 },
	}
	for i, fn := range bad {
		if _, err := New(e, fn); err == nil {
			t.Errorf("bad option %d accepted", i)
		}
	}
	if _, err := New(nil); err == nil {
		t.Error("nil client accepted")
	}
	r, err := New(e, func(o *Options) { o.MaxConcurrency = 35 })
	if err != nil {
		t.Fatal(err)
	}
	o := r.opts
	if o.MaxPollers != 4 || o.PollWaitTime != 20*time.Second || o.VisibilityTimeout != 30*time.Second || o.InProgressDelay != 30*time.Second || o.Logger == nil {
		t.Errorf("defaults %+v", o)
	}
	if err := r.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestRetryBackoffDelay(t *testing.T) {
	r, err := New(&faultClient{}, func(o *Options) {
		o.BackoffBase = time.Second
		o.BackoffCap = 8 * time.Second
	})
	if err != nil {
		t.Fatal(err)
	}
	s := &server{r: r}
	failAt := func(count int) action {
		x := &exchange{s: s, req: &Request{ReceiveCount: count}}
		return retry(context.Background(), x, func(context.Context, *exchange) action { return fail(nil) })
	}
	for count, ceiling := range map[int]time.Duration{1: time.Second, 2: 2 * time.Second, 3: 4 * time.Second, 10: 8 * time.Second} {
		for range 50 {
			a := failAt(count)
			if a.kind != actRelease || a.delay < 0 || a.delay > ceiling {
				t.Fatalf("receive %d: %+v, want a release within %v", count, a, ceiling)
			}
		}
	}
	r.opts.BackoffBase = 0
	if a := failAt(1); a.kind != actNone {
		t.Errorf("BackoffBase 0, left to the visibility timeout: %+v", a)
	}
	r.opts.BackoffBase = -1
	if a := failAt(3); a.kind != actRelease || a.delay != 0 {
		t.Errorf("BackoffBase below 0, released at once: %+v", a)
	}
}

// TestMemoryStoreSweepIsIncremental checks that no call removes more than a
// bounded number of expired entries (no call pauses to scan a large store),
// that calls keep removing them, and that a renewed lease outlives the
// expiry record of its first lease.
func TestMemoryStoreSweepIsIncremental(t *testing.T) {
	ctx := context.Background()
	now := time.Unix(1_000_000, 0)
	var s memoryStore
	s.now = func() time.Time { return now }
	const n = 1000
	for i := range n {
		if err := s.Complete(ctx, fmt.Sprint("done-", i), "t", &Reply{Body: "b"}, time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	if e, _ := s.Begin(ctx, "lease", "owner", 30*time.Second); e.Status != Acquired {
		t.Fatalf("Begin = %v", e.Status)
	}
	now = now.Add(20 * time.Second)
	if err := s.Renew(ctx, "lease", "owner", 5*time.Minute); err != nil {
		t.Fatal(err)
	}
	now = now.Add(2 * time.Minute) // the answers and the first lease record expired
	if e, _ := s.Begin(ctx, "probe", "p", time.Hour); e.Status != Acquired {
		t.Fatalf("Begin = %v", e.Status)
	}
	// The call popped memSweepMax records, oldest first: the lease's first
	// (stale: it was renewed) and memSweepMax-1 answers.
	if got, want := s.len(), n+2-(memSweepMax-1); got != want {
		t.Fatalf("%d entries after one call, want %d: one call handles at most %d expiry records", got, want, memSweepMax)
	}
	for range n / memSweepMax {
		_ = s.Release(ctx, "nothing", "x")
	}
	if got := s.len(); got != 2 {
		t.Fatalf("%d entries left, want the renewed lease and the probe", got)
	}
	if err := s.Renew(ctx, "lease", "owner", time.Minute); err != nil {
		t.Fatalf("the renewed lease was dropped with its first expiry: %v", err)
	}
}

// BenchmarkMemoryStore is the store's cost per request (Begin, then
// Complete) on a store holding a million answers that expire while it runs,
// so that the sweep's share is included.
func BenchmarkMemoryStore(b *testing.B) {
	ctx := context.Background()
	now := time.Unix(1_000_000, 0)
	var s memoryStore
	s.now = func() time.Time { return now }
	reply := &Reply{Body: "answer"}
	for i := range 1_000_000 {
		_ = s.Complete(ctx, fmt.Sprint("old-", i), "t", reply, time.Duration(i)*time.Millisecond)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		now = now.Add(time.Millisecond) // one old answer expires per request
		key := fmt.Sprint("k-", i)
		if e, _ := s.Begin(ctx, key, "t", 30*time.Second); e.Status != Acquired {
			b.Fatal(e.Status)
		}
		_ = s.Complete(ctx, key, "t", reply, time.Hour)
	}
}
