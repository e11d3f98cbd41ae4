//go:build !unix && !windows

package bench

import "time"

// processCPU cannot tell the process's CPU time on this system: the report
// leaves the CPU figures out.
func processCPU() (d time.Duration, ok bool) { return 0, false }
