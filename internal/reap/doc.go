// Package reap is the reaper's implementation: the heartbeats of a
// process's own temporary queues (on internal/heartbeat), the fleet's
// sweeper lease, the sweeps and the fleet counts that fit the queues'
// retention to the account's tagging quota. The public package reaper is
// its face, and its documentation says what each part does and costs;
// internal/core runs one Reaper for the host queues a client owns.
//
// The types users read (reaper.Options, QueueStatus, Verdict, Report) are
// defined and documented in the face; Config holds the settings they give
// and what the library and the tests set beside them (a clock), List and
// Idle give the face what reaper.Sweeper.Queues reports, and a sweep's
// Tally counts its queues by outcome, which the faces sum into a
// reaper.Report.
package reap
