package poll

import (
	"testing"
	"time"
)

func TestSizer(t *testing.T) {
	t0 := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	ms := func(f float64) time.Duration { return time.Duration(f * float64(time.Millisecond)) }
	run := func(n int, every time.Duration, msgs int) (*Sizer, time.Time) {
		var s Sizer
		at := t0
		for range n {
			s.Note(at, msgs)
			at = at.Add(every)
		}
		return &s, at.Add(-every)
	}
	lat := ms(10)
	if got := new(Sizer).Want(t0, lat); got != 1 {
		t.Errorf("no history: Want = %d, want 1", got)
	}
	// Sparse: bursts of 3 every 7 ms. 3/7 per ms x 10 ms / 10 = 0.43: one
	// poller keeps up, and a spare waits parked for the next burst.
	s, last := run(40, ms(7), 3)
	if got := s.Want(last, lat); got != 2 {
		t.Errorf("sparse: Want = %d, want 2", got)
	}
	if got := s.Want(last, 0); got != 1 {
		t.Errorf("latency unknown: Want = %d, want 1", got)
	}
	// Busy: full receives every 2 ms: 10/2 per ms x 10 ms / 10 = 5
	// pollers keep up; no spare, which would only split the receives.
	s, last = run(40, ms(2), 10)
	if got := s.Want(last, lat); got != 5 {
		t.Errorf("busy: Want = %d, want 5", got)
	}
	// Twice the latency, twice the pollers.
	if got := s.Want(last, 2*lat); got != 10 {
		t.Errorf("busy at 20 ms: Want = %d, want 10", got)
	}
	// Returns stop: the count falls back.
	if got := s.Want(last.Add(time.Second), lat); got != 1 {
		t.Errorf("a second after the last return: Want = %d, want 1", got)
	}
}

func TestSizerNoSpareForLoneMessages(t *testing.T) {
	t0 := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	var s Sizer
	at := t0
	for range 40 { // one message every 5 ms: 4 callers, each alone
		s.Note(at, 1)
		at = at.Add(5 * time.Millisecond)
	}
	// 1/5 per ms x 10 ms / 10 = 0.2: one poller, and no spare, so that
	// lone messages merge into bursts.
	if got := s.Want(at, 10*time.Millisecond); got != 1 {
		t.Errorf("Want = %d, want 1", got)
	}
}

func TestSizerNoSpare(t *testing.T) {
	t0 := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	s := Sizer{NoSpare: true}
	at := t0
	for range 40 { // bursts of 3 every 7 ms, as in TestSizer
		s.Note(at, 3)
		at = at.Add(7 * time.Millisecond)
	}
	if got := s.Want(at, 10*time.Millisecond); got != 1 {
		t.Errorf("Want = %d, want 1: no spare", got)
	}
}

func TestSizerSpareForOneCaller(t *testing.T) {
	t0 := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	var s Sizer
	at := t0
	for range 40 { // one caller: a message every 21 ms round trip
		s.Note(at, 1)
		at = at.Add(21 * time.Millisecond)
	}
	// Nothing to merge with: a spare parked keeps the next from waiting
	// for the poller's round trip.
	if got := s.Want(at, 10*time.Millisecond); got != 2 {
		t.Errorf("Want = %d, want 2", got)
	}
}
