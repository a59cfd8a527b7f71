package nodeagent

import (
	"github.com/iopgw/iop/internal/clock"

	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/iopgw/iop/execution"
)

// DefaultCloseGrace is how long a stalled provider has, after the watchdog
// cancels it, to release the attempt for the fence to be confirmed. It
// runs concurrently with the 5 s probe, so the stall terminal is ready at
// most max(grace, 5 s) after the claim.
const DefaultCloseGrace = 2 * time.Second

// terminalSink is the part of execution.Emitter / FrameEmitter the
// watchdog uses.
type terminalSink[E any] interface {
	Emit(E) bool
	Claim() bool
	Finish(E) bool
	Done() <-chan struct{}
	Closed() bool
}

// stallVerdict is the joined outcome of a claimed stall.
type stallVerdict struct {
	idle     time.Duration
	health   execution.ProviderHealth
	fence    execution.AttemptFence
	seq      uint64 // 0 on unbound paths: the key is omitted
	evidence *execution.StallEvidence
}

// failure returns the typed response_stalled failure of v.
func (v stallVerdict) failure() *execution.ExecutionFailure {
	return &execution.ExecutionFailure{
		Code:      execution.FailureCodeResponseStalled,
		Message:   execution.StalledMessage,
		Retryable: v.fence == execution.AttemptFenceConfirmed,
		Metadata:  v.evidence.Metadata(),
		Stall:     v.evidence,
	}
}

func (v stallVerdict) errorText() string {
	return fmt.Sprintf("response stalled: no progress for %d ms", v.idle.Milliseconds())
}

// watchdog is the liveness owner of one admitted attempt on the node. It
// starts at admission, resets only on progress dispositions, stops on the
// provider terminal, and on idle timeout claims the stall exactly once.
//
// After the claim it joins two independent bounded outcomes concurrently —
// the close-grace fence and the exact-target probe — and hands the verdict
// to finish, which assembles the single allowlisted terminal. It never
// retries and never infers recovery eligibility.
//
// It holds no goroutine while it waits: a timer checks the idle time when
// it would expire and re-arms for the rest; only a claimed stall runs on.
type watchdog struct {
	timeout time.Duration
	grace   time.Duration
	clock   clock.Clock
	last    atomic.Int64 // unix nanos of admission or the last progress
	claimed atomic.Bool
	stopped atomic.Bool
	done    chan struct{} // closed once the watchdog has finished (halted, or the stall delivered)
	ended   sync.Once     // closes done

	mu sync.Mutex  // orders re-arming against halt
	t  clock.Timer // set by start
	h  watchHooks
}

func newWatchdog(timeout, grace time.Duration, clk clock.Clock) *watchdog {
	if timeout <= 0 {
		timeout = time.Duration(execution.DefaultResponseStallTimeoutMS) * time.Millisecond
	}
	w := &watchdog{timeout: timeout, grace: grace, clock: clock.Or(clk), done: make(chan struct{})}
	w.last.Store(w.clock.Now().UnixNano())
	return w
}

// touch records progress.
func (w *watchdog) touch() { w.last.Store(w.clock.Now().UnixNano()) }

// idle is the time since admission or the last progress.
func (w *watchdog) idle() time.Duration { return clock.Since(w.clock, time.Unix(0, w.last.Load())) }

// halt stops the watchdog (idempotent); a claim already in progress
// completes, and done fires when it has.
func (w *watchdog) halt() {
	w.stopped.Store(true)
	w.mu.Lock()
	pending := w.t != nil && w.t.Stop()
	w.mu.Unlock()
	if pending {
		w.finish() // the timer will not run: nothing is in progress
	}
}

// finish closes done, once.
func (w *watchdog) finish() { w.ended.Do(func() { close(w.done) }) }

// watchHooks are what a watchdog needs from its attempt.
type watchHooks interface {
	claim() bool                                      // fence the emitter; false if a terminal won
	cancelProvider()                                  // cancel the provider
	providerReturned() <-chan struct{}                // closed when the provider returned
	probe() execution.ProbeOutcome                    // bounded exact-target probe
	nextSeq() uint64                                  // next observation seq; 0 when unbound
	evidence(v stallVerdict) *execution.StallEvidence // assemble the evidence
	deliverStall(v stallVerdict)                      // deliver the terminal
	observeStall(v stallVerdict)                      // fire-and-forget observation
}

// start arms the watchdog. It handles a stall on the timer's goroutine;
// done fires once it is halted, or after a claimed stall's terminal was
// delivered.
func (w *watchdog) start(h watchHooks) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.h = h
	w.t = w.clock.AfterFunc(w.timeout, w.expire)
}

// expire runs when the timer fires: progress since it was armed re-arms
// it for the rest of the timeout; otherwise the stall is claimed.
func (w *watchdog) expire() {
	w.mu.Lock()
	if w.stopped.Load() {
		w.mu.Unlock()
		w.finish()
		return
	}
	idle := w.idle()
	if idle < w.timeout {
		w.t.Reset(w.timeout - idle)
		w.mu.Unlock()
		return
	}
	w.mu.Unlock()
	defer w.finish()
	if !w.h.claim() {
		return // the provider terminal won the race
	}
	w.claimed.Store(true)
	w.handleStall(idle, w.h)
}

// handleStall joins the fence and the probe, then delivers the terminal.
func (w *watchdog) handleStall(idle time.Duration, h watchHooks) {
	h.cancelProvider()
	var (
		wg      sync.WaitGroup
		fence   execution.AttemptFence
		outcome execution.ProbeOutcome
	)
	wg.Go(func() {
		graceOver, g := clock.After(w.clock, w.grace)
		defer g.Stop()
		select {
		case <-h.providerReturned():
			fence = execution.AttemptFenceConfirmed
		case <-graceOver:
			fence = execution.AttemptFenceUnconfirmed
		}
	})
	wg.Go(func() { outcome = h.probe() })
	wg.Wait()

	v := stallVerdict{idle: idle, health: execution.NormalizeProbeOutcome(outcome), fence: fence, seq: h.nextSeq()}
	v.evidence = h.evidence(v)
	h.deliverStall(v)
	h.observeStall(v)
}

// stallEvidence is the typed evidence of v for the attempt id: the
// joined verdict and the attempt's authoritative identity.
func stallEvidence(v stallVerdict, id attemptIdentity) *execution.StallEvidence {
	return &execution.StallEvidence{Health: v.health.Status(), Classification: v.health, IdleMS: uint64(max(v.idle.Milliseconds(), 0)),
		RunID: id.RunID, AttemptID: id.AttemptID, Adapter: id.Adapter, Target: id.Target, Fence: v.fence, Seq: v.seq}
}
