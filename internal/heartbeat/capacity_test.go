package heartbeat_test

import (
	"testing"
	"time"

	"github.com/tempqueues/tempqueues/internal/heartbeat"
)

// Need agrees with the table of docs/capacity.md: the largest fleet at
// each retention needs no more than that retention, and one 5% larger
// needs more.
func TestNeedMatchesCapacityTable(t *testing.T) {
	const period = 5 * time.Minute
	for _, c := range []struct {
		retention time.Duration
		largest   int
	}{
		{300 * time.Second, 1800}, {600 * time.Second, 2880}, {900 * time.Second, 4200},
		{1200 * time.Second, 5600}, {1800 * time.Second, 8400}, {2400 * time.Second, 11200}, {4800 * time.Second, 22400},
	} {
		if got := heartbeat.Need(c.largest, period); got > c.retention {
			t.Errorf("a fleet of %d needs %v, more than the table's %v", c.largest, got, c.retention)
		}
		if got := heartbeat.Need(c.largest*21/20, period); got <= c.retention {
			t.Errorf("a fleet of %d needs %v, within the table's %v for %d", c.largest*21/20, got, c.retention, c.largest)
		}
	}
}
