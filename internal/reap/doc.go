// Package reap is the reaper's implementation: the heartbeats of a
// process's own temporary queues (on internal/heartbeat), the fleet's
// sweeper lease, the sweeps and the fleet counts that fit the queues'
// retention to the account's tagging quota. The public package reaper is
// its face, and its documentation says what each part does and costs;
// internal/core runs one Reaper for the host queues a client owns.
//
// Its Options are the face's, field for field; Config adds what the
// library and the tests set beside them (a clock, a time scale).
package reap
