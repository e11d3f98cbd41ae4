package reap_test

import (
	"testing"
	"time"

	"github.com/tempqueues/tempqueues/internal/reap"
)

func TestLeaseQueueName(t *testing.T) {
	if got, want := reap.LeaseQueueName(""), "__RequesterClientQueues__sweeper.fifo"; got != want {
		t.Errorf("LeaseQueueName(\"\") = %q, want %q", got, want)
	}
	if got, want := reap.LeaseQueueName("app_"), "app_sweeper.fifo"; got != want {
		t.Errorf("LeaseQueueName(app_) = %q, want %q", got, want)
	}
}

func TestNextSweepWindow(t *testing.T) {
	base := time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC) // a multiple of 5 min
	for _, c := range []struct {
		now    time.Time
		period time.Duration
		want   time.Time
	}{
		// Default period 5 min: windows open 30 s after each boundary.
		{base, 0, base.Add(30 * time.Second)},
		{base.Add(30 * time.Second), 0, base.Add(5*time.Minute + 30*time.Second)},
		{base.Add(29 * time.Second), 5 * time.Minute, base.Add(30 * time.Second)},
		// 10 s period: a margin of 1 s.
		{base.Add(4 * time.Second), 10 * time.Second, base.Add(11 * time.Second)},
	} {
		if got := reap.NextSweepWindow(c.now, c.period); !got.Equal(c.want) {
			t.Errorf("NextSweepWindow(%v, %v) = %v, want %v", c.now, c.period, got, c.want)
		}
	}
}
