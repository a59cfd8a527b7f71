package streamgate

import "testing"

// TestReplayGate is the contract's gate, every input, the expected column
// written by hand (not derived from the implementation).
func TestReplayGate(t *testing.T) {
	stall := func(confirmed, fence bool) outcome {
		return outcome{kind: outStall, confirmed: confirmed, fenceSeen: fence}
	}
	plain := outcome{kind: outUpstream}
	tests := []struct {
		name                                       string
		committed, cancelled, sideEffect, snapshot bool
		o                                          outcome
		want                                       string
	}{
		{"uncommitted failure, all clear", false, false, false, true, plain, ""},
		{"confirmed stall, all clear", false, false, false, true, stall(true, true), ""},
		{"committed", true, false, false, true, plain, "post_commit"},
		{"committed stall", true, false, false, true, stall(true, true), "post_commit"},
		{"committed and cancelled", true, true, false, true, plain, "post_commit"},
		{"cancelled", false, true, false, true, plain, "caller_cancelled"},
		{"cancelled with side effects", false, true, true, true, plain, "caller_cancelled"},
		{"side effects", false, false, true, true, plain, "tool_side_effect"},
		{"side effects, unconfirmed stall", false, false, true, true, stall(false, true), "tool_side_effect"},
		{"unconfirmed stall, fence seen", false, false, false, true, stall(false, true), "unconfirmed_fence"},
		{"unconfirmed stall, no fence", false, false, false, true, stall(false, false), "no_owner"},
		{"no snapshot", false, false, false, false, plain, "other"},
		{"no snapshot, confirmed stall", false, false, false, false, stall(true, true), "other"},
		{"no snapshot, unconfirmed stall", false, false, false, false, stall(false, false), "no_owner"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := replayGate(tt.committed, tt.cancelled, tt.sideEffect, tt.snapshot, tt.o); got != tt.want {
				t.Fatalf("replayGate = %q, want %q", got, tt.want)
			}
		})
	}
}
