package batch

import "time"

// The send policy for entries a caller waits for (Do) and for entries
// somebody waits for at the other end (SubmitUrgent: a session's
// messages). The coalescer keeps the mechanism (call slots, full batches,
// byte limits, lingering of the entries nobody waits for, Flush and Close,
// which send at once) and asks a key's Policy everything else: whether an
// entry that arrived goes alone at once, whether pending entries wait for a
// call in flight or start one of their own, and how long they wait for
// company. A new policy is a type here that implements Policy.
//
// The adaptive policy (Adaptive, the default) answers from what the
// coalescer measures rather than from fixed constants, in three pieces
// that can each be switched off:
//
//   - Gathering bursts: do entries come in bursts? A closed loop of
//     callers does: the replies one receive brings wake their callers
//     together, and a responder's handlers for the requests of one receive
//     finish together. Such a burst is worth a moment's wait, since one
//     call then carries all of it and the receive at the other end takes it
//     in one piece. The wait is a small fraction of a call's latency: a
//     burst ends when no entry came for a few times the usual gap within
//     bursts, and nothing waits longer than an eighth of a call; entries
//     that come one by one do not wait.
//   - Announcements: a sender that knows company is coming (a responder
//     that received several requests answers each; a requester whose
//     receive wakes callers that send again) says so with Announce, and the
//     batch then waits for it and goes the moment the last one arrives.
//   - Overtaking: when a call of the key is in flight, do the pending
//     entries wait for its end and ride on the next call, or start a call
//     of their own? By Little's law the entries that arrive before a call in
//     flight ends are its remaining time (taken as a quarter of a call)
//     times the arrival rate: when they would fill half a batch, waiting
//     costs a little latency and saves calls, and the entries wait;
//     otherwise waiting costs up to a whole call's latency for a batch that
//     stays small, and they go at once.
//
// Simple is the simplest sound policy: an entry goes at once when no call of
// its key is in flight, and otherwise rides on the next call.
//
// Entries nobody waits for (Submit) keep their linger and never overtake a
// call in flight; no policy is asked about them.

// Policy decides when the urgent entries of one key go. The coalescer makes
// one per key (Options.Policy) and calls it with its lock held, so a
// Policy needs no lock of its own and must not block.
type Policy interface {
	// Arrive notes an urgent entry's arrival at now; lat is the call
	// latency measured so far, 0 before the first call ended.
	Arrive(now time.Time, lat time.Duration)
	// Join notes that the entry that arrived at now joined the pending
	// ones instead of going alone.
	Join(now time.Time)
	// Announce notes n entries announced to arrive before until.
	Announce(now, until time.Time, n int)
	// Decide says when the urgent entries pending go, as s describes them.
	Decide(now time.Time, s State) Decision
	// Waited notes that the time a Decision named has come: the entries
	// pending go now.
	Waited()
	// Sent notes that a call started at now took the last urgent entries
	// pending.
	Sent(now time.Time)
}

// State is what a Policy decides on.
type State struct {
	Pending    int           // entries pending, at least 1
	InFlight   int           // calls of the key in flight, below the limit
	MaxEntries int           // entries per call
	Latency    time.Duration // the call latency measured so far; 0 before the first
	// Alone: the entry that just arrived, with nothing else pending, asks
	// whether it goes alone at once (then on its caller's goroutine).
	Alone bool
}

// Decision is a Policy's answer.
type Decision struct {
	// WaitForCall makes the entries wait for a call in flight to end and
	// go with the next; the coalescer heeds it only while one is in flight.
	WaitForCall bool
	// At is when the entries go, unless they wait for a call: now or
	// earlier (the zero value too) is at once. Flush and Close ignore it.
	At time.Time
}

// NewPolicy makes the Policy of one key.
type NewPolicy func() Policy

// Adaptive is the adaptive policy's settings; the zero value is the
// library's default, with every piece on. A setting switches one piece
// off, for PreferFewerCalls and for tempq bench's measure of what each
// piece buys.
type Adaptive struct {
	NoGather   bool // entries do not wait for the rest of a burst
	NoAnnounce bool // announcements are not heeded
	// NoOvertake makes pending entries always wait for a call in flight:
	// fewer, fuller calls at moderate loads, for up to a call's latency
	// more (PreferFewerCalls).
	NoOvertake bool
}

// New makes a key's adaptive policy.
func (a Adaptive) New() Policy { return &adaptive{set: a} }

// adaptive is a key's adaptive policy. first and last are the first and
// the latest arrival of the urgent entries gathering company (zero when
// none), arr estimates the arrivals and exp holds the announced company.
type adaptive struct {
	set         Adaptive
	first, last time.Time
	arr         arrivals
	exp         announcement
}

func (p *adaptive) Arrive(now time.Time, lat time.Duration) {
	p.arr.note(now, lat)
	p.exp.arrived(now)
}

func (p *adaptive) Join(now time.Time) {
	if p.first.IsZero() {
		p.first = now
	}
	p.last = now
}

func (p *adaptive) Announce(now, until time.Time, n int) {
	if !p.set.NoAnnounce {
		p.exp.announce(now, until, n)
	}
}

func (p *adaptive) Decide(now time.Time, s State) Decision {
	if s.InFlight > 0 && (p.set.NoOvertake || waitForCall(s.Latency, p.arr.gap, s.Pending, s.MaxEntries)) {
		return Decision{WaitForCall: true}
	}
	first, last := p.first, p.last
	if s.Alone {
		first, last = now, now
	}
	return Decision{At: gatherUntil(now, first, last, s.Latency, &p.arr, &p.exp, !p.set.NoGather)}
}

func (p *adaptive) Waited() { p.first, p.last = time.Time{}, time.Time{} }

func (p *adaptive) Sent(now time.Time) {
	p.first, p.last = time.Time{}, time.Time{}
	p.exp.made = p.exp.expecting(now)
}

// PolicyCarrier is a client that brings the send policy of the coalescers
// made for it (SendPolicy). It is how tempq bench runs the requester and
// responder under other policies than their own, with nothing in the
// public API: no package outside the module can name NewPolicy to
// implement it.
type PolicyCarrier interface {
	SendPolicy() NewPolicy
}

// SendPolicy is the send policy of a client's coalescers: the one it
// carries (PolicyCarrier), else the adaptive policy without overtaking
// when fewerCalls (PreferFewerCalls), else nil, the default.
func SendPolicy(client any, fewerCalls bool) NewPolicy {
	if pc, ok := client.(PolicyCarrier); ok {
		if p := pc.SendPolicy(); p != nil {
			return p
		}
	}
	if fewerCalls {
		return Adaptive{NoOvertake: true}.New
	}
	return nil
}

// Simple is the simplest sound policy: entries go at once when no call of
// their key is in flight, and otherwise ride on the next call.
func Simple() Policy { return simple{} }

type simple struct{}

func (simple) Arrive(time.Time, time.Duration)    {}
func (simple) Join(time.Time)                     {}
func (simple) Announce(time.Time, time.Time, int) {}
func (simple) Waited()                            {}
func (simple) Sent(time.Time)                     {}

func (simple) Decide(_ time.Time, s State) Decision {
	return Decision{WaitForCall: s.InFlight > 0}
}

const (
	// gatherGapDiv: a burst ends when no entry came for the call latency
	// divided by this (about 300 µs at 10 ms per call), or for burstGapMul
	// times the mean gap within bursts when that is longer.
	gatherGapDiv = 32
	burstGapMul  = 4
	// GatherMaxDiv: no entry waits for company longer than the call
	// latency divided by this.
	GatherMaxDiv = 8
	// burstyAbove: arrivals count as bursty when more than this fraction
	// of them came within a gather gap of the one before (bursts of two
	// make a half).
	burstyAbove = 1.0 / 3
	// ewmaShift weighs each new sample of an estimate by 1/2^ewmaShift.
	ewmaShift = 3
)

// latency is an estimate of how long a batch call takes: an exponentially
// weighted moving average of the calls' durations, 0 before the first.
type latency struct{ d time.Duration }

func (l *latency) add(d time.Duration) {
	if d < 0 {
		d = 0
	}
	if l.d == 0 {
		l.d = d
		return
	}
	l.d += (d - l.d) >> ewmaShift
}

// arrivals estimates the arrival process of a key's urgent entries: the
// mean gap between arrivals and the share of arrivals that are part of a
// burst.
type arrivals struct {
	last  time.Time     // the latest arrival; zero before the first
	gap   time.Duration // mean gap between arrivals
	inner time.Duration // mean gap between arrivals less than a gather maximum apart
	burst float64       // share of arrivals within a gather gap of the previous one
}

// gatherGap is how long after an arrival a burst is taken to have ended:
// burstGapMul times the usual gap within bursts (which grows when the
// process is short of CPU and its senders run late), at least the latency
// over gatherGapDiv, at most over GatherMaxDiv.
func (a *arrivals) gatherGap(lat time.Duration) time.Duration {
	return min(max(lat/gatherGapDiv, burstGapMul*a.inner), lat/GatherMaxDiv)
}

// note records an arrival at now, with lat the current call latency.
func (a *arrivals) note(now time.Time, lat time.Duration) {
	if a.last.IsZero() {
		a.last = now
		return
	}
	gap := max(now.Sub(a.last), 0)
	a.last = now
	if a.gap == 0 {
		a.gap = gap
	} else {
		a.gap += (gap - a.gap) >> ewmaShift
	}
	in := 0.0
	if lat > 0 && gap < a.gatherGap(lat) {
		in = 1
	}
	a.burst += (in - a.burst) / (1 << ewmaShift)
	if lat > 0 && gap < lat/GatherMaxDiv {
		if a.inner == 0 {
			a.inner = gap
		} else {
			a.inner += (gap - a.inner) >> ewmaShift
		}
	}
}

// bursty reports whether arrivals come in bursts worth gathering.
func (a *arrivals) bursty() bool { return a.burst > burstyAbove }

// announcement is the company senders announced for a key (Announce): the
// number of entries still to come and until when they count, the number
// announced since the last settlement, whether company was announced for
// the entries now gathering, and the share of announced entries that
// came, as a moving average. Announcements are heeded only while that
// share is at least half: a requester announces the next requests of the
// callers a receive wakes, which callers that do not loop never send.
type announcement struct {
	n, told int
	until   time.Time
	made    bool
	trust   float64
	settled bool // trust holds a settlement
}

// trustAbove is the share of announced entries that must come for
// announcements to be heeded.
const trustAbove = 0.5

func (e *announcement) trusted() bool { return !e.settled || e.trust >= trustAbove }

// expecting reports whether heeded company is still to come at now.
func (e *announcement) expecting(now time.Time) bool {
	return e.n > 0 && now.Before(e.until) && e.trusted()
}

// announce adds n entries due within until's window.
func (e *announcement) announce(now, until time.Time, n int) {
	e.settle(now)
	e.n += n
	e.told += n
	if until.After(e.until) {
		e.until = until
	}
	e.made = e.trusted()
}

// arrived counts an arrival at now against the announcement.
func (e *announcement) arrived(now time.Time) {
	if e.n > 0 && now.Before(e.until) {
		e.n--
		if e.n == 0 {
			e.settle(now)
		}
	}
}

// settle folds the announcements made since the last settlement into
// the trust once they are over: all came, or their time ran out.
func (e *announcement) settle(now time.Time) {
	if e.told == 0 || e.n > 0 && now.Before(e.until) {
		return
	}
	came := float64(e.told-e.n) / float64(e.told)
	if e.settled {
		e.trust += (came - e.trust) / (1 << ewmaShift)
	} else {
		e.trust, e.settled = came, true
	}
	e.n, e.told = 0, 0
}

// gatherUntil is when urgent entries pending since first, the latest of
// which arrived at last, stop waiting for company, a call taking lat: while
// announced company is still to come, until it is due; once all of it
// came, at once; otherwise at once when arrivals do not come in bursts,
// bursts are not gathered or the latency is unknown, else a gather gap
// after the latest. Never later than a gather maximum after the first.
func gatherUntil(now, first, last time.Time, lat time.Duration, a *arrivals, e *announcement, bursts bool) time.Time {
	if lat <= 0 || first.IsZero() {
		return first
	}
	limit := first.Add(lat / GatherMaxDiv)
	var end time.Time
	switch {
	case e.expecting(now):
		end = e.until
	case e.made, !bursts || !a.bursty():
		return first
	default:
		end = last.Add(a.gatherGap(lat))
	}
	if limit.Before(end) {
		return limit
	}
	return end
}

// waitForCall reports whether pending urgent entries wait for a call of
// their key in flight to end, rather than start a call of their own: when
// pending plus the entries expected in a quarter of a call's latency lat
// (over the mean gap between arrivals, gap) make at least half of
// maxEntries. A quarter of a call is what is left of the one in flight
// that ends first, with a few in flight and when calls run long (when
// each ends is anybody's guess under a jittered latency).
func waitForCall(lat, gap time.Duration, pending, maxEntries int) bool {
	expected := float64(pending)
	if gap > 0 {
		expected += float64(lat/waitDiv) / float64(gap)
	}
	return 2*expected >= float64(maxEntries)
}

// waitDiv: a call in flight is taken to end within the latency divided
// by this.
const waitDiv = 4
