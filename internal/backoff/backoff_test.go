package backoff

import (
	"context"
	"math"
	"testing"
	"testing/synctest"
	"time"
)

func TestCeilingGrowsAndCaps(t *testing.T) {
	p := Policy{Base: 100 * time.Millisecond, Cap: time.Second}
	want := []time.Duration{100, 200, 400, 800, 1000, 1000}
	for i, w := range want {
		if got := p.Ceiling(i); got != w*time.Millisecond {
			t.Errorf("Ceiling(%d) = %v, want %v", i, got, w*time.Millisecond)
		}
	}
	if got := p.Ceiling(1000); got != time.Second {
		t.Errorf("Ceiling(1000) = %v, want cap (no overflow)", got)
	}
	if got := p.Ceiling(-3); got != 100*time.Millisecond {
		t.Errorf("Ceiling(-3) = %v", got)
	}
	if got := (Policy{}).Ceiling(0); got != defaultBase {
		t.Errorf("zero Policy Ceiling(0) = %v", got)
	}
}

func TestDelayBoundsAndFullJitter(t *testing.T) {
	p := Policy{Base: time.Second, Cap: 900 * time.Second}
	const n = 20000
	for attempt := 0; attempt < 12; attempt++ {
		c := p.Ceiling(attempt)
		var sum float64
		lowHalf := 0
		for i := 0; i < n; i++ {
			d := p.Delay(attempt)
			if d < 0 || d > c {
				t.Fatalf("Delay(%d) = %v outside [0, %v]", attempt, d, c)
			}
			sum += float64(d)
			if d < c/2 {
				lowHalf++
			}
		}
		// Full jitter is uniform on [0, c]: mean c/2, half the mass below c/2.
		mean := sum / n / float64(c)
		if math.Abs(mean-0.5) > 0.02 {
			t.Errorf("attempt %d: mean delay %.3f of ceiling, want about 0.5", attempt, mean)
		}
		if frac := float64(lowHalf) / n; math.Abs(frac-0.5) > 0.02 {
			t.Errorf("attempt %d: %.3f of delays below half the ceiling, want about 0.5", attempt, frac)
		}
	}
}

func TestDelayDeterministicRand(t *testing.T) {
	p := Policy{Base: time.Second, Cap: 8 * time.Second, Rand: func(n int64) int64 { return n - 1 }}
	if got := p.Delay(10); got != 8*time.Second {
		t.Fatalf("Delay with max rand = %v, want the capped ceiling", got)
	}
}

// TestSleepHonoursContext runs in a synctest bubble: its clock moves only
// when Sleep waits, so the durations it measures are exact.
func TestSleepHonoursContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		start := time.Now()
		if err := Sleep(ctx, time.Hour); err != context.Canceled {
			t.Fatalf("Sleep on cancelled ctx = %v", err)
		}
		if d := time.Since(start); d != 0 {
			t.Fatalf("Sleep on a cancelled context waited %v", d)
		}
		start = time.Now()
		if err := Sleep(context.Background(), time.Minute); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d != time.Minute {
			t.Fatalf("Sleep(1m) waited %v", d)
		}
		// A context that ends during the sleep ends it then.
		ctx, cancel = context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		start = time.Now()
		if err := Sleep(ctx, time.Hour); err != context.DeadlineExceeded {
			t.Fatalf("Sleep past its context's deadline = %v", err)
		}
		if d := time.Since(start); d != time.Second {
			t.Fatalf("Sleep returned %v after it began, want at its context's deadline (1s)", d)
		}
	})
}

func TestJitterRange(t *testing.T) {
	for i := 0; i < 1000; i++ {
		d := Jitter(100*time.Second, 0.1)
		if d < 90*time.Second || d > 110*time.Second {
			t.Fatalf("Jitter = %v outside ±10%%", d)
		}
	}
	if Jitter(5*time.Second, 0) != 5*time.Second {
		t.Fatal("zero fraction must not change the duration")
	}
}
