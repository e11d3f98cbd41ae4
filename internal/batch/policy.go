package batch

import "time"

// The send policy for entries a caller waits for (Do). Two questions decide
// when such an entry goes, and both are answered from what the coalescer
// measures rather than from fixed constants:
//
//   - Gather: do entries come in bursts? A closed loop of callers does:
//     the replies one receive brings wake their callers together, and a
//     responder's handlers for the requests of one receive finish
//     together. Such a burst is worth a moment's wait, since one call then
//     carries all of it and the receive at the other end takes it in one
//     piece. The wait is a small fraction of a call's latency: a burst ends
//     when no entry came for a few times the usual gap within bursts, and
//     nothing waits longer than an eighth of a call; entries that come one
//     by one do not wait. A sender that knows company is coming (a
//     responder that received several requests answers each) says so with
//     Announce, and the batch then goes the moment the last one arrives.
//   - Wait or overtake: when a call of the key is in flight, do the
//     pending entries wait for its end and ride on the next call, or start
//     a call of their own? By Little's law the entries that arrive before
//     a call in flight ends are its remaining time (taken as a quarter of a
//     call) times the arrival rate: when they would fill half a batch,
//     waiting costs a little latency and saves calls, and the entries
//     wait; otherwise waiting costs up to a whole call's latency for a
//     batch that stays small, and they go at once.
//
// Entries nobody waits for (Submit) keep their linger and never overtake a
// call in flight. Entries that somebody waits for at the other end
// (SubmitUrgent: a session's messages) follow the policy of those a caller
// waits for.

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
// came, at once; otherwise at once when arrivals do not come in bursts or
// the latency is unknown, else a gather gap after the latest. Never later
// than a gather maximum after the first.
func gatherUntil(now, first, last time.Time, lat time.Duration, a *arrivals, e *announcement) time.Time {
	if lat <= 0 || first.IsZero() {
		return first
	}
	limit := first.Add(lat / GatherMaxDiv)
	var end time.Time
	switch {
	case e.expecting(now):
		end = e.until
	case e.made, !a.bursty():
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
