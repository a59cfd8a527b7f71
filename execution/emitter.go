package execution

import "sync"

// Emitter delivers the events of one execution to a sink, in order, and
// publishes exactly one terminal event.
//
// Emit may be called from many goroutines; the calls are serialized, so each
// caller's events reach the sink in the order that caller emitted them, and
// the sink is never called concurrently. The first terminal event wins; every
// event after it is dropped, never delivered.
//
// A watchdog that must end the execution itself first calls Claim, which
// closes the emitter to everyone else, then delivers its terminal with
// Finish.
type Emitter = emitter[RunEvent]

// FrameEmitter is the Emitter of a tunnel: it delivers ProviderTunnelFrames
// with the same ordering and single-terminal guarantees.
type FrameEmitter = emitter[ProviderTunnelFrame]

// NewEmitter returns an Emitter delivering to sink.
func NewEmitter(sink func(RunEvent)) *Emitter {
	return newEmitter(sink, func(e RunEvent) bool { return e.Type.IsTerminal() })
}

// NewFrameEmitter returns a FrameEmitter delivering to sink.
func NewFrameEmitter(sink func(ProviderTunnelFrame)) *FrameEmitter {
	return newEmitter(sink, func(f ProviderTunnelFrame) bool { return f.Type.IsTerminal() })
}

type emitter[E any] struct {
	sink     func(E)
	terminal func(E) bool
	done     chan struct{}

	mu      sync.Mutex // guards the following fields and serializes sink calls
	closed  bool       // a terminal was delivered or the emitter was claimed
	claimed bool       // Claim won; only Finish may deliver
	last    E          // the delivered terminal
	ended   bool       // a terminal was delivered
}

func newEmitter[E any](sink func(E), terminal func(E) bool) *emitter[E] {
	return &emitter[E]{sink: sink, terminal: terminal, done: make(chan struct{})}
}

// Emit delivers ev unless a terminal was already delivered or the emitter
// was claimed. It reports whether ev was delivered.
func (e *emitter[E]) Emit(ev E) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return false
	}
	return e.deliverLocked(ev)
}

func (e *emitter[E]) deliverLocked(ev E) bool {
	term := e.terminal(ev)
	if term {
		e.closed = true
		e.ended = true
		e.last = ev
	}
	e.sink(ev)
	if term {
		close(e.done)
	}
	return true
}

// Claim closes the emitter to every later Emit. It reports whether the
// caller won: false means a terminal was already delivered or another
// caller claimed first. The winner must call Finish exactly once.
func (e *emitter[E]) Claim() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return false
	}
	e.closed = true
	e.claimed = true
	return true
}

// Finish delivers the claimant's terminal event. It is a no-op unless
// Claim succeeded and no terminal was delivered yet, and ev must be
// terminal.
func (e *emitter[E]) Finish(ev E) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.claimed || e.ended || !e.terminal(ev) {
		return false
	}
	return e.deliverLocked(ev)
}

// Done is closed once the terminal event was delivered.
func (e *emitter[E]) Done() <-chan struct{} { return e.done }

// Closed reports whether the emitter accepts no more events from Emit.
func (e *emitter[E]) Closed() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.closed
}

// Terminal returns the delivered terminal event, if any.
func (e *emitter[E]) Terminal() (E, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.last, e.ended
}
