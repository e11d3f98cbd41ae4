package sqstest

import (
	"maps"
	"math"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"

	"github.com/tempqueues/tempqueues/sqstest/internal/api"
)

// Error codes the SDK treats specially.
const (
	// codeThrottled is SQS's throttling error (typed *types.RequestThrottled);
	// the SDK retries it with its throttling backoff.
	codeThrottled = "RequestThrottled"
	// codeInternalError is a 500 the SDK retries as transient.
	codeInternalError = "InternalFailure"
	// codeUnavailable is a 503 the SDK retries as transient.
	codeUnavailable = "ServiceUnavailable"
)

// Fault is a failure or slowdown the server applies to the calls of one
// operation, or of every operation, before it runs them. Build one with
// Fail or Latency, limit it to the next calls with Times, and
// install it with Server.InjectFault. The zero Fault changes nothing.
type Fault struct {
	op      string        // "" matches every operation
	latency time.Duration // real time waited before answering (or failing)
	p99     time.Duration // above latency: the wait is lognormal
	code    string        // "" runs the call; else the error returned
	count   int           // calls it applies to; 0 means until removed
}

// Fail returns a fault that fails calls of op ("" for every operation)
// with the error code instead of running them: an SQS error shape name
// ("QueueDoesNotExist", ...), which the SDK returns typed, or any other
// code, which it reports as a generic API error. "RequestThrottled" is
// SQS's throttling, which the SDK retries with its throttling backoff. "InternalFailure" is an
// HTTP 500 and "ServiceUnavailable" a 503, which the SDK retries as
// transient; every other code is a 400.
func Fail(op, code string) Fault { return Fault{op: op, code: code} }

// Latency returns a fault that delays calls of op ("" for every
// operation) by real time before the server answers them; the wait ends
// early if the client gives up. With p99 above median each call's wait is
// random, drawn from a lognormal distribution with that median and 99th
// percentile (real networks, SQS included, have a long tail; a constant
// does not), from a source of the server's own. A p99 of zero, or not
// above median, keeps the wait constant at median.
func Latency(op string, median, p99 time.Duration) Fault {
	return Fault{op: op, latency: median, p99: p99}
}

// Times returns f applying to the next n calls only, after which it
// removes itself ("fail the next n calls"). n <= 0 means until removed.
func (f Fault) Times(n int) Fault {
	f.count = max(n, 0)
	return f
}

// z99 is the 99th percentile of the standard normal distribution.
const z99 = 2.3263478740408408

// delay returns the wait of one call: latency, or with p99 above it a draw
// from the lognormal distribution with median latency and 99th percentile
// p99, exp(ln(latency) + sigma x Z) with Z standard normal and sigma =
// ln(p99/latency) / z99.
func (f *Fault) delay(r *rand.Rand) time.Duration {
	if f.latency <= 0 || f.p99 <= f.latency {
		return f.latency
	}
	sigma := math.Log(float64(f.p99)/float64(f.latency)) / z99
	d := float64(f.latency) * math.Exp(sigma*r.NormFloat64())
	if d >= math.MaxInt64 {
		return math.MaxInt64 // some 10^20 sigmas out: only in theory
	}
	return time.Duration(d)
}

func (f *Fault) err() *api.Error {
	if f.code == "" {
		return nil
	}
	status := http.StatusBadRequest
	switch f.code {
	case codeInternalError:
		status = http.StatusInternalServerError
	case codeUnavailable:
		status = http.StatusServiceUnavailable
	}
	return api.NewError(status, f.code, "injected fault: %s", f.code)
}

// faults holds the installed faults and the per-operation call counts.
type faults struct {
	mu     sync.Mutex
	list   []*installedFault
	counts map[string]int64
}

type installedFault struct {
	Fault
	left int // calls left when count > 0
}

// take counts a call of op and returns the fault to apply, if any. The
// first installed fault that matches wins.
func (fs *faults) take(op string) (Fault, bool) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.counts == nil {
		fs.counts = make(map[string]int64)
	}
	fs.counts[op]++
	for i, f := range fs.list {
		if (f.op != "" && f.op != op) || (f.code == "" && f.latency <= 0) {
			continue
		}
		if f.count > 0 {
			f.left--
			if f.left <= 0 {
				fs.list = append(fs.list[:i:i], fs.list[i+1:]...)
			}
		}
		return f.Fault, true
	}
	return Fault{}, false
}

// InjectFault installs f and returns a function that removes it. Faults
// apply in the order installed; a call gets at most one. Calls that a fault
// fails are still counted by Calls, as SQS would bill them.
func (s *Server) InjectFault(f Fault) (remove func()) {
	inst := &installedFault{Fault: f, left: f.count}
	s.faults.mu.Lock()
	s.faults.list = append(s.faults.list, inst)
	s.faults.mu.Unlock()
	return func() {
		s.faults.mu.Lock()
		defer s.faults.mu.Unlock()
		for i, g := range s.faults.list {
			if g == inst {
				s.faults.list = append(s.faults.list[:i:i], s.faults.list[i+1:]...)
				return
			}
		}
	}
}

// Calls returns the number of requests the server has received, by
// operation ("SendMessage": 3), failed ones included, as SQS would bill
// them. The map is a copy; an operation never called is absent, and reads
// as 0. To count the calls of one stretch of a test, subtract the counts
// taken before it.
func (s *Server) Calls() map[string]int64 {
	s.faults.mu.Lock()
	defer s.faults.mu.Unlock()
	out := make(map[string]int64, len(s.faults.counts))
	maps.Copy(out, s.faults.counts)
	return out
}
