package streamgate

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the runtime's collectors, registered by the host on its
// registry (NewMetrics). Labels are closed sets; no identifier is ever a
// label.
type Metrics struct {
	replays         *prometheus.CounterVec
	budgetExhausted prometheus.Counter
	attempts        *prometheus.CounterVec
	clientCancelled prometheus.Counter
	slowClientCuts  prometheus.Counter
	terminals       *prometheus.CounterVec
	resumes         *prometheus.CounterVec
	eligibility     *prometheus.CounterVec
	results         *prometheus.CounterVec
}

// NewMetrics creates the runtime's collectors and registers them on reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		replays: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "iop_edge_replays_total",
			Help: "Attempts dispatched again for a request before its first byte, by reason.",
		}, []string{"reason"}),
		budgetExhausted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "iop_edge_retry_budget_exhausted_total",
			Help: "Replays or failovers refused because the shared retry budget or the per-request attempt cap was used up.",
		}),
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "iop_edge_attempts_total",
			Help: "Attempts by how they ended.",
		}, []string{"outcome"}),
		clientCancelled: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "iop_edge_client_cancelled_total",
			Help: "Requests the client abandoned before their terminal.",
		}),
		slowClientCuts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "iop_edge_slow_client_cuts_total",
			Help: "Streams cut off because the client stopped reading for the write timeout (its upstream was cancelled).",
		}),
		terminals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "iop_edge_typed_terminals_total",
			Help: "Requests that ended with a gateway-typed error, by commit state and code.",
		}, []string{"commit_state", "code"}),
		resumes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "iop_edge_resumes_total",
			Help: "Committed streams that were cut or stalled with resume on, by what followed: continued, no_candidate or budget_exhausted.",
		}, []string{"outcome"}),
		eligibility: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "iop_edge_liveness_recovery_eligibility_total",
			Help: "Recovery eligibility decisions per liveness cycle.",
		}, []string{"execution_path", "provider_health", "commit_state", "eligibility"}),
		results: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "iop_edge_liveness_recovery_results_total",
			Help: "Final recovery results; at most one per liveness cycle.",
		}, []string{"execution_path", "provider_health", "recovery_result"}),
	}
	for _, c := range []prometheus.Collector{m.replays, m.budgetExhausted, m.attempts, m.clientCancelled, m.slowClientCuts,
		m.terminals, m.resumes, m.eligibility, m.results} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

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
