package heartbeat

import (
	"math"
	"time"
)

// The capacity model of docs/capacity.md, shared by the reaper (which fits
// its queues' retention to it) and `tempq queues` (which recommends one).
const (
	// TaggingQuota is SQS's rate of tagging calls (TagQueue, UntagQueue,
	// ListQueueTags) per account and second, which heartbeats and sweeps
	// share; the reaper plans with QuotaHeadroom of it.
	TaggingQuota  = 30.0
	QuotaHeadroom = 0.8
	// SweepTagRate is the most tag reads a second a sweep makes.
	SweepTagRate = 10.0
)

// SweepRate is the tagging calls a second the sweeps of a fleet of n queues
// make, for the model: one tag read per queue per sweep period, at most
// SweepTagRate.
func SweepRate(n int, period time.Duration) float64 {
	return min(float64(n)/period.Seconds(), SweepTagRate)
}

// Need returns the smallest retention, in whole seconds, at which the
// heartbeats of n queues (one every DefaultFraction of it) and the fleet's
// sweeps spend at most QuotaHeadroom of TaggingQuota:
//
//	n/(F·R) + SweepRate(n, period) ≤ TaggingQuota·QuotaHeadroom
func Need(n int, period time.Duration) time.Duration {
	sec := float64(n) / (DefaultFraction * (TaggingQuota*QuotaHeadroom - SweepRate(n, period)))
	return time.Duration(math.Ceil(sec-1e-6)) * time.Second // not 901 s for 900.0000001
}
