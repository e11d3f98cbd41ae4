package reap

import (
	"context"
	"log/slog"
	"math"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/tempqueues/tempqueues/internal/heartbeat"
	"github.com/tempqueues/tempqueues/sqsapi"
)

// The fleet's size, and the retention it needs.
//
// A fleet's heartbeats fit the account's tagging quota only up to a size
// that grows with the retention (docs/capacity.md). So each Reaper
// estimates how many queues its fleet has under the prefix, and its
// heartbeats keep to the retention that size needs (heartbeat.Fit) before
// any call is throttled: when the process tags a new queue (Tags), at its
// lease polls once the estimate is stale or a tagging call was throttled,
// and exactly from the listing of each sweep it runs.
//
// An estimate is one ListQueues call: the whole prefix while it holds
// fewer than 1,000 queues, else the prefix and one random hex digit (host
// queue names continue with a random UUID, so that lists a sixteenth of
// the fleet), or two digits, and so on.
const (
	// fleetStaleFirst and fleetStaleMax bound, in periods, the age at which
	// an estimate is refreshed: a quarter period at first, doubling after
	// each refresh, so a process that started with its fleet counts it
	// again before its second heartbeat, and a settled one about twice an
	// hour at the default period.
	fleetStaleFirst = 0.25
	fleetStaleMax   = 6
	// fleetMaxDepth is the most hex digits added to the prefix: a sample
	// of 1/16^4 of the fleet.
	fleetMaxDepth = 4
)

const hexDigits = "0123456789abcdef"

// fleet estimates the size of a Reaper's fleet and fits its heartbeats to
// it.
type fleet struct {
	client sqsapi.Client
	opts   Config
	hb     *heartbeat.Heartbeater

	// estimated is signalled after an estimate made for a new queue
	// (Reaper.Tags), so the lease loop can schedule the next one.
	estimated chan struct{}

	mu    sync.Mutex    // held during an estimate: one at a time
	depth int           // hex digits the next estimate adds to the prefix
	at    time.Time     // of the latest estimate; zero before the first
	stale time.Duration // age at which it is refreshed
}

func newFleet(client sqsapi.Client, o Config, hb *heartbeat.Heartbeater) *fleet {
	return &fleet{client: client, opts: o, hb: hb, stale: time.Duration(fleetStaleFirst * float64(o.Period)),
		estimated: make(chan struct{}, 1)}
}

// due returns when the latest estimate turns stale; zero before the first.
func (f *fleet) due() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.at.IsZero() {
		return time.Time{}
	}
	return f.at.Add(f.stale)
}

// refresh estimates the fleet's size again when the latest estimate is
// stale, or older than the process's latest throttled tagging call, and
// fits the heartbeats to it. A failed estimate leaves the fit as it was.
func (f *fleet) refresh(ctx context.Context) {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.opts.Clock.Now()
	if !f.at.IsZero() && now.Sub(f.at) < f.stale && !f.hb.LastThrottle().After(f.at) {
		return
	}
	f.at = now // a failure is retried when stale again, not at once
	n, err := f.count(ctx)
	if err != nil {
		if ctx.Err() == nil {
			f.opts.Logger.Warn("reaper: could not estimate the fleet's size", slog.String("prefix", f.opts.Prefix), slog.Any("err", err))
		}
		return
	}
	f.stale = min(2*f.stale, fleetStaleMax*f.opts.Period)
	f.fitLocked(n)
}

// signal wakes the lease loop after an estimate it did not make.
func (f *fleet) signal() {
	select {
	case f.estimated <- struct{}{}:
	default:
	}
}

// observe fits the heartbeats to the fleet's size as a sweep listed it.
func (f *fleet) observe(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.at = f.opts.Clock.Now()
	f.fitLocked(n)
}

func (f *fleet) fitLocked(n int) {
	need := needRetention(n, f.opts)
	f.opts.Logger.Debug("reaper: fleet size estimated", slog.String("prefix", f.opts.Prefix),
		slog.Int("queues", n), slog.Duration("needed_retention", need))
	f.hb.Fit(need)
}

// count estimates the number of queues under the prefix, other than the
// lease queue and the Java sweeper's, with one ListQueues call (more when
// a sample fills a page).
func (f *fleet) count(ctx context.Context) (int, error) {
	for {
		prefix, scale := f.opts.Prefix, 1
		for range f.depth {
			prefix += string(hexDigits[f.opts.Clock.Int64N(16)])
			scale *= 16
		}
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		out, err := f.client.ListQueues(cctx, &sqs.ListQueuesInput{QueueNamePrefix: aws.String(prefix), MaxResults: aws.Int32(listPageSize)})
		cancel()
		if err != nil {
			return 0, err
		}
		n := len(out.QueueUrls)
		if aws.ToString(out.NextToken) != "" && f.depth < fleetMaxDepth {
			f.depth++ // a full page: take a smaller sample
			continue
		}
		if f.depth == 0 {
			for _, u := range out.QueueUrls {
				if reservedName(f.opts.Prefix, queueName(u)) {
					n--
				}
			}
		} else if n*16 < listPageSize/2 {
			f.depth-- // the next estimate can take a larger sample
		}
		return n * scale, nil
	}
}

// needRetention returns the retention a fleet of n queues needs
// (heartbeat.Need), rounded up to whole seconds (the tag holds seconds).
func needRetention(n int, o Config) time.Duration {
	need := heartbeat.Need(n, o.Period)
	return time.Duration(math.Ceil(float64(need)/float64(time.Second))) * time.Second
}
