package sqstest

import (
	"math/rand/v2"
	"time"
)

// LockState holds the server's state lock until the returned function is
// called, so that a test can keep a request inside its handler.
func LockState(s *Server) (unlock func()) {
	s.mu.Lock()
	return s.mu.Unlock
}

// Running returns the number of handlers running.
func Running(s *Server) int {
	s.runMu.Lock()
	defer s.runMu.Unlock()
	return s.running
}

// SeedLatency replaces the server's source of jittered latencies with one
// seeded by seed, so that a test draws a known sequence.
func SeedLatency(s *Server, seed uint64) {
	s.rngMu.Lock()
	s.rng = rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	s.rngMu.Unlock()
}

// Delay draws the wait that f gives one call, from the server's source.
func Delay(s *Server, f Fault) time.Duration { return s.delay(&f) }

// SetCompactSlack sets the journal growth that starts an online compaction
// and returns a function that restores the default.
func SetCompactSlack(n int64) (restore func()) {
	old := compactSlack
	compactSlack = n
	return func() { compactSlack = old }
}

// JournalStats waits for a compaction in progress, then returns the
// journal's size in bytes, the compactions done since the server started
// and the longest time one held the server's lock.
func JournalStats(s *Server) (size int64, compactions int, pause time.Duration) {
	return s.journal.Stats()
}

// CaptureForCompaction does what an online compaction does under the
// server's lock: the pause requests see.
func CaptureForCompaction(s *Server) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.capture()
	n := len(c.queues)
	for _, m := range c.msgs {
		n += len(m)
	}
	return n
}

// Compact runs an online compaction of the journal and returns when it is
// done.
func Compact(s *Server) {
	s.journal.Start()
	s.compact()
}

// ListedMessages returns how many of a queue's messages a receive would
// walk: those in its list, not in the heap of hidden ones.
func ListedMessages(s *Server, queue string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.queues[queue]
	n := 0
	for m := q.head; m != nil; m = m.next {
		n++
	}
	return n
}

// ReceiptHandles returns the latest receipt handle of each of a queue's
// messages, in the order of Messages; empty for one never received.
func ReceiptHandles(s *Server, queue string) []string {
	return eachMessage(s, queue, func(m *message) string { return m.handle })
}

// SequenceNumbers returns the sequence number of each of a FIFO queue's
// messages, in the order of Messages.
func SequenceNumbers(s *Server, queue string) []string {
	return eachMessage(s, queue, func(m *message) string { return m.seqNum })
}

// eachMessage returns f of each of a queue's messages, in the order of
// Messages; nil for a queue that does not exist.
func eachMessage(s *Server, queue string, f func(*message) string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	q, aerr := s.lookupState(queue)
	if aerr != nil {
		return nil
	}
	var out []string
	for _, m := range q.all() {
		out = append(out, f(m))
	}
	return out
}

// PendingTimers returns the number of timers scheduled on c, which lets a
// test wait until a server goroutine has parked before advancing it.
func PendingTimers(c *Clock) int { return c.pending() }

// AfterFunc schedules f on c as the server does, returning the timer's
// Stop.
func AfterFunc(c *Clock, d time.Duration, f func()) (stop func() bool) {
	return c.afterFunc(d, f).Stop
}
