package deflog

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// The default logger shows Warn and above through slog.Default(), and a
// message repeated within the interval once, with the count it skipped.
func TestDefaultLoggerWarnsOnceAMinute(t *testing.T) {
	var buf bytes.Buffer
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	defer slog.SetDefault(prev)

	now := time.Unix(1_700_000_000, 0)
	l := Or(nil)
	l.Handler().(*handler).now = func() time.Time { return now }
	log := l.With(slog.String("queue_url", "q"))
	log.Info("routine")
	log.Debug("detail")
	for range 5 {
		log.Warn("store failed")
	}
	log.Error("other failure")
	now = now.Add(Interval)
	log.Warn("store failed")

	out := buf.String()
	if strings.Contains(out, "routine") || strings.Contains(out, "detail") {
		t.Errorf("below Warn logged: %s", out)
	}
	if n := strings.Count(out, "store failed"); n != 2 {
		t.Errorf("store failed logged %d times, want 2 (once, then after the interval): %s", n, out)
	}
	if !strings.Contains(out, "suppressed=4") || !strings.Contains(out, "other failure") || !strings.Contains(out, "queue_url=q") {
		t.Errorf("log: %s", out)
	}
	if l2 := slog.New(slog.DiscardHandler); Or(l2) != l2 {
		t.Error("Or replaced a given logger")
	}
	_ = context.Background()
}
