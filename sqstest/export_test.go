package sqstest

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
