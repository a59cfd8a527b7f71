package streamgate

import (
	"slices"

	"github.com/iopgw/iop/execution"
)

// avoidance is the request's stall evidence: the providers that stalled
// on it, and whether each came with exact available evidence. It applies
// to every later attempt of the request, whatever model it is for
// (contract: the stalled provider is used again only on exact available
// evidence), so every dispatch and every candidate count passes through
// bind. The request owns one; not safe for concurrent use.
type avoidance struct {
	stalled []stallMark // in the order they stalled
}

type stallMark struct {
	provider  string
	available bool // the stall's handoff carried health=available
}

// stall records that provider stalled with the given handoff health.
// A later stall of the same provider replaces its mark (its newest
// evidence counts).
func (a *avoidance) stall(provider string, health execution.HealthStatus) {
	if provider == "" {
		return
	}
	for i, m := range a.stalled {
		if m.provider == provider {
			a.stalled = append(a.stalled[:i], a.stalled[i+1:]...)
			break
		}
	}
	a.stalled = append(a.stalled, stallMark{provider: provider, available: health == execution.HealthAvailable})
}

// bind returns dreq with the request's stall evidence applied: the latest
// stalled provider is the avoided one (kept only as a fallback, and only
// on exact available evidence); earlier stalled providers without
// available evidence are excluded outright. Anything dreq itself set for
// avoidance is replaced: the request's evidence is the one rule.
func (a *avoidance) bind(dreq DispatchRequest) DispatchRequest {
	n := len(a.stalled)
	if n == 0 {
		return dreq
	}
	last := a.stalled[n-1]
	dreq.AvoidProviderID, dreq.AllowAvoidedProviderFallback = last.provider, last.available
	var extra []string
	for _, m := range a.stalled[:n-1] {
		if !m.available && !slices.Contains(dreq.Exclude, m.provider) {
			extra = append(extra, m.provider)
		}
	}
	if len(extra) > 0 {
		dreq.Exclude = append(append([]string(nil), dreq.Exclude...), extra...)
	}
	return dreq
}
