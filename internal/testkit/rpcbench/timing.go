package rpcbench

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// epoch is what Stamp counts from: the benchmarks' senders and receivers
// run in one process, and share its monotonic clock.
var epoch = time.Now()

// Stamp returns a message body holding the time, for SinceStamp at the
// other end.
func Stamp() string { return strconv.FormatInt(int64(time.Since(epoch)), 10) }

// SinceStamp returns the time since the Stamp in body.
func SinceStamp(body string) time.Duration {
	n, _ := strconv.ParseInt(body, 10, 64)
	return time.Since(epoch) - time.Duration(n)
}

// Latencies collects durations from concurrent goroutines. The zero value
// is ready to use.
type Latencies struct {
	mu sync.Mutex
	d  []time.Duration
}

// Add adds durations.
func (l *Latencies) Add(d ...time.Duration) {
	l.mu.Lock()
	l.d = append(l.d, d...)
	l.mu.Unlock()
}

// Reset forgets the durations added so far.
func (l *Latencies) Reset() {
	l.mu.Lock()
	l.d = nil
	l.mu.Unlock()
}

// Len returns the number of durations.
func (l *Latencies) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.d)
}

// Percentile returns the p-th percentile (p < 100) in milliseconds, 0 for
// none.
func (l *Latencies) Percentile(p int) float64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.d) == 0 {
		return 0
	}
	slices.Sort(l.d)
	return PercentileMs(l.d, p)
}

// Report reports the p50 and p99 as name's metrics, "p50-<name>-ms" and
// "p99-<name>-ms", when there are durations.
func (l *Latencies) Report(b *testing.B, name string) {
	if l.Len() == 0 {
		return
	}
	b.ReportMetric(l.Percentile(50), "p50-"+name+"-ms")
	b.ReportMetric(l.Percentile(99), "p99-"+name+"-ms")
}

// PercentileMs returns the p-th percentile (p < 100) of sorted, not
// empty, in milliseconds.
func PercentileMs(sorted []time.Duration, p int) float64 {
	return float64(sorted[len(sorted)*p/100].Microseconds()) / 1000
}

// RunOps runs b.N ops in all on workers concurrent goroutines (worker is
// the goroutine's number), each op with a minute to finish. A failed op
// fails the benchmark and stops its worker.
func RunOps(b *testing.B, workers int, op func(ctx context.Context, worker int) error) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(b.N) {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				err := op(ctx, w)
				cancel()
				if err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// ReportCalls reports the API calls per unit, n of them, as
// "calls/<unit>", and returns them by operation, for the log.
func ReportCalls(b *testing.B, calls map[string]int64, n float64, unit string) string {
	var total int64
	var by []string
	for _, op := range slices.Sorted(maps.Keys(calls)) {
		total += calls[op]
		by = append(by, fmt.Sprintf("%s %.3f", op, float64(calls[op])/n))
	}
	b.ReportMetric(float64(total)/n, "calls/"+unit)
	return strings.Join(by, ", ")
}

// ReportTwoWay reports what a run of streams both ways carried: msgs
// messages in all (both ways together), the CPU per message since cpu0
// (ProcessCPU at the start) and the messages per second each way. Call it
// after b.StopTimer.
func ReportTwoWay(b *testing.B, cpu0 time.Duration, msgs float64) {
	if cpu := ProcessCPU() - cpu0; cpu > 0 {
		b.ReportMetric(float64(cpu.Microseconds())/msgs, "cpu-us/msg")
	}
	b.ReportMetric(msgs/2/b.Elapsed().Seconds(), "msg/s/way")
}
