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
