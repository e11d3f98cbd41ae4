package redrive

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/tempqueues/tempqueues/internal/callbound"
)

// slowSources answers ListDeadLetterSourceQueues when release is closed,
// or fails when its context ends first.
type slowSources struct {
	nopClient
	release chan struct{}
	calls   atomic.Int32
}

func (c *slowSources) ListDeadLetterSourceQueues(ctx context.Context, _ *sqs.ListDeadLetterSourceQueuesInput, _ ...func(*sqs.Options)) (*sqs.ListDeadLetterSourceQueuesOutput, error) {
	c.calls.Add(1)
	select {
	case <-c.release:
		return &sqs.ListDeadLetterSourceQueuesOutput{QueueUrls: []string{"http://127.0.0.1:1/000000000000/src"}}, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// TestTargetHoldsNoLockAcrossItsLookup: while one caller's lookup of the
// source queue hangs, another caller's context still ends its wait; the
// lookup is bounded by callbound.Timeout, and the next caller looks again
// and shares one lookup with its peers.
func TestTargetHoldsNoLockAcrossItsLookup(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		c := &slowSources{release: make(chan struct{})}
		r, err := New(c, "http://127.0.0.1:1/000000000000/dlq", func(o *Options) { o.ParkingQueue = "http://127.0.0.1:1/000000000000/parked" })
		if err != nil {
			t.Fatal(err)
		}
		first := make(chan error, 1)
		go func() { _, err := r.Target(context.Background()); first <- err }()
		synctest.Wait()

		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		start := time.Now()
		if _, err := r.Target(ctx); !errors.Is(err, context.DeadlineExceeded) || time.Since(start) != time.Second {
			t.Errorf("a second caller got %v after %v, want its own deadline after 1s", err, time.Since(start))
		}
		if err := <-first; !errors.Is(err, context.DeadlineExceeded) || time.Since(start) != callbound.Timeout {
			t.Errorf("the hung lookup ended with %v after %v, want the calls' bound %v", err, time.Since(start), callbound.Timeout)
		}

		// Three callers now share one lookup.
		results := make(chan string, 3)
		for range 3 {
			go func() { u, _ := r.Target(context.Background()); results <- u }()
		}
		synctest.Wait()
		close(c.release)
		for range 3 {
			if u := <-results; u != "http://127.0.0.1:1/000000000000/src" {
				t.Errorf("Target = %q", u)
			}
		}
		if n := c.calls.Load(); n != 2 {
			t.Errorf("%d lookups, want 2 (the hung one, then one shared)", n)
		}
	})
}
