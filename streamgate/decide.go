package streamgate

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/iopgw/iop/codec/openai"
	"github.com/iopgw/iop/execution"
)

// next decides what follows an attempt's outcome: another attempt (dreq
// updated, true) or the end of the request (the terminal written, false).
// It takes the outcome by pointer: what run passes to it is in run's
// frame, which is under every attempt's wait.
func (rt *runtime) next(ctx context.Context, op *outcome, dreq *DispatchRequest) bool {
	o := *op
	switch o.kind {
	case outSuccess:
		return false
	case outCancelled:
		if o.slowClient() {
			rt.cfg.Metrics.slowClientCuts.Inc()
			rt.sum.Outcome = "slow_client_cut"
		} else {
			rt.cfg.Metrics.clientCancelled.Inc()
			rt.sum.Outcome = "client_cancelled"
		}
		return false
	case outShutdown:
		rt.fail(ctx, &openai.Error{Status: http.StatusServiceUnavailable, Type: openai.TypeServiceUnavailable, Code: codeShuttingDown,
			Message: "The gateway is shutting down; the response is incomplete. Please retry."}, &o)
		return false
	case outFiltered:
		rt.fail(ctx, &openai.Error{Status: http.StatusBadRequest, Type: openai.TypeInvalidRequest, Code: codeContentFilter,
			Message: "The response was blocked by the gateway's content filter."}, &o)
		return false
	case outDiverged:
		rt.cfg.Metrics.resumes.WithLabelValues("diverged").Inc()
		rt.cfg.Log.Info("resuming a cut stream failed: the regeneration diverged", "resume", "diverged", "delivered_bytes", rt.rs.text.Len())
		rt.endResume()
		rt.fail(ctx, divergedError(), &o)
		return false
	}
	if condemns(o) {
		rt.avoid.condemn(o.providerID, dreq.Model) // it cannot be reached: no other model of it either
	}
	if o.kind == outStall {
		health := execution.HealthUnknown
		if o.confirmed {
			health = o.health // only a confirmed handoff carries evidence
		}
		rt.avoid.stall(o.providerID, health)
	}
	if rt.resp.State() != TransportUncommitted {
		if rt.resume(ctx, o, dreq) {
			return true
		}
		if rt.rs.cut != nil {
			o = *rt.rs.cut // a refused continuation is never the client's error
		}
	} else {
		rt.rs.text.Reset() // held output was discarded: the client has none
	}
	return rt.failover(ctx, o, dreq)
}

// replayGate is the contract's exact-replay gate, for every pre-commit
// failure (stall or not): "" when a replay may be considered, else the
// eligibility that forbids it. Candidates and budget come after it.
func replayGate(committed, cancelled, sideEffect, snapshot bool, o outcome) string {
	switch {
	case committed:
		return eligibilityPostCommit
	case cancelled:
		return eligibilityCallerCancelled
	case sideEffect:
		return eligibilityToolSideEffect
	case o.kind == outStall && !o.confirmed && o.fenceSeen:
		return eligibilityUnconfirmedFence
	case o.kind == outStall && !o.confirmed:
		return eligibilityNoOwner
	case !snapshot:
		return eligibilityOther
	}
	return ""
}

// route is where a failed request goes next.
type route int

const (
	routeEnd      route = iota // the client gets the failure
	routeOther                 // another provider of the model, at once
	routeSame                  // the same provider again, after a backoff
	routeFallback              // the next fallback model, at once
)

// failover handles a pre-commit failure under the model's retry policy:
// retries on the model (another provider not yet failed in this request
// first, the same provider after a backoff when it is the only one), then
// the fallback chain, each move through the contract's gate, the
// request's attempt cap and the shared budget. What cannot move on is
// answered: the upstream's own error, or a typed one naming what ran out.
func (rt *runtime) failover(ctx context.Context, o outcome, dreq *DispatchRequest) bool {
	rt.lastFail = &o
	class := classify(o)
	stall := o.kind == outStall
	elig := replayGate(rt.resp.State() != TransportUncommitted, ctx.Err() != nil, rt.sawToolCall || rt.req.SideEffects,
		rt.req.Snapshot != nil, o)
	next := *dreq
	r, wait := routeEnd, time.Duration(0)
	if elig == "" && class != ClassNone {
		r, wait = rt.route(class, rt.policy(dreq.Model), o, &next)
		if r == routeEnd && stall {
			elig = eligibilityNoCandidate
			if o.health != execution.HealthAvailable {
				elig = eligibilitySameProviderForbidden
			}
		}
	}
	var exhausted *openai.Error
	if r != routeEnd {
		if exhausted = rt.takeBudget(o); exhausted != nil {
			r, elig = routeEnd, eligibilityBudgetExhausted
		}
	}
	if stall {
		rt.stallObserved(o, cmpOr(elig, eligibilityEligible))
	}
	if r == routeEnd {
		rt.failEnd(ctx, exhausted, o)
		return false
	}
	rt.countMove(r, class)
	if wait > 0 && !rt.sleep(ctx, wait) {
		rt.cfg.Metrics.clientCancelled.Inc()
		rt.sum.Outcome = "client_cancelled"
		return false
	}
	*dreq = next
	return true
}

// route decides the next move for a retryable (or fallback-able) class,
// updating dreq. It never takes budget.
func (rt *runtime) route(class FailureClass, pol RetryPolicy, o outcome, dreq *DispatchRequest) (route, time.Duration) {
	failed := append(slices.Clone(dreq.Exclude), o.providerID)
	available := o.health == execution.HealthAvailable
	onModel := pol.RetryOn.Has(class) && rt.modelRetries < pol.Retries
	switch class {
	case ClassContentPolicy:
		if !pol.FallbackOnContentPolicy {
			return routeEnd, 0
		}
		onModel = false
	case ClassContextLength:
		onModel = false
	}
	ra := retryAfter(o)
	if ra > pol.MaxRetryAfter {
		// The provider asked for more time than we wait: not again here.
		onModel = onModel && rt.others(dreq, failed) > 0
	}
	if onModel && rt.others(dreq, failed) > 0 {
		rt.modelRetries++
		dreq.Exclude = failed
		if class == ClassStall {
			// The contract's re-admission: the stalled provider is not
			// excluded but avoided (rt.avoid), kept only on exact
			// available evidence.
			dreq.Exclude = slices.DeleteFunc(failed, func(id string) bool { return id == o.providerID })
		}
		return routeOther, 0
	}
	// A silent target (a stall, a first-token timeout) is the worst
	// candidate: the fallback chain comes before it.
	silent := class == ClassStall || class == ClassFirstTokenTimeout
	if onModel && !silent {
		rt.modelRetries++
		dreq.Exclude = slices.DeleteFunc(failed, func(id string) bool { return id == o.providerID })
		return routeSame, max(pol.backoff(rt.modelRetries, class), ra)
	}
	if rt.fallback(dreq) {
		// A provider silent for a whole stall timeout stays the worst
		// candidate on the fallback model too: rt.avoid binds every
		// dispatch of the request.
		return routeFallback, 0
	}
	if onModel && class == ClassFirstTokenTimeout {
		// Nothing else can serve: the silent target again, after a
		// backoff (a first-token timeout is not the contract's stall, so
		// no health evidence is needed).
		rt.modelRetries++
		dreq.Exclude = slices.DeleteFunc(failed, func(id string) bool { return id == o.providerID })
		return routeSame, pol.backoff(rt.modelRetries, class)
	}
	if onModel && available {
		// A stall, no other provider and no fallback left: the same
		// provider, only on exact available evidence.
		rt.modelRetries++
		dreq.Exclude = slices.DeleteFunc(failed, func(id string) bool { return id == o.providerID })
		return routeSame, 0
	}
	return routeEnd, 0
}

// others counts the model's eligible providers outside failed.
func (rt *runtime) others(dreq *DispatchRequest, failed []string) int {
	return rt.candidates(DispatchRequest{Model: dreq.Model, Need: dreq.Need, Work: dreq.Work, Exclude: failed, Prefill: dreq.Prefill, Pin: dreq.Pin}).Alternates
}

// policy is the retry policy of model.
func (rt *runtime) policy(model string) RetryPolicy {
	if rt.cfg.Policy != nil {
		return rt.cfg.Policy(model)
	}
	return DefaultRetryPolicy()
}

// takeBudget takes one more attempt from the request's cap and the shared
// budget; the error names the one that ran out.
func (rt *runtime) takeBudget(o outcome) *openai.Error {
	if rt.attempts >= rt.cfg.MaxAttempts {
		rt.cfg.Metrics.budgetExhausted.Inc()
		return attemptsError(rt.cfg.MaxAttempts, o)
	}
	release, ok := rt.cfg.Budget.TryAcquire()
	if !ok {
		rt.cfg.Metrics.budgetExhausted.Inc()
		return budgetError()
	}
	rt.releaseBudget = release
	return nil
}

// failEnd answers a failure nothing more will be tried for: exhausted
// when a cap ran out, else the failure itself.
func (rt *runtime) failEnd(ctx context.Context, exhausted *openai.Error, o outcome) {
	if exhausted == nil && o.kind == outStall {
		exhausted = stalledError()
	}
	rt.fail(ctx, exhausted, &o)
}

// stallObserved records a stall's recovery eligibility in the contract's
// vocabulary, and opens the cycle whose result the next dispatch gives.
func (rt *runtime) stallObserved(o outcome, eligibility string) {
	state := rt.resp.State()
	// The contract's recovery rows carry provider_health=unknown: health
	// lives in this request-local state, not in the observation.
	rt.obs.eligibility(o.path, "unknown", state, eligibility)
	if eligibility != eligibilityEligible {
		rt.obs.result(o.path, "unknown", state, resultTerminal)
		return
	}
	rt.cyclePending, rt.cyclePath = true, o.path
}

// countMove records a move in metrics and the summary.
func (rt *runtime) countMove(r route, class FailureClass) {
	rt.cfg.Metrics.replays.WithLabelValues(reasonOf(class)).Inc()
	if r != routeFallback {
		rt.sum.Retries++
	}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// classify names an outcome's failure class.
func classify(o outcome) FailureClass {
	switch o.kind {
	case outStall:
		return ClassStall
	case outFirstToken:
		return ClassFirstTokenTimeout
	case outTransport:
		if o.cause == causeBackstop {
			// The edge's backstop: the node went silent past its own
			// stall timeout; nothing confirms the provider stopped.
			return ClassNone
		}
		return ClassConnect
	case outAbnormal:
		return ClassConnect
	case outUpstream:
		u := o.upstream
		switch {
		case u == nil:
			return ClassConnect
		case u.Status == http.StatusTooManyRequests:
			return Class429
		case u.Status >= 500:
			return Class5xx
		case u.Code == "context_length_exceeded":
			return ClassContextLength
		case isContentPolicy(u):
			return ClassContentPolicy
		}
	}
	return ClassNone
}

// isContentPolicy recognises a content-policy refusal by its code.
func isContentPolicy(u *execution.UpstreamError) bool {
	switch strings.ToLower(u.Code) {
	case "content_policy_violation", "content_filter", "content_filtered", "responsible_ai_policy_violation":
		return true
	}
	return false
}

// retryAfter is the upstream's Retry-After, if it gave one.
func retryAfter(o outcome) time.Duration {
	if o.upstream == nil {
		return 0
	}
	return time.Duration(o.upstream.RetryAfterMS) * time.Millisecond
}

// reasonOf is the replay metric's reason for a class.
func reasonOf(c FailureClass) string {
	return [...]string{ClassNone: reasonAbnormalEnd, Class429: reasonUpstream429, Class5xx: reasonUpstream5xx, ClassConnect: reasonTransport,
		ClassStall: reasonPreCommitStall, ClassFirstTokenTimeout: reasonFirstToken, ClassContextLength: reasonContextLength,
		ClassContentPolicy: reasonContentPolicy}[c]
}

func stalledError() *openai.Error {
	return &openai.Error{Status: http.StatusGatewayTimeout, Type: openai.TypeUpstream, Code: codeResponseStalled,
		Message: "The provider stopped producing output and the request could not be replayed."}
}

func budgetError() *openai.Error {
	return &openai.Error{Status: http.StatusServiceUnavailable, Type: openai.TypeServiceUnavailable, Code: codeBudgetExhausted,
		Message: "The provider failed, and the gateway-wide retry budget (shared by all requests) is exhausted. Please retry later."}
}

// attemptsError is the answer when the request's own attempt cap is
// reached: the status of the last failure, a code of its own.
func attemptsError(n int, o outcome) *openai.Error {
	status := http.StatusBadGateway
	switch {
	case o.kind == outStall:
		status = http.StatusGatewayTimeout
	case o.upstream != nil && o.upstream.Status >= 400:
		status = o.upstream.Status
	}
	return &openai.Error{Status: status, Type: openai.TypeUpstream, Code: codeMaxAttempts,
		Message: fmt.Sprintf("The request failed on every attempt it was allowed (streamgate.max_attempts = %d); the last failure was %s.", n, classify(o))}
}

func firstTokenError() *openai.Error {
	return &openai.Error{Status: http.StatusGatewayTimeout, Type: openai.TypeUpstream, Code: codeFirstTokenTimeout,
		Message: "The provider produced no output within the model's first-token timeout, and no other attempt could answer."}
}
