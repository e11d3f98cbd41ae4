//go:build !unix

package requester_test

import "time"

// processCPU returns 0 where the process's CPU time is not measured: the
// benchmarks then report no CPU time per reply.
func processCPU() time.Duration { return 0 }
