//go:build unix

package bench

import (
	"syscall"
	"time"
)

// processCPU returns the user plus system CPU time of this process, all its
// threads together and its children excluded, so that a server run in a
// child process is not billed to the contenders. ok is false when the
// system cannot tell.
func processCPU() (d time.Duration, ok bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
