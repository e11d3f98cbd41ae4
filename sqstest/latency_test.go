package sqstest_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/tempqueues/tempqueues/sqstest"
)

// draws returns n waits of f from a server whose source is seeded by seed,
// sorted.
func draws(t *testing.T, seed uint64, f sqstest.Fault, n int) []time.Duration {
	t.Helper()
	srv, err := sqstest.NewHandler()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close(context.Background()) })
	sqstest.SeedLatency(srv, seed)
	d := make([]time.Duration, n)
	for i := range d {
		d[i] = sqstest.Delay(srv, f)
	}
	return d
}

// TestJitteredLatencyDistribution draws jittered waits from a seeded
// source (no clock involved) and checks their median and 99th percentile
// against the fault's.
func TestJitteredLatencyDistribution(t *testing.T) {
	for _, tc := range []struct{ median, p99 time.Duration }{
		{10 * time.Millisecond, 40 * time.Millisecond},
		{2 * time.Millisecond, 3 * time.Millisecond},
		{25 * time.Millisecond, 250 * time.Millisecond},
	} {
		f := sqstest.Latency("", tc.median, tc.p99)
		const n = 200_000
		d := draws(t, 7, f, n)
		slices.Sort(d)
		within := func(name string, got, want time.Duration, tol float64) {
			if r := float64(got) / float64(want); r < 1-tol || r > 1+tol {
				t.Errorf("median %v, p99 %v: %s %v, want %v within %.0f%%", tc.median, tc.p99, name, got, want, tol*100)
			}
		}
		within("median", d[n/2], tc.median, 0.02)
		within("p99", d[n*99/100], tc.p99, 0.05)
		if d[0] <= 0 {
			t.Errorf("median %v, p99 %v: shortest wait %v", tc.median, tc.p99, d[0])
		}
	}
}

func TestJitteredLatencySeeded(t *testing.T) {
	f := sqstest.Latency("SendMessage", 10*time.Millisecond, 40*time.Millisecond)
	a, b, c := draws(t, 1, f, 100), draws(t, 1, f, 100), draws(t, 2, f, 100)
	if !slices.Equal(a, b) {
		t.Error("two servers seeded alike drew different waits")
	}
	if slices.Equal(a, c) {
		t.Error("two servers seeded differently drew the same waits")
	}
}

// TestConstantLatency: without a p99 above the median the wait is the
// median, every time.
func TestConstantLatency(t *testing.T) {
	for _, tc := range []struct{ median, p99 time.Duration }{
		{10 * time.Millisecond, 0},
		{10 * time.Millisecond, 10 * time.Millisecond},
		{10 * time.Millisecond, 5 * time.Millisecond},
		{0, 5 * time.Millisecond}, // no median: no wait
	} {
		for _, d := range draws(t, 3, sqstest.Latency("", tc.median, tc.p99), 50) {
			if d != tc.median {
				t.Errorf("median %v, p99 %v: wait %v, want %v", tc.median, tc.p99, d, tc.median)
				break
			}
		}
	}
}
