package nodeagent

import (
	"errors"
	"testing"
	"time"

	"github.com/iopgw/iop/execution"
	"github.com/iopgw/iop/internal/testing/clocktest"
	"github.com/iopgw/iop/internal/testing/wait"
)

// TestWatchdogOnItsClock: the watchdog's idle time, timer and close grace
// run on its injected clock — progress re-arms it for the rest of the
// timeout, the stall is claimed exactly when the attempt has been idle
// for the whole timeout, and the evidence says how long.
func TestWatchdogOnItsClock(t *testing.T) {
	clk := clocktest.New()
	const timeout = 300 * time.Second
	w := newWatchdog(timeout, time.Second, clk)
	released := make(chan struct{})
	close(released) // the provider returns at once when cancelled
	var got []stallVerdict
	claims := 0
	w.start(&funcHooks{
		onClaim:  func() bool { claims++; return true },
		released: released,
		onProbe:  func() execution.ProbeOutcome { return execution.ProbeOutcome{Err: errors.New("no answer")} },
		onFinish: func(v stallVerdict) { got = append(got, v) },
		onEvidence: func(v stallVerdict) *execution.StallEvidence {
			return stallEvidence(v, attemptIdentity{RunID: "run_1", AttemptID: "att_1", Adapter: "sim", Target: "m"})
		},
	})
	clk.Advance(299 * time.Second)
	w.touch() // progress at 299 s
	clk.Advance(299 * time.Second)
	if claims != 0 || finished(w) {
		t.Fatalf("stalled %d times after 299 s idle", claims)
	}
	clk.Advance(time.Second) // idle for exactly the timeout
	if claims != 1 || len(got) != 1 {
		t.Fatalf("claims %d, verdicts %d; want one stall at the timeout", claims, len(got))
	}
	v := got[0]
	if v.idle != timeout || v.fence != execution.AttemptFenceConfirmed || v.health != execution.ProviderHealthUnknown {
		t.Fatalf("verdict idle %v fence %s health %s", v.idle, v.fence, v.health)
	}
	if ev := v.evidence; ev.IdleMS != 300000 || ev.Target != "m" || ev.Fence != execution.AttemptFenceConfirmed {
		t.Fatalf("evidence %+v", ev)
	}
	if !finished(w) || clk.Pending() != 0 {
		t.Fatalf("done %v, %d timers still armed", finished(w), clk.Pending())
	}
	w.halt()
}

// TestWatchdogGraceOnItsClock: a provider that ignores its cancel leaves
// the fence unconfirmed once the close grace has passed on the clock.
func TestWatchdogGraceOnItsClock(t *testing.T) {
	clk := clocktest.New()
	w := newWatchdog(time.Second, 5*time.Second, clk)
	done := make(chan stallVerdict, 1)
	w.start(&funcHooks{
		onClaim: func() bool { return true }, released: make(chan struct{}), // never returns
		onProbe:    func() execution.ProbeOutcome { return execution.ProbeOutcome{Unsupported: true} },
		onFinish:   func(v stallVerdict) { done <- v },
		onEvidence: func(v stallVerdict) *execution.StallEvidence { return stallEvidence(v, attemptIdentity{}) },
	})
	// The start is read before the advance: read after it, the wait below
	// could never end. The stall's handler then waits for the grace (the
	// only timer left).
	start := clk.Now()
	go clk.Advance(time.Second)
	wait.Until(t, func() bool { return clk.Now().Sub(start) >= time.Second && clk.Pending() == 1 }) // the grace timer is armed
	select {
	case <-done:
		t.Fatal("the fence was decided before the close grace passed")
	default:
	}
	clk.Advance(5 * time.Second)
	if v := <-done; v.fence != execution.AttemptFenceUnconfirmed || v.evidence.Fence != execution.AttemptFenceUnconfirmed {
		t.Fatalf("fence %s", v.fence)
	}
}

// funcHooks are watchHooks made of functions, for a watchdog under test.
type funcHooks struct {
	onClaim    func() bool
	released   chan struct{}
	onProbe    func() execution.ProbeOutcome
	onFinish   func(v stallVerdict)
	onEvidence func(v stallVerdict) *execution.StallEvidence
}

func (h *funcHooks) claim() bool                                      { return h.onClaim() }
func (h *funcHooks) cancelProvider()                                  {}
func (h *funcHooks) providerReturned() <-chan struct{}                { return h.released }
func (h *funcHooks) probe() execution.ProbeOutcome                    { return h.onProbe() }
func (h *funcHooks) nextSeq() uint64                                  { return 0 }
func (h *funcHooks) evidence(v stallVerdict) *execution.StallEvidence { return h.onEvidence(v) }
func (h *funcHooks) deliverStall(v stallVerdict)                      { h.onFinish(v) }
func (h *funcHooks) observeStall(stallVerdict)                        {}

// finished reports whether w's done is closed.
func finished(w *watchdog) bool {
	select {
	case <-w.done:
		return true
	default:
		return false
	}
}
