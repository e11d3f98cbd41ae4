package responder

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/tempqueues/tempqueues/sqsapi"
)

func TestMemoryStoreLifecycle(t *testing.T) {
	ctx := context.Background()
	now := time.Unix(1000, 0)
	var s MemoryStore // the zero value is ready
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
	reply.Attributes["late"] = sqsapi.StringAttribute("x") // the caller's map is not shared
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
	if n := s.Len(); n != 0 {
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
		func(o *Options) { o.WaitTime = 21 * time.Second },
		func(o *Options) { o.WaitTime = time.Millisecond },
		func(o *Options) { o.VisibilityTimeout = 1500 * time.Millisecond },
		func(o *Options) { o.VisibilityTimeout = 13 * time.Hour },
		func(o *Options) { o.Retry = 7 },
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
	if o.MaxPollers != 4 || o.WaitTime != 20*time.Second || o.VisibilityTimeout != 30*time.Second || o.InProgressDelay != 30*time.Second || o.Logger == nil {
		t.Errorf("defaults %+v", o)
	}
	if err := r.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestRetryBackoffDelay(t *testing.T) {
	r, err := New(&faultClient{}, func(o *Options) {
		o.Retry = RetryWithBackoff
		o.RetryBackoffBase = time.Second
		o.RetryBackoffCap = 8 * time.Second
	})
	if err != nil {
		t.Fatal(err)
	}
	s := &server{r: r}
	for count, ceiling := range map[int]time.Duration{1: time.Second, 2: 2 * time.Second, 3: 4 * time.Second, 10: 8 * time.Second} {
		for range 50 {
			a := s.failureAction(&Request{ReceiveCount: count})
			if a.kind != actRelease || a.delay < 0 || a.delay > ceiling {
				t.Fatalf("receive %d: %+v, want a release within %v", count, a, ceiling)
			}
		}
	}
	r.opts.Retry = RetryAfterVisibilityTimeout
	if a := s.failureAction(&Request{ReceiveCount: 1}); a.kind != actNone {
		t.Errorf("RetryAfterVisibilityTimeout: %+v", a)
	}
}
