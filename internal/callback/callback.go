// Package callback runs functions a user hands the library (an orphan
// handler, an event hook) on library goroutines, where a panic would end
// the whole process for a caller's mistake: it is recovered and logged.
package callback

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"
)

// Run calls fn and reports whether it panicked; a panic is logged on log
// (which may be nil) as an error naming what, with its stack.
func Run(log *slog.Logger, what string, fn func()) (panicked bool) {
	defer func() {
		if p := recover(); p != nil {
			panicked = true
			if log != nil {
				log.LogAttrs(context.Background(), slog.LevelError, "tempqueues: "+what+" panicked; recovered",
					slog.String("panic", fmt.Sprint(p)), slog.String("stack", string(debug.Stack())))
			}
		}
	}()
	fn()
	return false
}
