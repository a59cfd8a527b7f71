package execution

import (
	"context"
	"errors"
)

// ProviderHealth is the stable normalized provider-health value a probe
// outcome maps to. It is what the stall terminal reports as
// liveness_classification.
type ProviderHealth string

// The ProviderHealth values. ProviderHealthUnknown is the fail-closed
// default.
const (
	ProviderHealthRequestStalled    ProviderHealth = "request_stalled"
	ProviderHealthProviderUnhealthy ProviderHealth = "provider_unhealthy"
	ProviderHealthUnknown           ProviderHealth = "health_unknown"
)

// Valid reports whether h is one of the three values.
func (h ProviderHealth) Valid() bool {
	switch h {
	case ProviderHealthRequestStalled, ProviderHealthProviderUnhealthy, ProviderHealthUnknown:
		return true
	}
	return false
}

// Status returns the availability that pairs with h in a stall terminal:
// request_stalled/available, provider_unhealthy/unavailable, and
// health_unknown/unknown (also for any invalid value).
func (h ProviderHealth) Status() HealthStatus {
	switch h {
	case ProviderHealthRequestStalled:
		return HealthAvailable
	case ProviderHealthProviderUnhealthy:
		return HealthUnavailable
	}
	return HealthUnknown
}

// HealthStatus is the three-way availability vocabulary used for the
// provider_health metadata value, the capabilities provider_status, and the
// edge's evidence: available, unavailable, unknown.
type HealthStatus string

// The HealthStatus values. HealthUnknown is the fail-closed default.
const (
	HealthAvailable   HealthStatus = "available"
	HealthUnavailable HealthStatus = "unavailable"
	HealthUnknown     HealthStatus = "unknown"
)

// Valid reports whether s is one of the three values.
func (s HealthStatus) Valid() bool {
	return s == HealthAvailable || s == HealthUnavailable || s == HealthUnknown
}

// NormalizeHealthStatus returns s when it is exactly one of the three
// values and HealthUnknown otherwise.
func NormalizeHealthStatus(s string) HealthStatus {
	if h := HealthStatus(s); h.Valid() {
		return h
	}
	return HealthUnknown
}

// LivenessClassification is the observable category a probe outcome
// reduces through.
type LivenessClassification string

// The LivenessClassification values.
const (
	LivenessAvailable        LivenessClassification = "available"
	LivenessUnavailable      LivenessClassification = "unavailable"
	LivenessTimeout          LivenessClassification = "timeout"
	LivenessError            LivenessClassification = "error"
	LivenessUnsupported      LivenessClassification = "unsupported"
	LivenessUnknown          LivenessClassification = "unknown"
	LivenessIdentityMismatch LivenessClassification = "identity_mismatch"
)

// AttemptFence reports whether the provider released ownership of an
// attempt within the close grace.
type AttemptFence string

// The AttemptFence values.
const (
	AttemptFenceConfirmed   AttemptFence = "confirmed"
	AttemptFenceUnconfirmed AttemptFence = "unconfirmed"
	AttemptFenceUnknown     AttemptFence = "unknown"
)

// Valid reports whether f is one of the three values.
func (f AttemptFence) Valid() bool {
	return f == AttemptFenceConfirmed || f == AttemptFenceUnconfirmed || f == AttemptFenceUnknown
}

// ProbeRequest names the exact target a probe checks.
type ProbeRequest struct {
	Adapter     string // adapter kind, e.g. ollama, openai, sim
	InstanceKey string // adapter instance key; pinned when non-empty
	Target      string // exact model/target name
}

// ProbeResult is what a provider reports about a probed target.
type ProbeResult struct {
	Adapter     string
	InstanceKey string
	Target      string
	Status      HealthStatus
}

// ProviderProber is implemented by adapters that can check whether an exact
// target is served. A definitive "not served" is Status unavailable with a
// nil error; failing to ask is an error.
type ProviderProber interface {
	ProbeTarget(ctx context.Context, req ProbeRequest) (ProbeResult, error)
}

// ProbeFunc is a resolved probe hook.
type ProbeFunc func(ctx context.Context, req ProbeRequest) (ProbeResult, error)

// ResolveProbeFunc returns p's probe hook, or nil when p does not implement
// ProviderProber. A nil hook makes a probe fail closed to health_unknown
// without invoking any endpoint.
func ResolveProbeFunc(p Provider) ProbeFunc {
	pr, ok := p.(ProviderProber)
	if !ok {
		return nil
	}
	return pr.ProbeTarget
}

// ProbeOutcome is the typed, target-aware input to classification: what
// was asked, what came back, and how the asking went.
type ProbeOutcome struct {
	Requested   ProbeRequest
	Result      ProbeResult
	Err         error // any error, including the probe context's
	Unsupported bool  // the adapter has no probe
}

// ClassifyProbeOutcome reduces o to a LivenessClassification. Unsupported
// adapters are unsupported; a returned error takes precedence over any
// reported status (timeout for deadline errors, error otherwise); an empty
// or mismatched adapter or target, or a pinned instance key that differs,
// is identity_mismatch; then the reported status decides, with anything but
// exactly available or unavailable being unknown.
func ClassifyProbeOutcome(o ProbeOutcome) LivenessClassification {
	switch {
	case o.Unsupported:
		return LivenessUnsupported
	case o.Err != nil && errors.Is(o.Err, context.DeadlineExceeded):
		return LivenessTimeout
	case o.Err != nil:
		return LivenessError
	case !identityMatches(o.Requested, o.Result):
		return LivenessIdentityMismatch
	}
	switch o.Result.Status {
	case HealthAvailable:
		return LivenessAvailable
	case HealthUnavailable:
		return LivenessUnavailable
	}
	return LivenessUnknown
}

func identityMatches(req ProbeRequest, res ProbeResult) bool {
	if req.Adapter == "" || req.Target == "" {
		return false
	}
	if res.Adapter != req.Adapter || res.Target != req.Target {
		return false
	}
	return req.InstanceKey == "" || res.InstanceKey == req.InstanceKey
}

// NormalizeProbeOutcome maps o to ProviderHealth: available →
// request_stalled; a validated matching unavailable → provider_unhealthy;
// everything else → health_unknown.
func NormalizeProbeOutcome(o ProbeOutcome) ProviderHealth {
	switch ClassifyProbeOutcome(o) {
	case LivenessAvailable:
		return ProviderHealthRequestStalled
	case LivenessUnavailable:
		return ProviderHealthProviderUnhealthy
	}
	return ProviderHealthUnknown
}
