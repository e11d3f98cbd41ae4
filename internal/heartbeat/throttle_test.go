package heartbeat_test

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/internal/heartbeat"
	"github.com/tempqueues/tempqueues/internal/testkit/testtime"
	"github.com/tempqueues/tempqueues/sqsapi"
)

// A throttled heartbeat doubles the queue's retention once per heartbeat,
// writes it in the RetentionTag with the retry that gets through, keeps
// retrying within the written retention, and records the throttling for
// the process's sweeper.
func TestThrottledHeartbeatRaisesRetention(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var throttles atomic.Int64
		throttles.Store(3)
		f := &tagger{fail: func(string) error {
			if throttles.Add(-1) >= 0 {
				return &types.RequestThrottled{Message: aws.String("Rate exceeded")}
			}
			return nil
		}}
		h := heartbeat.New(f, heartbeat.Options{})
		defer func() { _ = h.Close(context.Background()) }()
		const u = "https://sqs.example/1/q"
		// Retention 3 s: heartbeats every second, the first due at once (tagged
		// an interval ago).
		start := time.Now()
		if err := h.AddTagged(u, 3*time.Second, heartbeat.Tags(3*time.Second, start.Add(-time.Second))); err != nil {
			t.Fatal(err)
		}
		testtime.Eventually(t, 3*time.Second, "a heartbeat through the throttling", func() bool { return h.Stats().Heartbeats == 1 })
		// Three throttled attempts and the success: all within the 2 s the
		// written retention had left.
		if el := time.Since(start); el > 2*time.Second {
			t.Errorf("the heartbeat got through after %v, beyond the written retention", el)
		}
		st := h.Stats()
		if st.Throttled != 3 || st.Failures != 3 || st.Raises != 1 {
			t.Errorf("Stats = %+v, want 3 throttled failures and 1 raise", st)
		}
		if tags := f.last(); tags[sqsapi.RetentionTag] != "6" || tags[sqsapi.HeartbeatTag] == "" {
			t.Errorf("tags of the heartbeat after throttling: %v, want the retention doubled to 6", tags)
		}
		if eff, ok := h.Effective(u); !ok || eff != 6*time.Second {
			t.Errorf("Effective = %v, %v; want 6s", eff, ok)
		}
		if lt := h.LastThrottle(); lt.Before(start) {
			t.Errorf("LastThrottle = %v, before the test started", lt)
		}
		// Later heartbeats write only the heartbeat, every 2 s now.
		testtime.Eventually(t, 4*time.Second, "the next heartbeat", func() bool { return h.Stats().Heartbeats == 2 })
		if tags := f.last(); tags[sqsapi.RetentionTag] != "" {
			t.Errorf("a later heartbeat rewrote the retention: %v", tags)
		}
	})
}

// Fit raises a queue's retention to the smallest multiple of its
// configured one that reaches the fleet's need (at most MaxRaise times),
// written by its next heartbeat, and lowers it again only while no tagging
// call was throttled since the previous Fit.
func TestFitRaisesAndLowers(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		f := &tagger{}
		h := heartbeat.New(f, heartbeat.Options{})
		defer func() { _ = h.Close(context.Background()) }()
		h.Fit(7 * time.Second)
		for _, c := range []struct{ configured, want time.Duration }{
			{3 * time.Second, 9 * time.Second},
			{time.Second, 7 * time.Second},
			{10 * time.Second, 10 * time.Second},
		} {
			if got := h.Fitted(c.configured); got != c.want {
				t.Errorf("need 7s: Fitted(%v) = %v, want %v", c.configured, got, c.want)
			}
		}
		h.Fit(time.Hour)
		if got := h.Fitted(time.Second); got != heartbeat.MaxRaise*time.Second {
			t.Errorf("need 1h: Fitted(1s) = %v, want MaxRaise seconds", got)
		}

		// A queue tagged with 3 s while the fleet needs 7 s: its first
		// heartbeat, within its first second, writes 9 s.
		h.Fit(7 * time.Second)
		const u = "https://sqs.example/1/q"
		if err := h.AddTagged(u, 3*time.Second, heartbeat.Tags(3*time.Second, time.Now())); err != nil {
			t.Fatal(err)
		}
		if eff, _ := h.Effective(u); eff != 9*time.Second {
			t.Errorf("Effective = %v after AddTagged under a 7s need, want 9s", eff)
		}
		testtime.Eventually(t, 3*time.Second, "the first heartbeat", func() bool { return h.Stats().Heartbeats == 1 })
		if tags := f.last(); tags[sqsapi.RetentionTag] != "9" {
			t.Errorf("first heartbeat wrote %v, want the retention 9", tags)
		}
		// The fleet shrinks and nothing was throttled: back to 3 s.
		h.Fit(0)
		if eff, _ := h.Effective(u); eff != 3*time.Second {
			t.Errorf("Effective = %v after a quiet Fit(0), want 3s", eff)
		}

		// A throttled call between two Fits keeps the raised retention.
		g := heartbeat.New(f, heartbeat.Options{})
		defer func() { _ = g.Close(context.Background()) }()
		if err := g.AddTagged(u, 3*time.Second, heartbeat.Tags(3*time.Second, time.Now())); err != nil {
			t.Fatal(err)
		}
		g.Fit(7 * time.Second)
		g.NoteThrottle(time.Now().Add(time.Millisecond))
		testtime.Advance(2 * time.Millisecond)
		g.Fit(0)
		if eff, _ := g.Effective(u); eff != 9*time.Second {
			t.Errorf("Effective = %v after Fit(0) with a throttle since the last Fit, want 9s kept", eff)
		}
		g.Fit(0)
		if eff, _ := g.Effective(u); eff != 3*time.Second {
			t.Errorf("Effective = %v after a second, quiet Fit(0), want 3s", eff)
		}
	})
}
