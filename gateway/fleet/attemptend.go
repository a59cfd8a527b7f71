package fleet

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/iopgw/iop/wire"
)

// An Attempt stream carries one attempt after another (a reusable stream
// is parked again after each). Each attempt ends once — End, Finish, or
// its stream's end — and what follows (the stream parked again for the
// next attempt, or ended) runs on the handler's goroutine over the
// network; on the in-process channel, where the handler detached the
// stream and returned, it runs where the attempt ended when it need not
// wait for the node, else on a goroutine started at the end. The
// end is the attempt's own state, not a context per attempt: the
// stream's context is watched once per stream.

// attemptEnd is an attempt's end.
type attemptEnd struct {
	mu       sync.Mutex
	over     bool
	wake     chan struct{} // made by a waiter (wait), closed at the end
	follower *detached     // what follows the end, on a detached stream
}

// end ends the attempt; ending it again does nothing. here says the
// caller holds no lock (Finish's caller, the dispatch taking the
// terminal): on a detached stream what follows may then run on its
// goroutine (after).
func (a *AttemptConn) end(here bool) {
	e := &a.endState
	e.mu.Lock()
	if e.over {
		e.mu.Unlock()
		return
	}
	e.over = true
	wake, d := e.wake, e.follower
	e.mu.Unlock()
	if wake != nil {
		close(wake)
	}
	if d != nil {
		d.after(a, here)
	}
}

// ended reports whether the attempt has ended, or its stream.
func (a *AttemptConn) ended() bool {
	a.endState.mu.Lock()
	over := a.endState.over
	a.endState.mu.Unlock()
	return over || a.stream.Context().Err() != nil
}

// wait waits for the end of the attempt, or of its stream.
func (a *AttemptConn) wait() {
	e := &a.endState
	e.mu.Lock()
	if e.over {
		e.mu.Unlock()
		return
	}
	if e.wake == nil {
		e.wake = make(chan struct{})
	}
	wake := e.wake
	e.mu.Unlock()
	select {
	case <-wake:
	case <-a.stream.Context().Done():
	}
}

// detached is an in-process Attempt stream whose handler returned: the
// end of each of its attempts is followed (after), and the stream's end
// ends its current attempt.
type detached struct {
	h       *Hub
	stream  wire.NodeLink_AttemptServer
	end     func(error) // ends the stream (inproc.Detach's)
	pending func() bool // a message of the node's waits (inproc.Pending's)
	cur     atomic.Pointer[AttemptConn]
}

// detach is Attempt's wait on the in-process channel: a, the stream's
// first attempt, and every later one are followed, until the stream ends
// (end and pending are inproc.Detach's and inproc.Pending's).
func (h *Hub) detach(stream wire.NodeLink_AttemptServer, a *AttemptConn, end func(error), pending func() bool) {
	d := &detached{h: h, stream: stream, end: end, pending: pending}
	context.AfterFunc(stream.Context(), d.streamEnded)
	d.follow(a)
}

// follow makes a the stream's current attempt, whose end next follows.
func (d *detached) follow(a *AttemptConn) {
	d.cur.Store(a)
	e := &a.endState
	e.mu.Lock()
	over := e.over
	if !over {
		e.follower = d
	}
	e.mu.Unlock()
	switch {
	case over:
		go d.next(a)
	case d.stream.Context().Err() != nil:
		a.end(false) // the stream ended before a was current: streamEnded may have missed it
	}
}

// streamEnded ends the stream's current attempt.
func (d *detached) streamEnded() {
	if a := d.cur.Load(); a != nil {
		a.end(false)
	}
}

// after follows the end of a: here (on the goroutine that ended it,
// which holds no lock) when the node's next message is there already —
// the stream opened again, parked, which a node that parks after the
// terminal sends right after it — otherwise on a goroutine of its own,
// which waits for that message.
func (d *detached) after(a *AttemptConn, here bool) {
	if here && d.pending() {
		d.next(a)
		return
	}
	go d.next(a)
}

// next follows the end of a: the stream is parked again and its next
// attempt followed, or the stream ends.
func (d *detached) next(a *AttemptConn) {
	b, err := d.h.next(d.stream, a)
	if b == nil {
		d.end(err)
		return
	}
	d.follow(b)
}
