// Package rpcbench runs the round-trip benchmarks of the adapters and the
// requester: callers concurrent goroutines making b.N calls in all, with
// the process's CPU time, the API calls and the rate reported per call;
// and gives the stream and session benchmarks their timing: messages
// stamped with the time, latencies collected and reported as percentiles,
// ops run on concurrent workers.
package rpcbench

import (
	"sync"
	"sync/atomic"
	"testing"

	"github.com/tempqueues/tempqueues/internal/callcount"
)

// Run makes one call first (it creates the host queue, and is not
// measured), then b.N calls from callers goroutines, and reports
// "cpu-µs/rpc" (the whole process's, server included when it runs in
// it), "calls/rpc" (from counter, reset before the measured calls) and
// "rpc/s".
func Run(b *testing.B, callers int, counter *callcount.Counter, call func() error) {
	b.Helper()
	if err := call(); err != nil {
		b.Fatal(err)
	}
	counter.Reset()
	var next atomic.Int64
	var wg sync.WaitGroup
	cpu := ProcessCPU()
	b.ResetTimer()
	for range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(b.N) {
				if err := call(); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	if d := ProcessCPU() - cpu; d > 0 {
		b.ReportMetric(float64(d.Microseconds())/float64(b.N), "cpu-µs/rpc")
	}
	b.ReportMetric(float64(counter.Total())/float64(b.N), "calls/rpc")
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "rpc/s")
}
