package gateway

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/iopgw/iop/codec/openai"
	"github.com/iopgw/iop/execution"
)

// keyMetrics count use by client key. Key ids are the configured set and
// models are the ones the edge knows ("other" for the rest), so every
// label is bounded; a request without a key is not counted here.
type keyMetrics struct {
	requests *prometheus.CounterVec
	tokens   *prometheus.CounterVec
	refused  *prometheus.CounterVec
	// storeErrors counts calls to the shared limits store that failed.
	storeErrors prometheus.Counter
}

func newKeyMetrics(reg prometheus.Registerer) *keyMetrics {
	m := &keyMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "iop_edge_key_requests_total",
			Help: "Inference requests answered for a client key, by key id and model asked.",
		}, []string{"key_id", "model"}),
		tokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "iop_edge_key_tokens_total",
			Help: "Tokens charged to a client key, by key id, model asked, kind (prompt, completion) and source (reported by the upstream, or estimated by the edge from what it delivered when the upstream reported none).",
		}, []string{"key_id", "model", "kind", "source"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "iop_edge_key_refusals_total",
			Help: "Requests refused by a key's limits, by key id and code (rate_limit_exceeded, insufficient_quota, model_not_allowed).",
		}, []string{"key_id", "code"}),
		storeErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "iop_edge_limit_store_errors_total",
			Help: "Calls to the shared limits store (Redis) that failed or timed out; the failure policy applied.",
		}),
	}
	reg.MustRegister(m.requests, m.tokens, m.refused, m.storeErrors)
	return m
}

// knownName reports whether model names something the edge knows: served
// now or since start, or configured. Only such names become metric labels
// or per-model counters (a bounded set).
func (g *Gateway) knownName(model string) bool {
	return g.pool.Known(model) || g.config().configured(model) || g.pool.Served(model)
}

// modelLabel bounds the model label to models the edge knows.
func (g *Gateway) modelLabel(model string) string {
	if g.knownName(model) {
		return model
	}
	return "other"
}

func (g *Gateway) keyUsed(key, model string, u *execution.TokenUsage, estimated bool) {
	if key == "" {
		return
	}
	m := g.modelLabel(model)
	g.keys.requests.WithLabelValues(key, m).Inc()
	if u != nil {
		src := usageSource(estimated)
		g.keys.tokens.WithLabelValues(key, m, "prompt", src).Add(float64(u.PromptTokens))
		g.keys.tokens.WithLabelValues(key, m, "completion", src).Add(float64(u.CompletionTokens))
	}
}

// usageSource is the source label of charged usage: reported by the
// upstream, or estimated by the edge from what it delivered.
func usageSource(estimated bool) string {
	if estimated {
		return "estimated"
	}
	return "reported"
}

func (g *Gateway) keyRefused(key string, e *openai.Error) {
	if key != "" {
		g.keys.refused.WithLabelValues(key, e.Code).Inc()
	}
}

func (g *Gateway) adminKeys(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, map[string]any{"keys": g.tenants.Status(), "time": time.Now().UTC()})
}
