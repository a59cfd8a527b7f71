package streamgate

import (
	"context"
	"log/slog"
)

// Recovery observation vocabulary (contract: "Edge OpenAI recovery
// observations"). Every label value is one of these closed sets.
const (
	eligibilityEligible              = "eligible"
	eligibilityNoOwner               = "no_owner"
	eligibilityPostCommit            = "post_commit"
	eligibilityUnconfirmedFence      = "unconfirmed_fence"
	eligibilityCallerCancelled       = "caller_cancelled"
	eligibilityToolSideEffect        = "tool_side_effect"
	eligibilityBudgetExhausted       = "budget_exhausted"
	eligibilityNoCandidate           = "no_candidate"
	eligibilitySameProviderForbidden = "same_provider_forbidden"
	eligibilityOther                 = "other"

	resultRedispatched   = "redispatched"
	resultPlanRejected   = "plan_rejected"
	resultAbortFailed    = "abort_failed"
	resultRebuildFailed  = "rebuild_failed"
	resultDispatchFailed = "dispatch_failed"
	resultNotSelected    = "not_selected"
	resultTerminal       = "terminal"
	resultOther          = "other"

	PhaseIdle            = "idle"
	PhaseEligiblePending = "eligible_pending"
)

var (
	eligibilities = set(eligibilityEligible, eligibilityNoOwner, eligibilityPostCommit, eligibilityUnconfirmedFence,
		eligibilityCallerCancelled, eligibilityToolSideEffect, eligibilityBudgetExhausted, eligibilityNoCandidate,
		eligibilitySameProviderForbidden, eligibilityOther)
	results = set(resultRedispatched, resultPlanRejected, resultAbortFailed, resultRebuildFailed, resultDispatchFailed,
		resultNotSelected, resultTerminal, resultOther)
	paths       = set("normalized", "provider_tunnel", "unknown")
	healths     = set("available", "unavailable", "unknown")
	commitState = set(string(TransportUncommitted), string(StreamOpen), string(TerminalCommitted), "unknown")
)

func set(vs ...string) map[string]bool {
	m := make(map[string]bool, len(vs))
	for _, v := range vs {
		m[v] = true
	}
	return m
}

func closed(m map[string]bool, v, fallback string) string {
	if m[v] {
		return v
	}
	return fallback
}

// recoveryObserver is the request-local wrapper around the runtime's
// collectors: one fresh observer per request. It tracks the cycle phase —
// idle until an eligible decision, eligible_pending until the cycle's one
// result — and writes the edge_liveness_recovery_observation record. It
// carries no identifier of any kind.
type recoveryObserver struct {
	log   *slog.Logger
	m     *Metrics
	phase string
}

func newRecoveryObserver(log *slog.Logger, m *Metrics) *recoveryObserver {
	return &recoveryObserver{log: log, m: m, phase: PhaseIdle}
}

// Phase reports the cycle phase.
func (o *recoveryObserver) Phase() string { return o.phase }

// eligibility records one eligibility decision. A second decision while
// eligible_pending records no metric row (it belongs to the open cycle).
func (o *recoveryObserver) eligibility(path, health string, state CommitState, eligibility string) {
	path, health = closed(paths, path, "unknown"), closed(healths, health, "unknown")
	cs := closed(commitState, string(state), "unknown")
	eligibility = closed(eligibilities, eligibility, eligibilityOther)
	if o.phase == PhaseEligiblePending {
		o.record(path, health, cs, "", "")
		return
	}
	o.m.eligibility.WithLabelValues(path, health, cs, eligibility).Inc()
	o.record(path, health, cs, eligibility, "")
	if eligibility == eligibilityEligible {
		o.phase = PhaseEligiblePending
	}
}

// result records the cycle's final result; only the first result of a
// cycle records a metric row. The cycle then returns to idle.
func (o *recoveryObserver) result(path, health string, state CommitState, result string) {
	path, health = closed(paths, path, "unknown"), closed(healths, health, "unknown")
	result = closed(results, result, resultOther)
	o.m.results.WithLabelValues(path, health, result).Inc()
	o.record(path, health, closed(commitState, string(state), "unknown"), "", result)
	o.phase = PhaseIdle
}

func (o *recoveryObserver) record(path, health, cs, eligibility, result string) {
	if o.log == nil {
		return
	}
	o.log.LogAttrs(context.Background(), slog.LevelInfo, "edge_liveness_recovery_observation",
		slog.String("phase", o.phase),
		slog.String("execution_path", path),
		slog.String("provider_health", health),
		slog.String("commit_state", cs),
		slog.String("eligibility", eligibility),
		slog.String("recovery_result", result),
	)
}
