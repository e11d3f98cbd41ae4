//go:build !unix

package rpcbench

import "time"

// ProcessCPU returns 0 where the process's CPU time is not measured: the
// benchmarks then report no CPU time per call.
func ProcessCPU() time.Duration { return 0 }
