package reap

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// A budgeted sweep inspects one of ceil(candidates/budget) shares per
// period, so consecutive periods cover every queue once, and a queue
// deleted meanwhile moves no other queue to another share; an unbudgeted
// (standalone) sweep, or a fleet within the budget, inspects them all.
func TestSweepSliceCoversFleetAcrossPeriods(t *testing.T) {
	// Budget: 10/s × 60 s × 0.6 = 360 queues per period.
	o := Config{Prefix: "p_", Period: time.Minute}
	s := newSweeper(nil, o, nil, new(ownThrottles))
	if b := s.budget(); b != 360 {
		t.Fatalf("budget = %d, want 360", b)
	}
	var cands []string
	for i := range 900 {
		cands = append(cands, fmt.Sprintf("https://sqs.example/1/p_%03d", i))
	}
	origin := time.Unix(0, 0).Add(1000 * time.Minute) // a period boundary
	seen := map[string]int{}
	shareOf := map[string]int{}
	for p := range 3 {
		for _, u := range s.slice(cands, origin.Add(time.Duration(p)*time.Minute+time.Second)) {
			seen[u]++
			shareOf[u] = p
		}
	}
	if len(seen) != 900 {
		t.Errorf("3 periods covered %d of 900 queues", len(seen))
	}
	for u, c := range seen {
		if c != 1 {
			t.Errorf("%s inspected %d times in 3 periods", u, c)
		}
	}
	// Deleting queues (still above the budget) keeps the others' shares.
	fewer := cands[108:]
	for p := range 3 {
		for _, u := range s.slice(fewer, origin.Add(time.Duration(p)*time.Minute+time.Second)) {
			if shareOf[u] != p {
				t.Errorf("%s moved from share %d to %d", u, shareOf[u], p)
			}
		}
	}
	if got := s.slice(cands[:360], origin); len(got) != 360 {
		t.Errorf("a fleet within the budget: %d of 360 inspected", len(got))
	}
	s.budgeted = false
	if got := s.slice(cands, origin); len(got) != 900 {
		t.Errorf("a standalone sweep inspected %d of 900", len(got))
	}
}

// The pacer lets a burst through at once and then spaces calls to its
// rate.
func TestPacerRate(t *testing.T) {
	p := newPacer(100, 5)
	start := time.Now()
	for range 25 {
		if err := p.wait(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	// 5 at once, then 20 at 10 ms each.
	if el := time.Since(start); el < 150*time.Millisecond || el > 2*time.Second {
		t.Errorf("25 calls at 100/s with a burst of 5 took %v, want about 200ms", el)
	}
}

// A queue idle by the rule is kept while the sweep sees the account
// saturated (at least one read in 20 throttled) and tagging was throttled
// since its heartbeat, up to twice its retention; otherwise it is idle.
func TestGraceAfterThrottling(t *testing.T) {
	var log ownThrottles
	s := newSweeper(nil, Config{Prefix: "p_", Period: time.Minute}, nil, &log)
	now := time.Now()
	grace := func(age time.Duration) bool { return s.grace(300*time.Second, now.Add(-age), now) }
	s.reads.Store(10)
	s.readThrottles.Store(5)
	log.NoteThrottle(now.Add(-time.Second))
	if grace(400 * time.Second) {
		t.Error("grace after only 10 reads")
	}
	s.reads.Store(100)
	s.readThrottles.Store(0)
	if grace(400 * time.Second) {
		t.Error("grace while the sweep saw no throttling")
	}
	s.readThrottles.Store(4)
	if grace(400 * time.Second) {
		t.Error("grace while the sweep saw 4 of 100 reads throttled")
	}
	s.readThrottles.Store(5)
	if !grace(400 * time.Second) {
		t.Error("no grace for an idle queue while the account throttles")
	}
	if grace(601 * time.Second) {
		t.Error("grace beyond twice the retention")
	}
	var other ownThrottles
	other.NoteThrottle(now.Add(-500 * time.Second)) // before the heartbeat
	s.throttles = &other
	if grace(400 * time.Second) {
		t.Error("grace for throttling older than the heartbeat")
	}
}
