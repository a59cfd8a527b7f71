package syncx

import (
	"sync"
	"sync/atomic"
)

// Workers runs functions on goroutines that, when one returns, wait for
// the next function instead of ending.
//
// A goroutine starts on a small stack and grows it, by copying, the
// first time a call goes deeper: an HTTP round trip or a protobuf
// message's decode grows a fresh goroutine's stack twice. A goroutine
// that ends gives its grown stack back; one that waits keeps it for the
// next function, which then starts at the depth it needs. At most
// maxIdle wait; the others end, so what the set keeps is bounded (the
// collector also halves a waiting goroutine's stack when it uses little
// of it).
//
// Use it for work that is deep and ends; a function that waits long on
// a shallow stack (a stream's receive) is better on a fresh goroutine.
type Workers struct {
	// idle counts the goroutines waiting that no function is on its way
	// to: Go takes one (and sends), a goroutine done with its function
	// gives one. work holds what was sent and not yet received, at most
	// one function per goroutine waiting, so a send never blocks.
	idle    atomic.Int32
	work    chan func()
	closed  chan struct{}
	close   sync.Once
	maxIdle int32
}

// NewWorkers returns a set keeping at most maxIdle goroutines waiting.
func NewWorkers(maxIdle int) *Workers {
	return &Workers{work: make(chan func(), maxIdle), closed: make(chan struct{}), maxIdle: int32(maxIdle)}
}

// Go runs f on a waiting goroutine, or on a new one when none waits.
func (w *Workers) Go(f func()) {
	if take(&w.idle) {
		w.work <- f
		return
	}
	go w.run(f)
}

// Close ends the waiting goroutines; those running a function end after
// it. Go still runs functions after Close, each on a goroutine that ends
// with it.
func (w *Workers) Close() { w.close.Do(func() { close(w.closed) }) }

// Idle is the number of goroutines waiting for a function.
func (w *Workers) Idle() int { return int(w.idle.Load()) }

func (w *Workers) run(f func()) {
	for f != nil {
		f()
		f = nil // what the function held is not kept while waiting
		if !w.wait() {
			return
		}
		select {
		case f = <-w.work:
		case <-w.closed:
			if !take(&w.idle) {
				f = <-w.work // a function is on its way to this goroutine
			}
		}
	}
}

// wait counts the calling goroutine as waiting, unless maxIdle do.
func (w *Workers) wait() bool {
	for {
		n := w.idle.Load()
		if n >= w.maxIdle {
			return false
		}
		if w.idle.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// take takes one from n if n is positive.
func take(n *atomic.Int32) bool {
	for {
		v := n.Load()
		if v <= 0 {
			return false
		}
		if n.CompareAndSwap(v, v-1) {
			return true
		}
	}
}
