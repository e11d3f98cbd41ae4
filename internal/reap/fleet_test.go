package reap_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go/middleware"

	"github.com/tempqueues/tempqueues/internal/reap"
	"github.com/tempqueues/tempqueues/internal/testkit/sqstestenv"
	"github.com/tempqueues/tempqueues/observe"
	"github.com/tempqueues/tempqueues/reaper"
	"github.com/tempqueues/tempqueues/requester"
	"github.com/tempqueues/tempqueues/responder"
	"github.com/tempqueues/tempqueues/sqsapi"
	"github.com/tempqueues/tempqueues/sqstest"
)

// The fleet simulator: N requesters, each with its own SDK client, host
// queue and reaper (heartbeats, lease, sweeps), in one process on sqstest
// with the account's tagging quota enforced, a responder answering a
// trickle of RPCs from each, and 1% of the requesters killed mid-run.
// Everything runs the real library code, in a testing/synctest bubble on
// an in-process sqstest: time is the bubble's, which moves only when every
// goroutine waits, so a run of several retention periods takes as long as
// its CPU work, with every duration as configured (no scaling); all
// figures but the wall time are in the bubble's time.
//
//	go test ./internal/reap -run TestFleet -fleet 10000 -fleet.rpc 5m -timeout 60m -v
var (
	fleetN   = flag.Int("fleet", 0, "fleet simulation: number of requesters (0: the small CI run)")
	fleetRet = flag.Duration("fleet.retention", 300*time.Second, "fleet simulation: IdleQueueRetention (simulated)")
	fleetDur = flag.Duration("fleet.duration", 0, "fleet simulation: simulated length of the run (0: enough for the acceptance)")
	fleetRPC = flag.Duration("fleet.rpc", time.Minute, "fleet simulation: simulated time between a requester's RPCs")
)

type fleetConfig struct {
	N         int
	Retention time.Duration // simulated
	Period    time.Duration // simulated sweep period
	Quota     float64       // tagging calls per simulated second
	RPCEvery  time.Duration // simulated spacing of each requester's RPCs
	StartOver time.Duration // simulated: requesters start spread over this
	Duration  time.Duration // simulated length of the run
	Sample    time.Duration // simulated sampling interval
}

type fleetResult struct {
	cfg       fleetConfig
	wall      time.Duration // real, outside the bubble
	simulated time.Duration // the run's length, start-up included
	startup   time.Duration // until one retention after every member's first RPC

	tagAdmitted, tagThrottled  int64   // after start-up
	peakTagRate, meanTagRate   float64 // attempted tagging calls per simulated second after start-up: busiest minute, mean
	startupThrottled           int64
	ageMax, ageP99             float64       // heartbeat age / the configured retention, live hosts, after start-up
	ownMax, ownP99             float64       // heartbeat age / the queue's own (maybe raised) retention
	retentionMax               time.Duration // the largest written, any host, any time
	retentionMedian            time.Duration // of the live hosts, at the end
	sweeps                     int64
	sweepsPerPeriod            float64
	liveDeleted                int
	killed, deadDeleted        int
	deadLatencyMax             time.Duration // simulated: last heartbeat to deletion, worst dead host
	deadBound                  time.Duration // 2 × its retention + one period, for that host
	deadLate                   int           // dead hosts deleted after their bound, or not deleted by it
	deadPending                int           // dead hosts not deleted yet, their bound not reached by the end
	rpcs, rpcFailed, rpcOnGone int64
}

func (r fleetResult) String() string {
	return fmt.Sprintf("N=%d retention=%v period=%v quota=%.0f/s: wall %v for %v simulated (start-up %v); tagging after start-up mean %.1f/s peak %.1f/s, "+
		"throttled %d (start-up %d); heartbeat age max %.2f p99 %.2f of the configured retention, max %.2f p99 %.2f of the queue's own (largest %v, median at the end %v); sweeps %d (%.2f per period); "+
		"live hosts deleted %d; dead %d, deleted %d, worst %v (bound %v), late %d, not due yet %d; RPCs %d, failed %d (host gone %d)",
		r.cfg.N, r.cfg.Retention, r.cfg.Period, r.cfg.Quota, r.wall.Round(time.Second), r.simulated.Round(time.Minute), r.startup.Round(time.Second),
		r.meanTagRate, r.peakTagRate, r.tagThrottled, r.startupThrottled, r.ageMax, r.ageP99, r.ownMax, r.ownP99, r.retentionMax, r.retentionMedian,
		r.sweeps, r.sweepsPerPeriod, r.liveDeleted, r.killed, r.deadDeleted, r.deadLatencyMax.Round(time.Second),
		r.deadBound, r.deadLate, r.deadPending, r.rpcs, r.rpcFailed, r.rpcOnGone)
}

const fleetOwnerTag = "fleet-owner"

type fleetMember struct {
	id     int
	req    *requester.Requester
	stop   chan struct{}
	done   chan struct{}
	killed atomic.Bool
	diedAt time.Time
}

// SQS's tagging quota: these actions together at taggingRate calls a
// second for the account (sqstest.Quota's defaults).
const taggingRate = 30

var taggingActions = []string{"TagQueue", "UntagQueue", "ListQueueTags"}

// hostSeen is what the sampler last saw of a host queue.
type hostSeen struct {
	owner     int
	heartbeat time.Time
	retention time.Duration
}

// fleetRun runs runFleet in a synctest bubble and returns its result with
// the real time the run took.
func fleetRun(t *testing.T, cfg fleetConfig) fleetResult {
	t.Helper()
	start := time.Now()
	var res fleetResult
	synctest.Test(t, func(t *testing.T) { res = runFleet(t, cfg) })
	res.wall = time.Since(start)
	return res
}

// runFleet runs the simulation; it must run in a synctest bubble.
func runFleet(t *testing.T, cfg fleetConfig) fleetResult {
	t.Helper()
	start := time.Now()
	be := sqstestenv.InProcess(t, func(o *sqstest.Options) {
		// SQS's tagging quota (TagQueue, UntagQueue and ListQueueTags).
		o.Quotas = []sqstest.Quota{{Rate: cfg.Quota, Burst: cfg.Quota}}
	})
	srv := be.Server
	noRetry := func(o *sqs.Options) { o.RetryMaxAttempts = 1 }
	client := func(optFns ...func(*sqs.Options)) *sqs.Client {
		c, _ := be.Client(t, append([]func(*sqs.Options){noRetry}, optFns...)...)
		return c
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// The service the fleet calls.
	rc := client()
	q, err := rc.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("fleet-service")})
	if err != nil {
		t.Fatal(err)
	}
	serviceURL := aws.ToString(q.QueueUrl)
	resp, err := responder.New(rc)
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() {
		served <- resp.Serve(ctx, serviceURL, responder.HandlerFunc(func(_ context.Context, req *responder.Request) (*responder.Reply, error) {
			return &responder.Reply{Body: aws.ToString(req.Message.Body)}, nil
		}))
	}()

	res := fleetResult{cfg: cfg}
	var (
		mu       sync.Mutex
		hosts    = map[string]hostSeen{}  // by queue name
		deleted  = map[string]time.Time{} // by queue URL, when a sweep reported it
		sweeps   atomic.Int64
		rpcs     atomic.Int64
		rpcFail  atomic.Int64
		rpcGone  atomic.Int64
		failOnce sync.Once
		// The fleet is up when every member has made its first RPC (and so
		// created its host queue): upAt, set by the last one.
		firstDone atomic.Int64
		upAt      atomic.Int64
	)
	onSweep := func(rep reaper.Report, took time.Duration) {
		sweeps.Add(1)
		now := time.Now()
		if *fleetN > 0 {
			t.Logf("sweep at %v: listed %d, kept %d, deleted %d, errors %d, took %v",
				now.Sub(start).Round(time.Second), rep.Listed, rep.Kept,
				len(rep.Deleted), len(rep.Errors), took.Round(time.Second))
		}
		mu.Lock()
		for _, u := range rep.Deleted {
			deleted[u] = now
		}
		mu.Unlock()
	}

	members := make([]*fleetMember, cfg.N)
	for i := range members {
		members[i] = &fleetMember{id: i, stop: make(chan struct{}), done: make(chan struct{})}
	}
	startMember := func(m *fleetMember) {
		req, err := requester.New(client(killSwitch(&m.killed)), func(o *requester.Options) {
			o.IdleQueueRetention = cfg.Retention
			o.HostQueueTags = map[string]string{fleetOwnerTag: strconv.Itoa(m.id)}
			o.Timeout = 20 * time.Second
			o.SweepPeriod = cfg.Period
			o.Observer = observe.Func(func(_ context.Context, e observe.Event) func(*types.Message, error) {
				if e.Kind == observe.Swept {
					onSweep(e.Detail.(reaper.Report), e.Duration)
				}
				return nil
			})
		})
		if err != nil {
			t.Error(err)
			close(m.done)
			return
		}
		m.req = req
		go func() {
			defer close(m.done)
			every := cfg.RPCEvery
			next := time.Duration(rand.Int64N(int64(every)))
			for n := 0; ; n++ {
				select {
				case <-m.stop:
					return
				case <-time.After(next):
				}
				next = every/2 + time.Duration(rand.Int64N(int64(every)))
				rpcs.Add(1)
				_, err := req.SendMessageAndGetResponse(ctx, &sqs.SendMessageInput{
					QueueUrl: aws.String(serviceURL), MessageBody: aws.String(strconv.Itoa(m.id) + "/" + strconv.Itoa(n)),
				})
				if n == 0 && firstDone.Add(1) == int64(cfg.N) {
					upAt.Store(time.Now().UnixNano())
				}
				if err != nil && ctx.Err() == nil && !m.killed.Load() {
					rpcFail.Add(1)
					var gone *types.QueueDoesNotExist
					if errors.As(err, &gone) {
						rpcGone.Add(1)
					}
					failOnce.Do(func() {
						t.Logf("first failed RPC (member %d, at %v simulated): %v", m.id, time.Since(start).Round(time.Second), err)
					})
				}
			}
		}()
	}

	// Start the fleet spread over StartOver.
	var starting sync.WaitGroup
	for _, m := range members {
		starting.Add(1)
		time.AfterFunc(time.Duration(rand.Int64N(int64(max(cfg.StartOver, 1)))), func() {
			defer starting.Done()
			startMember(m)
		})
	}

	prefix := sqsapi.DefaultQueuePrefix
	simStart := time.Now()
	// Start-up ends one retention after the fleet is up (a loaded machine
	// may take longer than StartOver to start it).
	startupEnd := func() (time.Time, bool) {
		up := upAt.Load()
		if up == 0 {
			return time.Time{}, false
		}
		from := time.Unix(0, up)
		if early := simStart.Add(cfg.StartOver); from.Before(early) {
			from = early
		}
		return from.Add(cfg.Retention), true
	}
	afterStartup := func(now time.Time) bool {
		end, ok := startupEnd()
		return ok && now.After(end)
	}
	var ages, own []float64
	// Attempted tagging calls (admitted and throttled) at each sample after
	// start-up, back to the latest one a simulated minute old: the rates
	// divide by the time that really passed, as a loaded machine may
	// deliver the samples late.
	type tagSample struct {
		at    time.Time
		calls int64
	}
	var tagSamples []tagSample
	var lastAdmitted, lastThrottled int64
	var samples, ticks int
	var minuteCalls int64 // tagging calls at the last minute's log
	minuteAt := simStart
	killed := false
	ticker := time.NewTicker(cfg.Sample)
	defer ticker.Stop()
	// Run for the configured length, and on (up to 8 times as long) for
	// three of the live hosts' median retention and until every killed
	// member's host is gone: raised retentions keep dead hosts longer.
	deadWaiting := func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, hs := range hosts {
			if members[hs.owner].killed.Load() {
				return true
			}
		}
		return false
	}
	for el := time.Duration(0); el < cfg.Duration ||
		(el < 8*cfg.Duration && (el < 3*res.retentionMedian || !killed || deadWaiting())); el = time.Since(simStart) {
		<-ticker.C
		now := time.Now()
		ticks++
		if ticks%int(time.Minute/cfg.Sample) == 0 && testing.Verbose() {
			all, throttled := srv.Calls(), srv.Throttled()
			var calls, thr int64
			for _, op := range taggingActions {
				calls += all[op]
				thr += throttled[op]
			}
			t.Logf("at %v simulated (%v real): %d sweeps, %d RPCs, tagging %.1f/s in the last minute, %d throttled in all",
				now.Sub(simStart).Round(time.Second), now.Sub(simStart).Round(time.Second), sweeps.Load(), rpcs.Load(),
				float64(calls-minuteCalls)/now.Sub(minuteAt).Seconds(), thr)
			minuteCalls, minuteAt = calls, now
		}
		// 1% of the fleet dies mid-run: one (median, maybe fitted) retention
		// after start-up, once every live queue has written the retention
		// its fleet's count gave.
		if se, ok := startupEnd(); !killed && ok && now.After(se.Add(res.retentionMedian)) {
			killed = true
			for _, i := range rand.Perm(cfg.N)[:max(cfg.N/100, 1)] {
				m := members[i]
				if m.req == nil {
					continue
				}
				m.killed.Store(true)
				close(m.stop)
				// A crash: every call stops (heartbeats and sweeps with
				// them), the host queue stays.
				m.diedAt = time.Now()
				res.killed++
			}
		}
		all, throttled := srv.Calls(), srv.Throttled()
		var adm, thr int64
		for _, op := range taggingActions {
			adm += all[op] - throttled[op]
			thr += throttled[op]
		}
		if afterStartup(now) {
			tagSamples = append(tagSamples, tagSample{now, adm + thr})
			for i := len(tagSamples) - 2; i >= 0; i-- {
				if el := now.Sub(tagSamples[i].at); el >= time.Minute {
					// The busiest minute (or a little more, when late).
					res.peakTagRate = max(res.peakTagRate, float64(adm+thr-tagSamples[i].calls)/el.Seconds())
					tagSamples = tagSamples[i:]
					break
				}
			}
			res.tagAdmitted += adm - lastAdmitted
			res.tagThrottled += thr - lastThrottled
			samples++
		} else {
			res.startupThrottled = thr
		}
		lastAdmitted, lastThrottled = adm, thr

		// Heartbeat ages of the hosts of live members, read from the
		// server's state (no API call, so no quota).
		seen := map[string]bool{}
		var rets []time.Duration // of the live hosts
		for _, u := range srv.QueueURLs() {
			name := u[strings.LastIndexByte(u, '/')+1:]
			if !strings.HasPrefix(name, prefix) || name == prefix+reap.CoordinationQueueSuffix {
				continue // not a host: the sweeper lease's queue carries a member's tags too
			}
			tags, err := srv.QueueTags(name)
			if err != nil {
				continue
			}
			owner, err := strconv.Atoi(tags[fleetOwnerTag])
			if err != nil {
				continue
			}
			ms, _ := strconv.ParseInt(tags[sqsapi.HeartbeatTag], 10, 64)
			sec, _ := strconv.Atoi(tags[sqsapi.RetentionTag])
			hs := hostSeen{owner: owner, heartbeat: time.UnixMilli(ms), retention: time.Duration(sec) * time.Second}
			seen[name] = true
			mu.Lock()
			hosts[name] = hs
			mu.Unlock()
			res.retentionMax = max(res.retentionMax, hs.retention)
			if !members[owner].killed.Load() {
				rets = append(rets, hs.retention)
			}
			if !members[owner].killed.Load() && afterStartup(now) {
				age := now.Sub(hs.heartbeat).Seconds()
				ages = append(ages, age/cfg.Retention.Seconds())
				own = append(own, age/hs.retention.Seconds())
			}
		}
		if len(rets) > 0 {
			slices.Sort(rets)
			res.retentionMedian = rets[len(rets)/2]
		}
		// Hosts gone since the last sample.
		mu.Lock()
		for name, hs := range hosts {
			if seen[name] {
				continue
			}
			m := members[hs.owner]
			if !m.killed.Load() {
				res.liveDeleted++
				t.Logf("live host %s of member %d deleted; last heartbeat %v before, retention %v", name, hs.owner,
					now.Sub(hs.heartbeat).Round(time.Second), hs.retention)
			} else {
				res.deadDeleted++
				lat := now.Sub(hs.heartbeat)
				bound := 2*hs.retention + cfg.Period
				if lat > bound {
					res.deadLate++
					t.Logf("dead host %s of member %d deleted late: %v after its last heartbeat, bound %v (retention %v)",
						name, hs.owner, lat.Round(time.Second), bound, hs.retention)
				}
				if lat > res.deadLatencyMax {
					res.deadLatencyMax, res.deadBound = lat, bound
				}
			}
			delete(hosts, name)
		}
		mu.Unlock()
	}
	// Dead hosts not deleted: late once their bound has passed.
	end := time.Now()
	mu.Lock()
	for _, hs := range hosts {
		if members[hs.owner].killed.Load() {
			if end.Sub(hs.heartbeat) > 2*hs.retention+cfg.Period {
				res.deadLate++
			} else {
				res.deadPending++
			}
		}
	}
	mu.Unlock()

	se, up := startupEnd()
	if !up {
		t.Errorf("the fleet never came up: %d of %d members made their first RPC", firstDone.Load(), cfg.N)
		se = time.Now()
	}
	elapsed := time.Since(se)
	res.startup = se.Sub(simStart)
	res.meanTagRate = float64(res.tagAdmitted+res.tagThrottled) / elapsed.Seconds()
	slices.Sort(ages)
	if n := len(ages); n > 0 {
		res.ageMax = ages[n-1]
		res.ageP99 = ages[min(n-1, n*99/100)]
		slices.Sort(own)
		res.ownMax = own[n-1]
		res.ownP99 = own[min(n-1, n*99/100)]
	}
	res.sweeps = sweeps.Load()
	res.simulated = time.Since(simStart)
	res.sweepsPerPeriod = float64(res.sweeps) / (res.simulated.Seconds() / cfg.Period.Seconds())
	res.rpcs, res.rpcFailed, res.rpcOnGone = rpcs.Load(), rpcFail.Load(), rpcGone.Load()

	// Shut down: the members (their hosts deleted), then the responder.
	starting.Wait()
	var closing sync.WaitGroup
	for _, m := range members {
		if m.req == nil {
			continue
		}
		closing.Add(1)
		go func() {
			defer closing.Done()
			if !m.killed.Load() {
				close(m.stop)
			}
			<-m.done
			cctx, ccancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer ccancel()
			_ = m.req.Close(cctx)
		}()
	}
	closing.Wait()
	sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer scancel()
	_ = resp.Shutdown(sctx)
	cancel()
	<-served
	return res
}

// defaultFleetConfig returns the run for n requesters: the tagging quota
// at 30/s, the start spread over a minute, 1% killed mid-run, and the run
// long enough to see them deleted and at least 3 retention periods (runFleet
// runs on as the fitted retentions need).
func defaultFleetConfig(n int, retention, period, rpcEvery, duration time.Duration) fleetConfig {
	cfg := fleetConfig{
		N: n, Retention: retention, Period: period, Quota: taggingRate,
		RPCEvery: rpcEvery, StartOver: time.Minute, Sample: 10 * time.Second,
	}
	cfg.Duration = duration
	if cfg.Duration == 0 {
		cfg.Duration = cfg.StartOver + 4*cfg.Retention + 2*cfg.Period
	}
	return cfg
}

// TestFleet runs the fleet simulator (checkFleet says when it fails): a
// small fleet in CI, or the size given with -fleet.
func TestFleet(t *testing.T) {
	cfg := defaultFleetConfig(*fleetN, *fleetRet, 5*time.Minute, *fleetRPC, *fleetDur)
	if cfg.N == 0 {
		if testing.Short() {
			t.Skip("fleet simulation in -short mode")
		}
		// CI: 100 requesters, 2-minute retention and sweep period.
		cfg = defaultFleetConfig(100, 2*time.Minute, 2*time.Minute, time.Minute, 0)
	}
	checkFleet(t, cfg, fleetRun(t, cfg))
}

// TestFleetFitsItsRetention runs a fleet too dense for its configured
// retention in CI: 100 requesters at 10 s would tag 30 calls a second, all
// of the quota, so the reapers must raise the retention (to 20 s, by their
// counts; throttling is the backstop) for the run to hold. The counts
// themselves are tested in fleetsize_test.go.
func TestFleetFitsItsRetention(t *testing.T) {
	if *fleetN > 0 || testing.Short() {
		t.Skip("the CI fleet runs only")
	}
	cfg := defaultFleetConfig(100, 10*time.Second, 2*time.Minute, time.Minute, 0)
	res := checkFleet(t, cfg, fleetRun(t, cfg))
	if res.retentionMedian < 2*cfg.Retention {
		t.Errorf("median retention at the end %v: the fleet did not fit it (configured %v)", res.retentionMedian, cfg.Retention)
	}
}

// checkFleet logs a run's result and fails the test when a live host was
// deleted, an RPC failed, a dead host outlived two retention periods (its
// own, maybe raised) plus one sweep period, or tagging calls (admitted and
// throttled) went over the quota in any minute after start-up.
func checkFleet(t *testing.T, cfg fleetConfig, res fleetResult) fleetResult {
	t.Helper()
	t.Log(res)
	if res.liveDeleted > 0 {
		t.Errorf("%d live hosts deleted", res.liveDeleted)
	}
	if res.rpcFailed > 0 {
		t.Errorf("%d RPCs failed", res.rpcFailed)
	}
	if res.deadLate > 0 {
		t.Errorf("%d of %d dead hosts deleted late or not at all", res.deadLate, res.killed)
	}
	if res.peakTagRate > cfg.Quota {
		t.Errorf("tagging calls after start-up reached %.1f/s in the busiest minute, over the quota of %.0f/s", res.peakTagRate, cfg.Quota)
	}
	return res
}

// killSwitch is an SDK option that fails every call once *dead is set, as
// a crashed process makes no more calls.
func killSwitch(dead *atomic.Bool) func(*sqs.Options) {
	return func(o *sqs.Options) {
		o.APIOptions = append(o.APIOptions, func(st *middleware.Stack) error {
			return st.Initialize.Add(middleware.InitializeMiddlewareFunc("fleetKillSwitch",
				func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
					if dead.Load() {
						return middleware.InitializeOutput{}, middleware.Metadata{}, errors.New("fleet: the member was killed")
					}
					return next.HandleInitialize(ctx, in)
				}), middleware.Before)
		})
	}
}
