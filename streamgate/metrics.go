package streamgate

import "github.com/prometheus/client_golang/prometheus"

// Replay and attempt counters (process-global, registered once). Labels
// are closed sets; no identifier is ever a label.
var (
	replaysTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "iop_edge_replays_total",
		Help: "Attempts dispatched again for a request before its first byte, by reason.",
	}, []string{"reason"})
	budgetExhaustedTotal = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "iop_edge_retry_budget_exhausted_total",
		Help: "Replays or failovers refused because the shared retry budget or the per-request attempt cap was used up.",
	})
	attemptsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "iop_edge_attempts_total",
		Help: "Attempts by how they ended.",
	}, []string{"outcome"})
	clientCancelledTotal = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "iop_edge_client_cancelled_total",
		Help: "Requests the client abandoned before their terminal.",
	})
	resumesTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "iop_edge_resumes_total",
		Help: "Committed streams that were cut or stalled with resume on, by what followed: continued, no_candidate or budget_exhausted.",
	}, []string{"outcome"})
	slowClientCutsTotal = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "iop_edge_slow_client_cuts_total",
		Help: "Streams cut off because the client stopped reading for the write timeout (its upstream was cancelled).",
	})
	terminalsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "iop_edge_typed_terminals_total",
		Help: "Requests that ended with a gateway-typed error, by commit state and code.",
	}, []string{"commit_state", "code"})
)

// The replay reasons.
const (
	reasonPreCommitStall = "pre_commit_stall"
	reasonUpstream5xx    = "upstream_5xx"
	reasonUpstream429    = "upstream_429"
	reasonTransport      = "transport"
	reasonAbnormalEnd    = "abnormal_end"
	reasonContextLength  = "context_length_fallback"
	reasonFirstToken     = "first_token_timeout"
	reasonContentPolicy  = "content_policy_fallback"
)

func init() {
	prometheus.MustRegister(replaysTotal, budgetExhaustedTotal, attemptsTotal, clientCancelledTotal, terminalsTotal, resumesTotal, slowClientCutsTotal)
}
