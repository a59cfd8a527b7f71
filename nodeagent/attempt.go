package nodeagent

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/iopgw/iop/execution"
	"github.com/iopgw/iop/wire"
)

// attemptState is one admitted attempt: what CancelRun and the in-flight
// counts know of it.
type attemptState struct {
	id         attemptIdentity
	provider   string
	cancel     context.CancelFunc
	inFlight   *atomic.Int32 // its provider's count
	prev, next *attemptState // the run's other admitted attempts (Bridge.runs)
}

// admit counts a in its provider's in-flight attempts and in its run's;
// release undoes it.
func (b *Bridge) admit(a *attemptState) {
	b.mu.Lock()
	a.inFlight = b.inFlight[a.provider]
	if a.inFlight == nil {
		a.inFlight = new(atomic.Int32)
		b.inFlight[a.provider] = a.inFlight
	}
	if head := b.runs[a.id.RunID]; head != nil {
		a.next, head.prev = head, a
	}
	b.runs[a.id.RunID] = a
	b.mu.Unlock()
	a.inFlight.Add(1)
}

func (b *Bridge) release(a *attemptState) {
	a.inFlight.Add(-1)
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case a.prev != nil:
		a.prev.next = a.next
	case a.next != nil:
		b.runs[a.id.RunID] = a.next
	default:
		delete(b.runs, a.id.RunID)
	}
	if a.next != nil {
		a.next.prev = a.prev
	}
	a.prev, a.next = nil, nil
}

// attempt is one admitted attempt of either kind: its admission, its
// provider's context, what its watchdog asks of it (watchHooks) and the
// end its owner calls — one object, where each of these was a closure.
type attempt[E any] struct {
	attemptState
	b        *Bridge
	spec     attemptSpec[E]
	ctx      context.Context // the owner's (with its handover, on the in-process channel)
	pctx     context.Context // the provider's; cancel ends it
	w        *watchdog
	returned chan struct{} // closed once the terminal for the provider's result was sent
	once     sync.Once     // end's
}

// startAttempt admits the attempt and starts its watchdog; the provider
// runs when the owner calls the result's background or here.
func startAttempt[E any](ctx context.Context, b *Bridge, s attemptSpec[E], w *watchdog) started {
	a := &attempt[E]{b: b, spec: s, ctx: ctx, w: w, returned: make(chan struct{})}
	a.pctx, a.cancel = context.WithCancel(ctx)
	a.id, a.provider = s.id, s.desc.ProviderID
	b.admit(&a.attemptState)
	w.start(a)
	return started{done: s.sink.Done(), att: a}
}

// run runs the provider until it returns. When it handed its reads over
// (the in-process channel), the result comes with the reads' end.
func (a *attempt[E]) run() {
	err := execSafely(a.pctx, a.spec.exec, a.b.log, a.provider)
	if ho := handoverOf(a.ctx); ho != nil && ho.taken.Load() {
		ho.attempt = a // at the reads' end, with their result (err is httpx.ErrHanded)
		return
	}
	a.runEnd(err)
}

// runEnd sends the terminal for the provider's result; the provider is
// then released (its reads are over).
func (a *attempt[E]) runEnd(err error) {
	defer close(a.returned)
	if a.pctx.Err() != nil {
		a.spec.sink.Emit(a.spec.cancelled)
		return
	}
	logUpstreamFailure(a.b.log, a.provider, err)
	if err == nil && a.spec.sink.Closed() {
		return // the provider's own terminal went: none to make (Emit would drop it)
	}
	a.spec.sink.Emit(a.spec.terminal(err))
}

// end finishes the attempt, once: without a terminal yet the edge went
// away, so the attempt is fenced and ends cancelled here; then the
// watchdog is halted, the provider's context cancelled, the admission
// released and the span ended.
func (a *attempt[E]) end() { a.once.Do(a.finish) }

func (a *attempt[E]) finish() {
	if a.spec.sink.Claim() {
		a.spec.sink.Finish(a.spec.cancelled)
	}
	a.w.halt()
	<-a.w.done
	a.cancel()
	a.b.release(&a.attemptState)
	if a.spec.span != nil {
		a.spec.span.End()
	}
}

// The attempt's watchHooks.

func (a *attempt[E]) claim() bool                       { return a.spec.sink.Claim() }
func (a *attempt[E]) cancelProvider()                   { a.cancel() }
func (a *attempt[E]) providerReturned() <-chan struct{} { return a.returned }

func (a *attempt[E]) probe() execution.ProbeOutcome {
	d := a.spec.desc
	return a.b.probes.ProbeHealth(a.spec.provider, execution.ProbeRequest{Adapter: d.Adapter, InstanceKey: d.InstanceKey, Target: a.id.Target})
}

func (a *attempt[E]) nextSeq() uint64 {
	if a.spec.sess == nil {
		return 0 // an unbound path: the key is omitted
	}
	return a.spec.sess.NextObservationSeq()
}

func (a *attempt[E]) evidence(v stallVerdict) *execution.StallEvidence { return stallEvidence(v, a.id) }
func (a *attempt[E]) deliverStall(v stallVerdict)                      { a.spec.sink.Finish(a.spec.stalled(v)) }

func (a *attempt[E]) observeStall(v stallVerdict) {
	observeSafely(a.b.observer, StallObservation{
		ExecutionPath: a.spec.path, ProviderHealth: v.health.Status(), LivenessClassification: v.health,
		AttemptFence: v.fence, IdleDurationMS: v.idle.Milliseconds(),
	}, a.b.log)
}

// started is an attempt admitted and watched, its provider not yet run:
// done is closed once its terminal was delivered, and end (called by its
// owner) finishes it.
type started struct {
	done <-chan struct{}
	att  runner // nil when no work started
}

// runner is a started attempt.
type runner interface {
	run() // the provider's work, until it returns
	end() // idempotent
}

// background runs the provider on a goroutine of its own (tracked by g),
// which may outlive an unconfirmed fence: its owner is free to read the
// stream the attempt came on.
func (s started) background(g *sync.WaitGroup) started {
	if s.att != nil {
		g.Go(s.att.run)
	}
	return s
}

// here runs the provider on the caller's goroutine, until it returns.
func (s started) here() {
	if s.att != nil {
		s.att.run()
	}
}

// end finishes the attempt (see attempt.end); nothing for work that never
// started.
func (s started) end() {
	if s.att != nil {
		s.att.end()
	}
}

// refused sends a terminal for work that never started.
func refused(send func(*wire.AttemptUp) error, ended func(), m *wire.AttemptUp) started {
	_ = send(m)
	if ended != nil {
		ended()
	}
	return started{done: alreadyDone}
}

// alreadyDone is the done of work that never started.
var alreadyDone = func() <-chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// wait waits for the terminal, or for ctx to end (the edge went away),
// and ends the attempt.
func (s started) wait(ctx context.Context) {
	select {
	case <-s.done:
	case <-ctx.Done():
	}
	s.end()
}
