package workers

import (
	"runtime"
	"sync"
	"testing"
	"time"
)

// runOnIdle hands f to a worker of p once one waits for a task.
func runOnIdle(t *testing.T, p *Pool, f func()) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		select {
		case p.tasks <- f:
			return
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("no worker became idle")
		}
		time.Sleep(time.Millisecond)
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
	time.Sleep(50 * time.Millisecond) // every worker parks, idle
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
