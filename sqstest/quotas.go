package sqstest

import (
	"math"
	"slices"
	"sync"
	"time"

	"github.com/tempqueues/tempqueues/sqstest/internal/api"
)

// DefaultTaggingRate is the rate, in calls per second for the whole
// account, at which SQS serves tagging actions (TagQueue, UntagQueue and
// ListQueueTags together) before it throttles them.
const DefaultTaggingRate = 30

// TaggingActions are the actions SQS limits together under its tagging
// quota.
var TaggingActions = []string{"TagQueue", "UntagQueue", "ListQueueTags"}

// Quota limits the rate of a group of actions across the server's one
// account, as SQS does: a token bucket refilled at Rate tokens a second and
// holding at most Burst, from which every call of one of Actions takes a
// token. A call finding the bucket empty fails with CodeThrottled (the
// SDK's *types.RequestThrottled), does not run and takes no token. The
// bucket refills by the server's Clock, so a *ManualClock drives it too.
type Quota struct {
	// Actions are the operations sharing the bucket, e.g. "TagQueue".
	Actions []string
	// Rate is the number of calls a second the bucket admits in the long
	// run; at or below zero, every call of Actions is throttled.
	Rate float64
	// Burst is the bucket's size: how many calls may come at once after a
	// quiet spell. Zero means one second's worth of Rate (at least 1).
	Burst float64
}

// TaggingQuota is SQS's tagging quota: TaggingActions at
// DefaultTaggingRate.
func TaggingQuota() Quota {
	return Quota{Actions: slices.Clone(TaggingActions), Rate: DefaultTaggingRate}
}

// EnforceQuotas is an option of NewServer, Start, NewHandler and Run that
// makes the server throttle the calls beyond qs, or, when qs is empty,
// beyond SQS's tagging quota (TaggingQuota). A call counts against every
// quota listing its action and is throttled when any of them is spent;
// quotas are off unless this option (or Options.Quotas) is given.
//
//	srv := sqstest.NewServer(sqstest.EnforceQuotas())              // tagging at 30/s
//	srv := sqstest.NewServer(sqstest.EnforceQuotas(sqstest.Quota{  // TagQueue alone at 5/s
//		Actions: []string{"TagQueue"}, Rate: 5}))
func EnforceQuotas(qs ...Quota) func(*Options) {
	if len(qs) == 0 {
		qs = []Quota{TaggingQuota()}
	}
	qs = slices.Clone(qs)
	return func(o *Options) { o.Quotas = append(o.Quotas, qs...) }
}

// QuotaCounts are the calls of one action the server's quotas admitted and
// throttled.
type QuotaCounts struct {
	Admitted, Throttled int64
}

// QuotaCounts returns, per action under a quota, how many calls were
// admitted and how many throttled since the server started.
func (s *Server) QuotaCounts() map[string]QuotaCounts {
	q := s.quotas
	if q == nil {
		return nil
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	out := make(map[string]QuotaCounts, len(q.counts))
	for op, c := range q.counts {
		out[op] = *c
	}
	return out
}

// quotas are the token buckets of a server; nil when none is enforced.
type quotas struct {
	mu      sync.Mutex
	buckets []*bucket
	byOp    map[string][]*bucket
	counts  map[string]*QuotaCounts
}

type bucket struct {
	rate, burst, tokens float64
	last                time.Time // of the last refill; zero before the first call
}

func newQuotas(qs []Quota) *quotas {
	if len(qs) == 0 {
		return nil
	}
	q := &quotas{byOp: make(map[string][]*bucket), counts: make(map[string]*QuotaCounts)}
	for _, spec := range qs {
		b := &bucket{rate: max(spec.Rate, 0), burst: spec.Burst}
		if b.burst <= 0 {
			b.burst = max(math.Ceil(b.rate), 1)
		}
		b.tokens = b.burst
		q.buckets = append(q.buckets, b)
		for _, op := range spec.Actions {
			q.byOp[op] = append(q.byOp[op], b)
			if q.counts[op] == nil {
				q.counts[op] = new(QuotaCounts)
			}
		}
	}
	return q
}

// take charges a call of op at now. It returns the throttling error when a
// quota of op is spent, and nil when the call may run (or no quota applies).
func (q *quotas) take(op string, now time.Time) *api.Error {
	if q == nil {
		return nil
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	bs := q.byOp[op]
	if len(bs) == 0 {
		return nil
	}
	ok := true
	for _, b := range bs {
		b.refill(now)
		ok = ok && b.tokens >= 1 && b.rate > 0
	}
	if !ok {
		q.counts[op].Throttled++
		return api.SenderError(CodeThrottled, "Rate exceeded for %s.", op)
	}
	for _, b := range bs {
		b.tokens--
	}
	q.counts[op].Admitted++
	return nil
}

func (b *bucket) refill(now time.Time) {
	if !b.last.IsZero() && now.After(b.last) {
		b.tokens = min(b.burst, b.tokens+now.Sub(b.last).Seconds()*b.rate)
	}
	if b.last.IsZero() || now.After(b.last) {
		b.last = now
	}
}
