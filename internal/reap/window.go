package reap

import (
	"cmp"
	"time"

	"github.com/tempqueues/tempqueues/sqsapi"
)

// LeaseQueueName returns the name of the FIFO queue that holds the sweeper
// lease of the fleet whose queues start with prefix ("" means
// sqsapi.DefaultQueuePrefix, as in Options). Tools that show a fleet (tempq
// console) use it to find the lease.
func LeaseQueueName(prefix string) string {
	return cmp.Or(prefix, sqsapi.DefaultQueuePrefix) + coordinationSuffix
}

// NextSweepWindow returns when the next lease window after now opens for a
// fleet that sweeps every period (0 means the default, 5 minutes): the
// earliest moment a process can take the lease and sweep. The sweep starts
// within the window, whose length is a tenth of the period, between 1 s
// and 30 s. Every process computes the same windows from its own clock.
func NextSweepWindow(now time.Time, period time.Duration) time.Time {
	period = cmp.Or(period, defaultPeriod)
	l := lease{opts: Config{Period: period}, margin: leaseMargin(period)}
	return l.windowAfter(now, time.Nanosecond)
}
