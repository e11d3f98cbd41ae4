package poll

import (
	"math"
	"sync"
	"time"

	"github.com/tempqueues/tempqueues/internal/wire"
)

// Sizer sizes a queue's pollers by Little's law. A receive that brought
// messages leaves its poller away from the server for about one call's
// latency (its next receive must travel there) before it can take more.
// While messages come at a rate m, a poller takes up to 10 per round trip,
// so m x latency / 10 pollers (rounded up) keep up with them; that many
// is what a busy queue gets, and each of their receives comes back as full
// as the load allows. While receives bring bursts of a few messages (more
// than 1.5 and fewer than half a receive's worth on average) the traffic
// is sparse: a burst (the requests one SendMessageBatch carried, the
// replies of one batch) then finds a poller parked on the server only if
// there is one to spare, and it costs nothing until the burst comes, so
// the Sizer adds it: that spare spares a lone burst a poller's round trip.
// While receives bring one message each and the next tends to come while
// a poller is away, no spare: messages that find no poller parked wait a
// little and merge into bursts, which then share calls on their way round
// (a spare would keep them apart for good).
//
// A Sizer is safe for concurrent use; its zero value is ready.
type Sizer struct {
	// NoSpare leaves out the spare poller: bursts wait for a poller's
	// round trip more often, and merge into fewer receives. Set it before
	// the first Note.
	NoSpare bool

	mu   sync.Mutex
	last time.Time     // the latest return that brought messages
	gap  time.Duration // the mean gap between such returns
	msgs float64       // the mean number of messages they brought
}

// sparseBelow: receives that bring fewer messages than this on average
// mean sparse traffic, where a spare parked poller pays.
const sparseBelow = wire.MaxReceiveMessages / 2

// burstAbove: receives that bring more messages than this on average
// bring bursts; below it, messages come one by one, and a spare poller
// would take each alone where, waiting a little, they would merge into
// bursts.
const burstAbove = 1.5

// mergeAbove: lone messages merge into bursts when a call's latency is at
// least this many gaps between receives (the next message likely comes
// while the poller that took the last is away).
const mergeAbove = 0.6

// Note records that a receive brought n messages at now.
func (s *Sizer) Note(now time.Time, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.last.IsZero() {
		s.last, s.msgs = now, float64(n)
		return
	}
	g := max(now.Sub(s.last), 0)
	s.last = now
	if s.gap == 0 {
		s.gap = g
	} else {
		s.gap += (g - s.gap) / 8
	}
	s.msgs += (float64(n) - s.msgs) / 8
}

// Want returns the pollers a queue needs at now when a call takes lat: the
// pollers that keep up with the messages, plus a spare while traffic comes
// in sparse bursts; at least 1. The gap between returns is the mean, or the time since
// the latest when that is longer, so that the count falls when returns
// stop. It is 1 while lat or the gap is unknown.
func (s *Sizer) Want(now time.Time, lat time.Duration) int {
	s.mu.Lock()
	gap, last, msgs := s.gap, s.last, s.msgs
	s.mu.Unlock()
	if lat <= 0 || gap <= 0 {
		return 1
	}
	gap = max(gap, now.Sub(last))
	want := int(math.Ceil(float64(lat) * msgs / (wire.MaxReceiveMessages * float64(gap))))
	// Lone messages merge only when the next tends to come while the
	// poller is away: with fewer (a caller or two a round trip) there is
	// nothing to merge, and the spare only spares the wait.
	lone := msgs < burstAbove && float64(lat) >= mergeAbove*float64(gap)
	if !s.NoSpare && !lone && msgs < sparseBelow {
		want++
	}
	return max(want, 1)
}
