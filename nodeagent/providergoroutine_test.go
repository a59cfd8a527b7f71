package nodeagent

import (
	"runtime"
	"testing"
	"time"
)

// waitIdle waits until want goroutines kept for providers wait.
func waitIdle(t *testing.T, a *Agent, want int) {
	t.Helper()
	deadline := time.Now().Add(defaultTestTimeout)
	for a.bridge.workers.Idle() != want {
		if time.Now().After(deadline) {
			t.Fatalf("%d provider goroutines waiting, want %d", a.bridge.workers.Idle(), want)
		}
		runtime.Gosched()
	}
}

// TestAttemptsOverTheNetworkReuseAProviderGoroutine: over the network an
// attempt's provider runs on its own goroutine; once it returned, that
// goroutine waits and runs the next attempt's provider, so attempts one
// after another keep one goroutine, not one each; the agent's end ends it.
func TestAttemptsOverTheNetworkReuseAProviderGoroutine(t *testing.T) {
	var agent *Agent
	t.Cleanup(func() { waitIdle(t, agent, 0) }) // after the link stopped (cleanups run last first)
	e := newFakeEdge()
	e.parkedAttempts = 2
	l := startLinkTo(t, e, baseConfig(simProvider("p1", SimConfig{})), Options{})
	agent = l.agent
	l.session(t)
	st := parkedStream(t, e)
	for i := range 4 {
		if err := st.stream.Send(runDown("p1", "iop-sim", 0)); err != nil {
			t.Fatal(err)
		}
		if evs := st.events(t); evs[len(evs)-1].GetType() != "complete" {
			t.Fatalf("attempt %d ended %v", i, evs[len(evs)-1])
		}
		if m, err := st.stream.Recv(); err != nil || !m.GetOpen().GetParked() {
			t.Fatalf("after attempt %d the node sent %v %v, want the stream parked again", i, m, err)
		}
		waitIdle(t, l.agent, 1)
	}
}
