package workers

import (
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
