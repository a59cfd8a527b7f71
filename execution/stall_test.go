package execution

import (
	"reflect"
	"testing"
)

// TestStallEvidenceRoundTrip: the contract form built from the evidence
// parses back into the same evidence, and carries the allowlisted keys.
func TestStallEvidenceRoundTrip(t *testing.T) {
	e := &StallEvidence{Health: HealthUnavailable, Classification: ProviderHealthProviderUnhealthy, IdleMS: 300000, RunID: "run_1",
		AttemptID: "att_1", Adapter: "ollama", Target: "llama3.2", Fence: AttemptFenceConfirmed, Seq: 7}
	md := e.Metadata()
	want := map[string]string{"failure_code": "response_stalled", "provider_health": "unavailable", "liveness_classification": "provider_unhealthy",
		"idle_duration_ms": "300000", "run_id": "run_1", "attempt_id": "att_1", "adapter": "ollama", "target": "llama3.2",
		"attempt_fence": "confirmed", "health_observation_seq": "7"}
	if !reflect.DeepEqual(md, want) {
		t.Fatalf("metadata %v, want %v", md, want)
	}
	if got := ParseStallEvidence(md); !reflect.DeepEqual(got, e) {
		t.Fatalf("parsed %+v, want %+v", got, e)
	}
	if (&StallEvidence{Fence: AttemptFenceConfirmed}).Metadata()[MetadataKeyHealthObservationSeq] != "" {
		t.Fatal("an unbound stall names a sequence")
	}
}

// TestStallEvidenceParseIsStrict: malformed values are as if absent, and
// what only the edge may say (the handoff, its provider id) is never
// taken from a wire.
func TestStallEvidenceParseIsStrict(t *testing.T) {
	e := ParseStallEvidence(map[string]string{"provider_health": "down", "liveness_classification": "REQUEST_STALLED",
		"attempt_fence": "maybe", "health_observation_seq": "-1", "idle_duration_ms": "soon", "target": "has space",
		"recovery_handoff": "confirmed", "provider_id": "n/forged", "recovery_eligible": "true"})
	if *e != (StallEvidence{}) {
		t.Fatalf("parsed %+v from malformed or forged metadata", e)
	}
	if ParseStallEvidence(nil) != nil {
		t.Fatal("evidence from nothing")
	}
	edge := &StallEvidence{Fence: AttemptFenceConfirmed, Health: HealthAvailable, ProviderID: "n1/a", HandoffConfirmed: true}
	md := edge.Metadata()
	if md[MetadataKeyRecoveryHandoff] != RecoveryHandoffConfirmed || md[MetadataKeyProviderID] != "n1/a" {
		t.Fatalf("edge annotations missing: %v", md)
	}
	if got := CloneStallMetadata(md, nil); got[MetadataKeyRecoveryHandoff] != "" || got[MetadataKeyProviderID] != "" {
		t.Fatalf("edge annotations would cross a wire: %v", got)
	}
}
