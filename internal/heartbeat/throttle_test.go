package heartbeat_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/internal/heartbeat"
	"github.com/tempqueues/tempqueues/sqsapi"
)

// A throttled heartbeat doubles the queue's retention once per heartbeat,
// writes it in the RetentionTag with the retry that gets through, keeps
// retrying within the written retention, and records the throttling for
// the process's sweeper.
func TestThrottledHeartbeatRaisesRetention(t *testing.T) {
	t.Parallel()
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
	if err := h.AddTagged(u, 3*time.Second, start.Add(-time.Second)); err != nil {
		t.Fatal(err)
	}
	eventually(t, 3*time.Second, "a heartbeat through the throttling", func() bool { return h.Stats().Heartbeats == 1 })
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
	eventually(t, 4*time.Second, "the next heartbeat", func() bool { return h.Stats().Heartbeats == 2 })
	if tags := f.last(); tags[sqsapi.RetentionTag] != "" {
		t.Errorf("a later heartbeat rewrote the retention: %v", tags)
	}
}
