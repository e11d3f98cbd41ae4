package workers

import (
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tempqueues/tempqueues/internal/testkit/testtime"
)

// runOnIdle hands f to a worker of p once one waits for a task.
func runOnIdle(t *testing.T, p *Pool, f func()) {
	t.Helper()
	if !testtime.Until(5*time.Second, func() bool {
		select {
		case p.tasks <- f:
			return true
		default:
			return false
		}
	}) {
		t.Fatal("no worker became idle")
	}
}

func TestTasksReuseAnIdleWorker(t *testing.T) {
	p := New(time.Minute)
	defer func() { p.Close(); p.Wait() }()
	done := make(chan struct{})
	p.Go(func() { done <- struct{}{} })
	<-done
	runOnIdle(t, p, func() { done <- struct{}{} })
	<-done
	p.Go(func() { done <- struct{}{} }) // the same worker, idle again or busy
	<-done
	if n := p.started.Load(); n > 2 {
		t.Fatalf("%d goroutines for three sequential tasks", n)
	}
}

func TestConcurrentTasksGetTheirOwnWorkers(t *testing.T) {
	p := New(time.Minute)
	defer func() { p.Close(); p.Wait() }()
	var wg sync.WaitGroup
	release := make(chan struct{})
	for range 5 {
		wg.Add(1)
		p.Go(func() { defer wg.Done(); <-release }) // never blocks the caller
	}
	close(release)
	wg.Wait()
	if n := p.started.Load(); n != 5 {
		t.Fatalf("%d goroutines for 5 blocked tasks, want 5", n)
	}
}

func TestWorkersStopWhenIdleAndOnClose(t *testing.T) {
	p := New(20 * time.Millisecond)
	p.Go(func() {})
	stopped := make(chan struct{})
	go func() { p.Wait(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(5 * time.Second):
		t.Fatal("an idle worker outlived its idle period")
	}

	p = New(time.Hour)
	p.Go(func() {})
	runOnIdle(t, p, func() {})
	p.Close()
	p.Close() // idempotent
	stopped = make(chan struct{})
	go func() { p.Wait(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(5 * time.Second):
		t.Fatal("Close left an idle worker running")
	}
	ran := make(chan struct{})
	p.Go(func() { close(ran) }) // after Close: still runs
	<-ran
}

// deep uses about n KiB of stack.
//
//go:noinline
func deep(n int) byte {
	var frame [1 << 10]byte
	frame[n%len(frame)] = byte(n)
	if n <= 1 {
		return frame[0]
	}
	return deep(n-1) + frame[n%len(frame)]
}

func TestIdleWorkersKeepTheirGrownStacks(t *testing.T) {
	const n = 32
	p := New(time.Hour)
	defer func() { p.Close(); p.Wait() }()
	var wg sync.WaitGroup
	release := make(chan struct{})
	for range n {
		wg.Add(1)
		p.Go(func() { defer wg.Done(); deep(16); <-release }) // grows a 32 KiB stack
	}
	close(release)
	wg.Wait()
	// Every worker parks, idle: all n wait for a task.
	testtime.Eventually(t, 5*time.Second, "every worker idle", func() bool { return idleWorkers() == n })
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range 4 {
		runtime.GC() // each may halve a stack less than a quarter used
	}
	runtime.ReadMemStats(&after)
	// Shrinking would give back about n x 28 KiB.
	if lost := int64(before.StackInuse) - int64(after.StackInuse); lost > n*8<<10 {
		t.Fatalf("garbage collections shrank idle workers' stacks by %d bytes in all", lost)
	}
}

// idleWorkers counts the goroutines of this package waiting for a task.
func idleWorkers() int {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	n := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "internal/workers.(*Pool).next(") {
			n++
		}
	}
	return n
}
