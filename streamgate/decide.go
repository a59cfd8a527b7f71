package streamgate

import (
	"context"
	"net/http"
	"slices"
	"time"

	"github.com/iopgw/iop/codec/openai"
)

// next decides what follows an attempt's outcome: another attempt (dreq
// updated, true) or the end of the request (the terminal written, false).
func (rt *runtime) next(ctx context.Context, o outcome, dreq *DispatchRequest) bool {
	switch o.kind {
	case outSuccess:
		return false
	case outCancelled:
		clientCancelledTotal.Inc()
		return false
	case outStall:
		return rt.stallCycle(ctx, o, dreq)
	case outShutdown:
		rt.fail(ctx, &openai.Error{Status: http.StatusServiceUnavailable, Type: openai.TypeServiceUnavailable, Code: "server_shutting_down",
			Message: "The gateway is shutting down; the response is incomplete. Please retry."}, &o)
		return false
	case outFiltered:
		rt.fail(ctx, &openai.Error{Status: http.StatusBadRequest, Type: openai.TypeInvalidRequest, Code: "content_filter",
			Message: "The response was blocked by the gateway's content filter."}, &o)
		return false
	}
	return rt.failover(ctx, o, dreq)
}

// stallCycle is one liveness recovery cycle: decide eligibility for exact
// replay, record it, and either re-admit through the pool (avoiding the
// stalled provider) or end the request with a typed terminal.
func (rt *runtime) stallCycle(ctx context.Context, o outcome, dreq *DispatchRequest) bool {
	state := rt.resp.State()
	next := *dreq
	next.AvoidProviderID, next.AllowAvoidedProviderFallback = o.providerID, o.health == "available"
	cand := rt.cfg.Dispatcher.Candidates(next)
	if cand.Alternates == 0 && state == TransportUncommitted {
		// No other provider of this model: the next fallback model gets
		// the request before the stalled provider does again (a provider
		// silent for a whole stall timeout is the worst candidate).
		if fb := *dreq; rt.fallback(&fb) {
			// Still avoiding the stalled provider, which may serve the
			// fallback model too (the contract's evidence rule holds).
			fb.AvoidProviderID, fb.AllowAvoidedProviderFallback = o.providerID, o.health == "available"
			next, cand = fb, rt.cfg.Dispatcher.Candidates(fb)
		}
	}
	eligibility := rt.stallEligibility(ctx, o, state, cand)
	// The contract's recovery rows carry provider_health=unknown: health
	// lives in this request-local state, not in the observation.
	rt.obs.eligibility(o.path, "unknown", state, eligibility)
	if eligibility != EligibilityEligible {
		rt.obs.result(o.path, "unknown", state, ResultTerminal)
		e := stalledError()
		if eligibility == EligibilityBudgetExhausted {
			e = budgetError()
		}
		rt.fail(ctx, e, &o)
		return false
	}
	rt.cyclePending, rt.cyclePath = true, o.path
	replaysTotal.WithLabelValues(ReasonPreCommitStall).Inc()
	*dreq = next
	return true
}

// stallEligibility applies the gate to a stall, in the contract's
// vocabulary. It takes a budget slot when eligible.
func (rt *runtime) stallEligibility(ctx context.Context, o outcome, state CommitState, cand Candidates) string {
	switch {
	case state != TransportUncommitted:
		return EligibilityPostCommit
	case ctx.Err() != nil:
		return EligibilityCallerCancelled
	case rt.sawToolCall || rt.req.SideEffects:
		return EligibilityToolSideEffect
	case !o.confirmed && o.fenceSeen:
		return EligibilityUnconfirmedFence
	case !o.confirmed:
		return EligibilityNoOwner
	case rt.req.Snapshot == nil:
		return EligibilityOther
	case cand.Alternates == 0 && cand.AvoidedOnly && o.health != "available":
		return EligibilitySameProviderForbidden
	case cand.Alternates == 0 && !cand.AvoidedOnly:
		return EligibilityNoCandidate
	}
	if !rt.takeBudget() {
		return EligibilityBudgetExhausted
	}
	return EligibilityEligible
}

// takeBudget takes one replay from the per-request cap and the shared
// budget.
func (rt *runtime) takeBudget() bool {
	if rt.attempts >= rt.cfg.MaxAttempts {
		budgetExhaustedTotal.Inc()
		return false
	}
	release, ok := rt.cfg.Budget.TryAcquire()
	if !ok {
		budgetExhaustedTotal.Inc()
		return false
	}
	rt.releaseBudget = release
	return true
}

// failover handles pre-commit failures: a lost node link, a provider that
// went away, an abnormal upstream end, 5xx and 429 move to another
// provider of the model — or, when it has none, to its next fallback model
// — after a jittered backoff (a 429's Retry-After honoured within bounds),
// under the same gate and budget as a stall replay. The same provider is
// tried again only after a lost node link or a vanished provider (no HTTP
// answer was given); an upstream's own 5xx or 429 with nowhere else to go
// is passed to the client unchanged, whose SDK retries it (retrying here
// too would multiply attempts). 4xx answers are final and consume no
// budget; context_length_exceeded may move to a fallback model, never the
// same one.
func (rt *runtime) failover(ctx context.Context, o outcome, dreq *DispatchRequest) bool {
	rt.lastFail = &o
	reason, retryable := failoverReason(o)
	if o.kind == outUpstream && o.upstream != nil && o.upstream.Code == "context_length_exceeded" && len(rt.models) > 0 {
		reason, retryable = ReasonContextLength, true
	}
	committed := rt.resp.State() != TransportUncommitted
	if !retryable || committed || ctx.Err() != nil || rt.sawToolCall || rt.req.SideEffects || rt.req.Snapshot == nil {
		rt.fail(ctx, nil, &o)
		return false
	}
	next := *dreq
	failed := append(slices.Clone(dreq.Exclude), o.providerID)
	alternates := rt.cfg.Dispatcher.Candidates(DispatchRequest{Model: dreq.Model, Need: dreq.Need, Work: dreq.Work, Exclude: failed}).Alternates
	sameProviderOK := reason == ReasonTransport || reason == ReasonUnavailable
	switch {
	case reason == ReasonContextLength:
		if !rt.fallback(&next) {
			rt.fail(ctx, nil, &o)
			return false
		}
	case alternates > 0:
		// Another provider of the model not yet failed in this request.
		next.AvoidProviderID, next.AllowAvoidedProviderFallback, next.Exclude = "", false, failed
	case rt.fallback(&next):
		// The model's next fallback.
	case sameProviderOK:
		next.AvoidProviderID, next.AllowAvoidedProviderFallback = o.providerID, true
	default:
		rt.fail(ctx, nil, &o)
		return false
	}
	if !rt.takeBudget() {
		rt.fail(ctx, budgetError(), &o)
		return false
	}
	wait := rt.backoff(rt.attempts)
	if o.upstream != nil && o.upstream.RetryAfterMS > 0 {
		ra := time.Duration(o.upstream.RetryAfterMS) * time.Millisecond
		if ra > rt.cfg.MaxRetryAfter {
			rt.endBudget()
			rt.fail(ctx, nil, &o)
			return false
		}
		wait = max(wait, ra)
	}
	replaysTotal.WithLabelValues(reason).Inc()
	if !rt.sleep(ctx, wait) {
		clientCancelledTotal.Inc()
		return false
	}
	*dreq = next
	return true
}

// failoverReason classifies an outcome for failover.
func failoverReason(o outcome) (string, bool) {
	switch o.kind {
	case outTransport:
		if o.code == "provider_unavailable" {
			return ReasonUnavailable, true
		}
		return ReasonTransport, o.code != "response_stalled"
	case outAbnormal:
		return ReasonAbnormalEnd, true
	case outUpstream:
		switch s := o.upstream.Status; {
		case s == http.StatusTooManyRequests:
			return ReasonUpstream429, true
		case s >= 500:
			return ReasonUpstream5xx, true
		}
	}
	return "", false
}

func stalledError() *openai.Error {
	return &openai.Error{Status: http.StatusGatewayTimeout, Type: openai.TypeUpstream, Code: "response_stalled",
		Message: "The provider stopped producing output and the request could not be replayed."}
}

func budgetError() *openai.Error {
	return &openai.Error{Status: http.StatusServiceUnavailable, Type: openai.TypeServiceUnavailable, Code: "retry_budget_exhausted",
		Message: "The provider failed and the gateway's retry budget is exhausted. Please retry later."}
}
