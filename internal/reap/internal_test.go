package reap

import (
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/tempqueues/tempqueues/internal/wire"
	"github.com/tempqueues/tempqueues/sqsapi"
)

func TestIdleRule(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_000)
	ms := func(d time.Duration) string { return strconv.FormatInt(now.Add(d).UnixMilli(), 10) }
	cases := []struct {
		name string
		tags map[string]string
		want outcome
		err  bool
	}{
		{"no tags", nil, outNotTemporary, false},
		{"heartbeat only", map[string]string{sqsapi.HeartbeatTag: ms(-time.Hour)}, outNotTemporary, false},
		{"retention only", map[string]string{sqsapi.RetentionTag: "300"}, outDeleted, false},
		{"stale", map[string]string{sqsapi.RetentionTag: "300", sqsapi.HeartbeatTag: ms(-301 * time.Second)}, outDeleted, false},
		{"1 ms past", map[string]string{sqsapi.RetentionTag: "300", sqsapi.HeartbeatTag: ms(-300*time.Second - time.Millisecond)}, outDeleted, false},
		{"exactly retention", map[string]string{sqsapi.RetentionTag: "300", sqsapi.HeartbeatTag: ms(-300 * time.Second)}, outLive, false},
		{"fresh", map[string]string{sqsapi.RetentionTag: "300", sqsapi.HeartbeatTag: ms(-time.Second)}, outLive, false},
		{"now", map[string]string{sqsapi.RetentionTag: "300", sqsapi.HeartbeatTag: ms(0)}, outLive, false},
		{"future", map[string]string{sqsapi.RetentionTag: "300", sqsapi.HeartbeatTag: ms(time.Millisecond)}, outFuture, false},
		{"bad retention", map[string]string{sqsapi.RetentionTag: "5m"}, outError, true},
		{"negative retention", map[string]string{sqsapi.RetentionTag: "-1"}, outError, true},
		{"bad heartbeat", map[string]string{sqsapi.RetentionTag: "300", sqsapi.HeartbeatTag: "yesterday"}, outError, true},
	}
	for _, c := range cases {
		v, _, _, err := Idle(c.tags, now)
		got := outError
		if err == nil {
			got = idle(v)
		}
		if got != c.want || (err != nil) != c.err || (v == VerdictError) != c.err {
			t.Errorf("%s: idle = %v, %v; want %v, error %v", c.name, got, err, c.want, c.err)
		}
	}
}

// TestLeaseWindows checks the timing invariants the lease relies on, for
// random instants and several periods.
func TestLeaseWindows(t *testing.T) {
	for _, period := range []time.Duration{minPeriod, 3 * time.Second, time.Minute, defaultPeriod, time.Hour, maxPeriod} {
		o, err := buildOptions("test", []func(*Config){func(o *Config) { o.Period = period }})
		if err != nil {
			t.Fatal(err)
		}
		l := newLease(nil, o, new(userTags))
		m := l.margin
		if m < time.Second || m > 30*time.Second || period < m+time.Second {
			t.Fatalf("period %v: margin %v breaks the window layout", period, m)
		}
		origin := time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)
		for range 2000 {
			now := origin.Add(time.Duration(rand.Int64N(int64(100 * period))))
			// A window start is a boundary plus the margin.
			poll := l.nextPoll(now)
			w := poll.Add(-m).Truncate(period).Add(m)
			if !poll.After(now) || poll.Before(w) || !poll.Before(w.Add(m)) {
				t.Fatalf("period %v: poll at %v for now %v is not inside a window [%v, +%v)", period, poll, now, w, m)
			}
			if poll.Sub(now) > period+m {
				t.Fatalf("period %v: next poll %v after now, more than a period and a margin", period, poll.Sub(now))
			}
			// A token taken at a poll reappears in the next window, and no
			// poll of the current window (1 s long poll included) sees it.
			until := l.hideUntil(poll)
			if until.Sub(until.Truncate(period)) != m {
				t.Fatalf("period %v: hideUntil %v is not a window start", period, until)
			}
			if until != w.Add(period) {
				t.Fatalf("period %v: token taken at %v hidden until %v, want the next window %v", period, poll, until, w.Add(period))
			}
			reappear := poll.Add(time.Duration(visibility(until.Sub(poll))) * time.Second)
			if reappear.Before(until) || !reappear.Before(until.Add(time.Second)) {
				t.Fatalf("period %v: token reappears at %v, want within 1 s after %v", period, reappear, until)
			}
			if lastPollEnd := w.Add(m + leaseWaitSeconds*time.Second); lastPollEnd.After(reappear) {
				t.Fatalf("period %v: a poll of the same window could see the token again", period)
			}
			// Taken at any moment (start-up), the token stays hidden at
			// least one margin.
			if d := l.hideUntil(now).Sub(now); d < m || d > period+m {
				t.Fatalf("period %v: hidden for %v", period, d)
			}
		}
	}
}

func TestVisibilityRounding(t *testing.T) {
	for _, c := range []struct {
		d    time.Duration
		want int32
	}{{0, 1}, {time.Millisecond, 1}, {time.Second, 1}, {time.Second + 1, 2}, {13 * time.Hour, wire.MaxVisibilityTimeout}} {
		if got := visibility(c.d); got != c.want {
			t.Errorf("visibility(%v) = %d, want %d", c.d, got, c.want)
		}
	}
}

// Zero values mean the defaults: an empty Prefix is the default prefix,
// never "every queue", and a zero Period the default period.
func TestZeroOptionsMeanDefaults(t *testing.T) {
	o, err := buildOptions("test", []func(*Config){func(o *Config) { o.Prefix, o.Period = "", 0 }})
	if err != nil {
		t.Fatal(err)
	}
	if o.Prefix != sqsapi.DefaultQueuePrefix || o.Period != defaultPeriod || o.Logger == nil {
		t.Errorf("zero options resolved to prefix %q, period %v, logger %v", o.Prefix, o.Period, o.Logger)
	}
}
