package streamgate

import (
	"slices"
	"strings"

	"github.com/iopgw/iop/execution"
)

// avoidance is the request's stall evidence: the providers that stalled
// on it, and whether each came with exact available evidence. It applies
// to every later attempt of the request, whatever model it is for
// (contract: the stalled provider is used again only on exact available
// evidence), so every dispatch and every candidate count passes through
// bind. The request owns one; not safe for concurrent use.
type avoidance struct {
	stalled   []stallMark   // in the order they stalled
	condemned []condemnMark // providers that could not be reached
}

// condemnMark is a provider that could not be reached while serving model.
type condemnMark struct{ provider, model string }

// condemn excludes provider from the request's attempts on every other
// model: a connect-level failure (refused, reset before an answer,
// unreachable, its node gone) says the provider cannot serve any model
// now. The model it failed on keeps its retry policy (a retry after a
// backoff may find it restarted).
func (a *avoidance) condemn(provider, model string) {
	m := condemnMark{provider, strings.ToLower(model)}
	if provider != "" && !slices.Contains(a.condemned, m) {
		a.condemned = append(a.condemned, m)
	}
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

// bind returns dreq with the request's evidence applied: the latest
// stalled provider is the avoided one (kept only as a fallback, and only
// on exact available evidence); earlier stalled providers without
// available evidence, and condemned providers, are excluded outright. Anything dreq itself set for
// avoidance is replaced: the request's evidence is the one rule.
func (a *avoidance) bind(dreq DispatchRequest) DispatchRequest {
	var extra []string
	for _, c := range a.condemned {
		if c.model != strings.ToLower(dreq.Model) && !slices.Contains(dreq.Exclude, c.provider) && !slices.Contains(extra, c.provider) {
			extra = append(extra, c.provider)
		}
	}
	if n := len(a.stalled); n > 0 {
		last := a.stalled[n-1]
		dreq.AvoidProviderID, dreq.AllowAvoidedProviderFallback = last.provider, last.available
	}
	for _, m := range a.stalled[:max(0, len(a.stalled)-1)] {
		if !m.available && !slices.Contains(dreq.Exclude, m.provider) && !slices.Contains(extra, m.provider) {
			extra = append(extra, m.provider)
		}
	}
	if len(extra) > 0 {
		dreq.Exclude = append(append([]string(nil), dreq.Exclude...), extra...)
	}
	return dreq
}

// condemns reports whether o is a connect-level failure, which condemns
// its provider for the request's other models: its server could not be
// reached at all (connection refused, DNS, TLS, the network), or the node
// lost the provider or never took the work. A reset or a timeout after
// the connection was made may be the model's alone, and condemns only the
// (provider, model) target.
func condemns(o outcome) bool {
	switch {
	case o.kind == outTransport:
		return o.cause == causeGone || o.cause == causeDispatch
	case o.kind == outUpstream, o.kind == outAbnormal:
		u := o.upstream
		if u == nil || u.Status != 0 || o.producedOutput {
			return false
		}
		switch u.Code {
		case "upstream_refused", "upstream_dns", "upstream_tls", "upstream_unreachable":
			return true
		}
	}
	return false
}
