package bench

import (
	"syscall"
	"time"
)

// processCPU returns the user plus system CPU time of this process, all its
// threads together and its children excluded. ok is false when the system
// cannot tell.
func processCPU() (d time.Duration, ok bool) {
	var creation, exit, kernel, user syscall.Filetime
	h, err := syscall.GetCurrentProcess()
	if err != nil {
		return 0, false
	}
	if err := syscall.GetProcessTimes(h, &creation, &exit, &kernel, &user); err != nil {
		return 0, false
	}
	// The two are durations in 100 ns units, not instants: Nanoseconds
	// would subtract the 1601 epoch.
	ticks := func(ft syscall.Filetime) int64 { return int64(ft.HighDateTime)<<32 | int64(ft.LowDateTime) }
	return time.Duration((ticks(kernel) + ticks(user)) * 100), true
}
