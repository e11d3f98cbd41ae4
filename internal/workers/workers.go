// Package workers runs short tasks on goroutines that outlive them.
//
// A goroutine starts with a 2 KiB stack, and one SDK call needs about 32 KiB:
// a fresh goroutine per call copies its stack four times as it grows, which
// profiles showed to be a tenth of the CPU of a lone round trip. A Pool keeps
// goroutines that finished a task waiting for the next one for a while, so
// that the next task runs on a stack that has already grown.
package workers

import (
	"sync"
	"sync/atomic"
	"time"
)

// DefaultIdle is how long an idle worker waits for a task before it stops.
const DefaultIdle = 2 * time.Second

// Pool runs tasks on reused goroutines. The zero value is not usable; call
// New. Its goroutines stop when they stay idle for the pool's idle period or
// when Close is called, after their current task.
type Pool struct {
	idle      time.Duration
	tasks     chan func() // unbuffered: a send succeeds only when a worker waits
	quit      chan struct{}
	closeOnce sync.Once
	wg        sync.WaitGroup
	started   atomic.Int64 // goroutines started, for tests
}

// New returns a Pool whose workers stop after idle without a task (0 means
// DefaultIdle).
func New(idle time.Duration) *Pool {
	if idle <= 0 {
		idle = DefaultIdle
	}
	return &Pool{idle: idle, tasks: make(chan func()), quit: make(chan struct{})}
}

// Go runs f on an idle worker, or on a new one when none is idle. It never
// blocks. After Close it still runs f, on a goroutine that stops after it.
func (p *Pool) Go(f func()) {
	select {
	case p.tasks <- f:
	default:
		p.wg.Add(1)
		p.started.Add(1)
		go p.work(f)
	}
}

func (p *Pool) work(f func()) {
	defer p.wg.Done()
	t := time.NewTimer(p.idle)
	defer t.Stop()
	for {
		f()
		f = nil // let the task's closure go while waiting
		t.Reset(p.idle)
		select {
		case f = <-p.tasks:
		case <-t.C:
			return
		case <-p.quit:
			return
		}
	}
}

// Close makes idle workers stop at once and busy ones after their task. It
// does not wait for them; Wait does. It is idempotent.
func (p *Pool) Close() {
	p.closeOnce.Do(func() { close(p.quit) })
}

// Wait waits until every worker has stopped. Call it after Close.
func (p *Pool) Wait() { p.wg.Wait() }
