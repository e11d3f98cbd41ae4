// Package workers runs short tasks on goroutines that outlive them.
//
// A goroutine starts with a 2 KiB stack, and one SDK call needs about 32 KiB:
// a fresh goroutine per call copies its stack four times as it grows, which
// profiles showed to be a tenth of the CPU of a lone round trip. A Pool keeps
// goroutines that finished a task waiting for the next one for a while, so
// that the next task runs on a stack that has already grown.
//
// The garbage collector halves the stack of a goroutine that uses less than
// a quarter of it whenever it runs, which on a small heap is every few
// milliseconds under load: an idle worker waiting in a shallow frame would
// lose its grown stack before its next task and copy it up to four times
// again. An idle worker therefore waits below a frame of stackReserve
// bytes, which keeps a stack of up to four times that size whole. (In
// tempq bench at 64 callers this cut the CPU per RPC by a tenth: the
// copies, and the collections themselves, which come less often once the
// stacks they count towards their pacing stay grown.)
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
		var ok bool
		if f, ok = p.next(t); !ok {
			return
		}
	}
}

// stackReserve is the frame an idle worker waits below: a quarter of the
// 32 KiB stack an SDK call grows, so that the garbage collector does not
// shrink that stack (it shrinks only stacks less than a quarter used).
const stackReserve = 8 << 10

// next waits for the next task; false means the worker should stop (t
// fired or the pool closed). Its frame holds stackReserve bytes.
//
//go:noinline
func (p *Pool) next(t *time.Timer) (func(), bool) {
	var reserve [stackReserve]byte
	keep(&reserve)
	select {
	case f := <-p.tasks:
		return f, true
	case <-t.C:
		return nil, false
	case <-p.quit:
		return nil, false
	}
}

// keep makes the compiler keep r in its caller's frame.
//
//go:noinline
func keep(r *[stackReserve]byte) { r[0] = 0 }

// Close makes idle workers stop at once and busy ones after their task. It
// does not wait for them; Wait does. It is idempotent.
func (p *Pool) Close() {
	p.closeOnce.Do(func() { close(p.quit) })
}

// Wait waits until every worker has stopped. Call it after Close.
func (p *Pool) Wait() { p.wg.Wait() }
