package execution

import "strconv"

// StallEvidence is the typed evidence of a response_stalled failure, from
// the node's watchdog to the edge's decision. Its contract form is the
// allowlisted metadata map (StallMetadataKeys): built from it in one place
// (Metadata) and parsed into it in one place (ParseStallEvidence), at the
// wire boundary; everything between reads these fields.
type StallEvidence struct {
	// Health is provider_health: available, unavailable or unknown ("" when
	// absent or malformed).
	Health HealthStatus
	// Classification is liveness_classification ("" when absent or
	// malformed).
	Classification ProviderHealth
	// IdleMS is idle_duration_ms: how long the attempt made no progress.
	IdleMS uint64
	// RunID, AttemptID, Adapter and Target bind the stall to its attempt.
	RunID, AttemptID, Adapter, Target string
	// Fence is attempt_fence ("" when absent or malformed).
	Fence AttemptFence
	// Seq is health_observation_seq; 0 on unbound paths (the key absent).
	Seq uint64

	// The edge's annotations of a validated current bound stall; never on
	// a wire (CloneStallMetadata drops their keys).

	// ProviderID is the edge-owned provider id (provider_id).
	ProviderID string
	// HandoffConfirmed is recovery_handoff=confirmed: reception, lease
	// binding and the local fence are proven. It never authorizes retry.
	HandoffConfirmed bool
}

// The keys of the edge's annotations of a validated stall.
const (
	MetadataKeyProviderID      = "provider_id"
	MetadataKeyRecoveryHandoff = "recovery_handoff"
	RecoveryHandoffConfirmed   = "confirmed"
)

// Metadata is the contract form of e: its allowlisted keys with valid
// values (failure_code always response_stalled; idle_duration_ms with the
// classification the watchdog joins it with), plus the edge's
// annotations when set. Nil for nil e.
func (e *StallEvidence) Metadata() map[string]string {
	if e == nil {
		return nil
	}
	md := map[string]string{
		MetadataKeyProviderHealth: string(e.Health), MetadataKeyLivenessClassification: string(e.Classification),
		MetadataKeyRunID: e.RunID, MetadataKeyAttemptID: e.AttemptID, MetadataKeyAdapter: e.Adapter, MetadataKeyTarget: e.Target,
		MetadataKeyAttemptFence: string(e.Fence),
	}
	if e.Classification != "" {
		md[MetadataKeyIdleDurationMS] = strconv.FormatUint(e.IdleMS, 10)
	}
	if e.Seq != 0 {
		md[MetadataKeyHealthObservationSeq] = strconv.FormatUint(e.Seq, 10)
	}
	out := CloneStallMetadata(nil, md)
	if e.ProviderID != "" || e.HandoffConfirmed {
		if out == nil {
			out = map[string]string{MetadataKeyFailureCode: string(FailureCodeResponseStalled)}
		}
		if e.ProviderID != "" {
			out[MetadataKeyProviderID] = e.ProviderID
		}
		if e.HandoffConfirmed {
			out[MetadataKeyRecoveryHandoff] = RecoveryHandoffConfirmed
		}
	}
	return out
}

// ParseStallEvidence reads the contract form of stall evidence: only
// allowlisted keys with valid values are taken (anything else is as if
// absent); the edge's annotations never are (a node cannot set them).
// Nil for a nil or empty map.
func ParseStallEvidence(md map[string]string) *StallEvidence {
	if len(md) == 0 {
		return nil
	}
	valid := func(k string) string {
		if v, ok := md[k]; ok && validMetadataValue(k, v) {
			return v
		}
		return ""
	}
	e := &StallEvidence{Health: HealthStatus(valid(MetadataKeyProviderHealth)),
		Classification: ProviderHealth(valid(MetadataKeyLivenessClassification)),
		RunID:          valid(MetadataKeyRunID), AttemptID: valid(MetadataKeyAttemptID),
		Adapter: valid(MetadataKeyAdapter), Target: valid(MetadataKeyTarget), Fence: AttemptFence(valid(MetadataKeyAttemptFence))}
	e.IdleMS, _ = strconv.ParseUint(valid(MetadataKeyIdleDurationMS), 10, 64)
	e.Seq, _ = strconv.ParseUint(valid(MetadataKeyHealthObservationSeq), 10, 64)
	return e
}
