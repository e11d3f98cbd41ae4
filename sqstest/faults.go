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

// Error codes for Fault.Code that the SDK treats specially.
const (
	// CodeThrottled is SQS's throttling error (typed *types.RequestThrottled);
	// the SDK retries it with its throttling backoff.
	CodeThrottled = "RequestThrottled"
	// CodeInternalError is a 500 the SDK retries as transient.
	CodeInternalError = "InternalFailure"
	// CodeUnavailable is a 503 the SDK retries as transient.
	CodeUnavailable = "ServiceUnavailable"
)

// Fault is a failure or slowdown the server applies to matching calls,
// before it runs them. Install one with Server.InjectFault.
type Fault struct {
	// Op is the operation it applies to, e.g. "ReceiveMessage"; empty
	// matches every operation.
	Op string
	// Latency is real time waited before the call is answered (or fails).
	// It ends early if the client gives up.
	Latency time.Duration
	// LatencyP99, when above Latency, makes the wait random: lognormal
	// with median Latency and 99th percentile LatencyP99, drawn for each
	// call from a source of the server's own (real networks, SQS
	// included, have a long tail; a constant does not). Zero, or not above
	// Latency, keeps the wait constant.
	LatencyP99 time.Duration
	// Code, when not empty, is the error returned instead of running the
	// call: an SQS error shape name ("QueueDoesNotExist", CodeThrottled ...)
	// or any other code, which the SDK reports as a generic API error.
	Code string
	// StatusCode is the HTTP status of the error; 0 means 500 for
	// CodeInternalError, 503 for CodeUnavailable and 400 otherwise.
	StatusCode int
	// Message is the error message; empty gives a generic one.
	Message string
	// Count is the number of calls the fault applies to before it removes
	// itself ("fail the next N calls"); 0 means until removed.
	Count int
}

// Throttle returns a fault that fails calls of op with CodeThrottled.
func Throttle(op string) Fault { return Fault{Op: op, Code: CodeThrottled} }

// InternalError returns a fault that fails calls of op with an HTTP 500.
func InternalError(op string) Fault { return Fault{Op: op, Code: CodeInternalError} }

// Unavailable returns a fault that fails calls of op with an HTTP 503.
func Unavailable(op string) Fault { return Fault{Op: op, Code: CodeUnavailable} }

// Latency returns a fault that delays calls of op by d.
func Latency(op string, d time.Duration) Fault { return Fault{Op: op, Latency: d} }

// JitteredLatency returns a fault that delays each call of op by a random
// time, lognormal with the given median and 99th percentile (e.g. 10ms and
// 40ms): see Fault.LatencyP99.
func JitteredLatency(op string, median, p99 time.Duration) Fault {
	return Fault{Op: op, Latency: median, LatencyP99: p99}
}

// z99 is the 99th percentile of the standard normal distribution.
const z99 = 2.3263478740408408

// delay returns the wait of one call: Latency, or with LatencyP99 above
// it a draw from the lognormal distribution with median Latency and 99th
// percentile LatencyP99, exp(ln(Latency) + sigma x Z) with Z standard
// normal and sigma = ln(LatencyP99/Latency) / z99.
func (f *Fault) delay(r *rand.Rand) time.Duration {
	if f.Latency <= 0 || f.LatencyP99 <= f.Latency {
		return f.Latency
	}
	sigma := math.Log(float64(f.LatencyP99)/float64(f.Latency)) / z99
	d := float64(f.Latency) * math.Exp(sigma*r.NormFloat64())
	if d >= math.MaxInt64 {
		return math.MaxInt64 // some 10^20 sigmas out: only in theory
	}
	return time.Duration(d)
}

func (f *Fault) err() *api.Error {
	if f.Code == "" {
		return nil
	}
	status := f.StatusCode
	if status == 0 {
		switch f.Code {
		case CodeInternalError:
			status = http.StatusInternalServerError
		case CodeUnavailable:
			status = http.StatusServiceUnavailable
		default:
			status = http.StatusBadRequest
		}
	}
	msg := f.Message
	if msg == "" {
		msg = "injected fault: " + f.Code
	}
	return api.NewError(status, f.Code, "%s", msg)
}

// faults holds the installed faults and the per-operation call counts.
type faults struct {
	mu     sync.Mutex
	list   []*installedFault
	counts map[string]int64
}

type installedFault struct {
	Fault
	left int // calls left when Count > 0
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
		if f.Op != "" && f.Op != op {
			continue
		}
		if f.Count > 0 {
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
	inst := &installedFault{Fault: f, left: f.Count}
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

// ClearFaults removes every installed fault.
func (s *Server) ClearFaults() {
	s.faults.mu.Lock()
	s.faults.list = nil
	s.faults.mu.Unlock()
}

// Calls returns the number of requests the server has received for
// operation op (e.g. "SendMessage"), including failed ones.
func (s *Server) Calls(op string) int64 {
	s.faults.mu.Lock()
	defer s.faults.mu.Unlock()
	return s.faults.counts[op]
}

// CallCounts returns a copy of the request counts by operation.
func (s *Server) CallCounts() map[string]int64 {
	s.faults.mu.Lock()
	defer s.faults.mu.Unlock()
	return maps.Clone(s.faults.counts)
}

// TotalCalls returns the number of requests of every operation.
func (s *Server) TotalCalls() int64 {
	s.faults.mu.Lock()
	defer s.faults.mu.Unlock()
	var n int64
	for _, c := range s.faults.counts {
		n += c
	}
	return n
}

// ResetCalls sets every call count to zero.
func (s *Server) ResetCalls() {
	s.faults.mu.Lock()
	s.faults.counts = nil
	s.faults.mu.Unlock()
}
