package sqstest

// OpenHandler is NewHandler returning an error instead of panicking when
// the journal in Options.DataDir cannot be loaded: for a program that
// serves the Server beside handlers of its own on a listener it made, as
// tempq emulator serves its web console on the emulator's port. Queue URLs
// use the Host of each request; Close ends parked long polls, and the
// program closes its own listener.
func OpenHandler(optFns ...func(*Options)) (*Server, error) {
	s := newServer(optFns)
	if err := s.load(); err != nil {
		return nil, err
	}
	return s, nil
}
