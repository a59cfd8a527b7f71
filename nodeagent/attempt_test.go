package nodeagent

import (
	"testing"

	"github.com/iopgw/iop/execution"
)

// TestAdmissionBookkeeping: a run's admitted attempts are each cancelled
// by CancelRun and counted in flight until released, whichever order
// they are released in; a released run is forgotten.
func TestAdmissionBookkeeping(t *testing.T) {
	b := NewBridge(BridgeConfig{Registry: execution.NewRegistry()})
	cancelled := map[string]int{}
	admit := func(run, attempt, provider string) *attemptState {
		a := &attemptState{id: attemptIdentity{RunID: run, AttemptID: attempt}, provider: provider}
		a.cancel = func() { cancelled[attempt]++ }
		b.admit(a)
		return a
	}
	first, second, third := admit("run_1", "a1", "p"), admit("run_1", "a2", "p"), admit("run_1", "a3", "q")
	other := admit("run_2", "b1", "p")
	if n, _ := b.CancelRun("run_1"); n != 3 || cancelled["a1"] != 1 || cancelled["a2"] != 1 || cancelled["a3"] != 1 || cancelled["b1"] != 0 {
		t.Fatalf("CancelRun(run_1) cancelled %d: %v", n, cancelled)
	}
	if got := b.InFlight(); got["p"] != 3 || got["q"] != 1 {
		t.Fatalf("in flight %v", got)
	}
	for i, a := range []*attemptState{second, third, first} { // the middle, the head, the last
		b.release(a)
		if n, _ := b.CancelRun("run_1"); n != 2-i {
			t.Fatalf("after %d releases CancelRun(run_1) cancelled %d", i+1, n)
		}
	}
	if _, ok := b.runs["run_1"]; ok {
		t.Fatal("a released run is still known")
	}
	if n, _ := b.CancelRun("run_2"); n != 1 {
		t.Fatalf("CancelRun(run_2) cancelled %d", n)
	}
	b.release(other)
	if got := b.InFlight(); got["p"] != 0 || got["q"] != 0 || len(b.runs) != 0 {
		t.Fatalf("in flight %v, runs %d after every release", got, len(b.runs))
	}
}
