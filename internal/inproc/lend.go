package inproc

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
)

// Lending: a client whose next messages come out of a blocking read (a
// body it streams from elsewhere) can lend that read to the handler.
// Without it every message costs a goroutine handoff: the client's
// goroutine wakes on its read, hands the message over and the handler's
// goroutine wakes to take it — on a streamed response, two wakeups per
// chunk where a plain proxy has one. With it the handler's receive runs
// the read itself: the goroutine that takes the message is the one the
// read woke.

// loan is a lent step and what became of it.
type loan struct {
	step     func() (done bool)
	complete bool // a step reported done (or panicked); guarded by lending.mu
	panicked any
	recalled atomic.Bool // the lender is taking it back: no step starts

	// What runs at its end, once, and the watchers of the lender's
	// context and the stream that end it early.
	after func(complete bool, panicked any)
	run   func(func()) // starts after's goroutine (nil: go)
	ended sync.Once
	stops [2]func() bool
}

// lending is a stream's lending state.
type lending struct {
	mu       sync.Mutex    // held while a step runs; guards lent
	lent     *loan         // nil when nothing is lent
	stepping atomic.Bool   // the handler's receive is running a step
	offered  chan struct{} // one-slot: wakes a receive waiting when a step is lent
}

// errTwoSends is what a lent step gets for a second message in one step.
var errTwoSends = errors.New("in-process channel: a lent step sent a second message before the first was received")

// Hand lends step to the stream's handler and returns at once: until
// step reports done, a receive of the handler's that finds no message
// waiting runs step on its own goroutine, then looks again. step reads
// once, sends at most one message on the stream (a second would wait on
// the handler running it: it gets an error instead) and reports done at
// the end of what it reads. While it is lent, nothing else may send on
// the stream.
//
// after runs once, on a goroutine of its own, when a step reported done
// (complete; panicked is a step's panic, if one panicked) or when ctx or
// the stream ended first — after any step then running returned (not
// complete: after goes on with step itself). The lender's goroutine is
// free meanwhile: a loan as long as a streamed answer keeps no goroutine
// of the client's until it ends. A caller holding a generated stub's
// stream reaches Hand through an interface, as AfterEnd.
func (c *clientStream) Hand(ctx context.Context, step func() (done bool), after func(complete bool, panicked any)) {
	c.HandOn(ctx, step, after, nil)
}

// HandOn is Hand with the goroutine after runs on started by run (nil: a
// new one). A lender whose after goes deep — it starts the stream's next
// work — passes a set of kept goroutines (syncx.Workers' Go), whose
// stacks were grown by an earlier after: a fresh goroutine grows its
// stack by copying, on every loan.
func (c *clientStream) HandOn(ctx context.Context, step func() (done bool), after func(complete bool, panicked any), run func(func())) {
	s := (*stream)(c)
	l := &loan{step: step, after: after, run: run}
	s.lend.mu.Lock() // the watchers are set before a step can end the loan
	l.stops[0] = context.AfterFunc(ctx, func() { s.recall(l) })
	l.stops[1] = context.AfterFunc(s.sctx, func() { s.recall(l) })
	s.lend.lent = l
	s.lend.mu.Unlock()
	select { // wake a receive waiting for a message
	case s.lend.offered <- struct{}{}:
	default:
	}
}

// recall takes a loan back, once the step running, if any, returned, and
// ends it.
func (s *stream) recall(l *loan) {
	l.recalled.Store(true)
	s.lend.mu.Lock() // a step running finishes first
	if s.lend.lent == l {
		s.lend.lent = nil
	}
	complete := l.complete
	s.lend.mu.Unlock()
	l.end(complete)
}

// end runs a loan's after, once.
func (l *loan) end(complete bool) {
	l.ended.Do(func() {
		for _, stop := range l.stops {
			stop()
		}
		if l.run == nil {
			go l.after(complete, l.panicked)
			return
		}
		l.run(func() { l.after(complete, l.panicked) })
	})
}

// step runs the lent step, if any, on the receiving goroutine and reports
// whether one ran.
func (s *stream) step() bool {
	s.lend.mu.Lock()
	defer s.lend.mu.Unlock()
	l := s.lend.lent
	if l == nil || l.recalled.Load() {
		return false
	}
	s.lend.stepping.Store(true)
	done := runStep(l)
	s.lend.stepping.Store(false)
	if done {
		s.lend.lent = nil
		l.complete = true
		l.end(true)
	}
	return true
}

// runStep runs l's step; a panic in it ends the loan, for after to handle.
func runStep(l *loan) (done bool) {
	defer func() {
		if v := recover(); v != nil {
			l.panicked, done = v, true
		}
	}()
	return l.step()
}
