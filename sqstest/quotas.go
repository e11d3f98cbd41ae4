package sqstest

import (
	"maps"
	"math"
	"sync"
	"time"

	"github.com/tempqueues/tempqueues/sqstest/internal/api"
)

// Quota limits the rate of a group of actions across the server's one
// account, as SQS does: a token bucket refilled at Rate tokens a second and
// holding at most Burst, from which every call of one of Actions takes a
// token. A call finding the bucket empty fails with RequestThrottled (the
// SDK's *types.RequestThrottled), does not run and takes no token. A call
// counts against every quota listing its action and is throttled when any
// of them is spent. The bucket refills by the server's clock, so a Clock
// drives it too.
//
// The zero Quota is SQS's tagging quota: TagQueue, UntagQueue and
// ListQueueTags together at 30 calls a second. Quotas are off unless
// Options.Quotas lists them:
//
//	sqstest.Start(t, func(o *sqstest.Options) { o.Quotas = []sqstest.Quota{{}} })  // tagging at 30/s
//	sqstest.Start(t, func(o *sqstest.Options) {                                   // TagQueue alone at 5/s
//		o.Quotas = []sqstest.Quota{{Actions: []string{"TagQueue"}, Rate: 5}}
//	})
type Quota struct {
	// Actions are the operations sharing the bucket, e.g. "TagQueue". Nil
	// means SQS's tagging actions: TagQueue, UntagQueue and ListQueueTags.
	Actions []string
	// Rate is the number of calls a second the bucket admits in the long
	// run. Zero means 30, SQS's tagging rate; below zero, every call of
	// Actions is throttled.
	Rate float64
	// Burst is the bucket's size: how many calls may come at once after a
	// quiet spell. Zero means one second's worth of Rate (at least 1).
	Burst float64
}

// SQS's tagging quota, the defaults of Quota.
const taggingRate = 30

var taggingActions = []string{"TagQueue", "UntagQueue", "ListQueueTags"}

// Throttled returns, for each action under a quota, how many of its calls
// the quotas throttled since the server started (Calls counts them too).
// The map is a copy, empty when Options.Quotas is.
func (s *Server) Throttled() map[string]int64 {
	q := s.quotas
	if q == nil {
		return map[string]int64{}
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	return maps.Clone(q.throttled)
}

// quotas are the token buckets of a server; nil when none is enforced.
type quotas struct {
	mu      sync.Mutex
	buckets []*bucket
	byOp    map[string][]*bucket
	// throttled counts the calls throttled, by action; every action
	// under a quota has an entry.
	throttled map[string]int64
}

type bucket struct {
	rate, burst, tokens float64
	last                time.Time // of the last refill; zero before the first call
}

func newQuotas(qs []Quota) *quotas {
	if len(qs) == 0 {
		return nil
	}
	q := &quotas{byOp: make(map[string][]*bucket), throttled: make(map[string]int64)}
	for _, spec := range qs {
		rate := spec.Rate
		if rate == 0 {
			rate = taggingRate
		}
		b := &bucket{rate: max(rate, 0), burst: spec.Burst}
		if b.burst <= 0 {
			b.burst = max(math.Ceil(b.rate), 1)
		}
		b.tokens = b.burst
		q.buckets = append(q.buckets, b)
		actions := spec.Actions
		if actions == nil {
			actions = taggingActions
		}
		for _, op := range actions {
			q.byOp[op] = append(q.byOp[op], b)
			if _, ok := q.throttled[op]; !ok {
				q.throttled[op] = 0
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
		q.throttled[op]++
		return api.SenderError(codeThrottled, "Rate exceeded for %s.", op)
	}
	for _, b := range bs {
		b.tokens--
	}
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
