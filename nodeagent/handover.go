package nodeagent

import (
	"context"
	"sync/atomic"

	"google.golang.org/grpc"

	"github.com/iopgw/iop/wire"
)

// Handed reads: on the in-process channel a streamed tunnel answer's
// upstream reads run on the edge's goroutine that forwards them
// (internal/inproc's Hand). Otherwise each chunk is read on the attempt's
// goroutine here and handed to the edge's, which must wake to take it:
// two goroutine wakeups per chunk where a proxy has one. Handed over,
// the edge's receive runs the read, the node's emitter and coalescer run
// inside it as they would here, and the message it produces is taken on
// the goroutine the read woke. And the attempt's goroutine does not wait
// for the body's end but returns: the end of the attempt — the
// provider's terminal, the attempt's end, the wait for the stream's next
// work — runs on a goroutine started when the reads end. A held stream
// then costs the node no goroutine at all.

// startLending rests the age timer for a loan of the provider's reads,
// unless the answer goes whole or the edge has given up on it.
func (o *outbound) startLending() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.co.whole || o.sendErr != nil {
		return false
	}
	o.lending = true
	if o.armed {
		o.aged.Stop()
		o.armed = false
	}
	return true
}

// stopLending ends a loan: what is held again waits on the age timer.
func (o *outbound) stopLending() {
	o.mu.Lock()
	o.lending = false
	o.mu.Unlock()
}

// streamHander is a client stream that hands its reads over to its
// receiver: the in-process channel's.
type streamHander interface {
	HandOn(ctx context.Context, step func() (done bool), after func(complete bool, panicked any), run func(func()))
}

// handover joins an attempt whose reads were handed over: the attempt's
// goroutine leaves its ends (set before it arrives) and the reads' end
// brings the tunnel's result; whichever arrives second runs the rest.
type handover struct {
	to       streamHander                 // the in-process stream the attempt answers on
	run      func(func())                 // starts the goroutine the reads end on (a kept one)
	taken    atomic.Bool                  // the provider's reads were handed over
	attempt  interface{ runEnd(error) }   // the attempt's: the terminal for the provider's result
	serveEnd func() *wire.AttemptDown     // serve's: the attempt's end, then the stream's next work
	rest     func(next *wire.AttemptDown) // carry's: the stream's next work, on the reads' goroutine
	err      error                        // the tunnel's result
	arrived  atomic.Int32
}

type handoverKey struct{}

// withHandover marks ctx so a tunnel started under it may hand its reads
// over to the receiver of cs, the in-process stream it answers on (ctx
// unchanged, and no handover, over the network). The reads end on a
// goroutine run starts: the attempt's end, the wait for the stream's next
// work and its start run there. A start goes as deep as the last one
// (an HTTP round trip), so a kept goroutine (the bridge's workers) saves
// growing a fresh one's stack on every streamed answer; what it costs is
// that grown stack kept through the wait, for at most as many streams as
// the session parks.
func withHandover(ctx context.Context, cs grpc.ClientStream, run func(func())) (context.Context, *handover) {
	to, ok := cs.(streamHander)
	if !ok {
		return ctx, nil
	}
	ho := &handover{to: to, run: run}
	return context.WithValue(ctx, handoverKey{}, ho), ho
}

func handoverOf(ctx context.Context) *handover {
	ho, _ := ctx.Value(handoverKey{}).(*handover)
	return ho
}

// join is the attempt goroutine's arrival, with what the stream does
// next. When the reads had ended already, it runs the attempt's end here
// and returns the stream's next work (here): the caller goes on with it.
func (ho *handover) join(rest func(next *wire.AttemptDown)) (next *wire.AttemptDown, here bool) {
	ho.rest = rest
	if ho.arrived.Add(1) == 1 {
		return nil, false
	}
	ho.attempt.runEnd(ho.err)
	return ho.serveEnd(), true
}

// ended is the reads' end, with the tunnel's result: second to arrive,
// it runs the attempt's end and the stream's rest on this goroutine.
func (ho *handover) ended(err error) {
	ho.err = err
	if ho.arrived.Add(1) == 1 {
		return
	}
	ho.attempt.runEnd(err)
	ho.rest(ho.serveEnd())
}

// hand hands the provider's reads over to the edge's receive while its
// answer streams (a whole answer goes as one message at its end: handing
// its reads over would add a handoff, not save one), and returns at once;
// at the reads' end the tunnel's tail (or, after a step's panic, abort)
// gives the result to ho. While handed over, every step sends what its
// read produced before it returns and nothing else sends, so the age
// timer rests: a step is the only sender the loan allows.
func (o *outbound) hand(ctx context.Context, ho *handover, step func() bool, tail func(bool) error, abort func(),
	panicked func(any) error) bool {
	if !o.startLending() {
		return false
	}
	ho.taken.Store(true)
	ho.to.HandOn(ctx, step, func(complete bool, v any) {
		o.stopLending()
		if v != nil {
			abort()
			ho.ended(panicked(v))
			return
		}
		ho.ended(tail(complete))
	}, ho.run)
	return true
}
