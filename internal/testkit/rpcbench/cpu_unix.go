//go:build unix

package rpcbench

import (
	"syscall"
	"time"
)

// ProcessCPU returns the user and system CPU time the process has used.
func ProcessCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
