package gateway

import (
	"net/http"
	"sort"
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

// KeyStatus is one client key's use and limits, for /admin/keys and the
// status page. Never the key itself.
type KeyStatus struct {
	ID       string    `json:"id"`
	Limits   KeyLimits `json:"limits"`
	Models   []string  `json:"models,omitempty"`
	InFlight int       `json:"in_flight"`
	Usage    keyUsage  `json:"usage"`
	// Today and Month are the budget windows (UTC), with what remains when
	// a budget is set.
	Today          window `json:"today"`
	Month          window `json:"month"`
	RemainingDay   *int64 `json:"remaining_tokens_today,omitempty"`
	RemainingMonth *int64 `json:"remaining_tokens_month,omitempty"`
	// RemainingRequests and RemainingTokens are the rate buckets' levels.
	RemainingRequests *int64 `json:"remaining_requests,omitempty"`
	RemainingTokens   *int64 `json:"remaining_tokens,omitempty"`
}

// status lists every configured key.
func (t *tenants) status() []KeyStatus {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	out := make([]KeyStatus, 0, len(t.keys))
	for id, tn := range t.keys {
		if !tn.present {
			continue // removed by a reload: its usage is kept, not shown
		}
		tn.requests.refill(now)
		tn.tokens.refill(now)
		tn.day.roll(dayStart(now))
		tn.month.roll(monthStart(now))
		l := tn.cfg.Limits
		s := KeyStatus{ID: id, Limits: l, Models: tn.cfg.Models, InFlight: tn.inFlight, Usage: tn.usage, Today: tn.day, Month: tn.month}
		if l.TokensPerDay > 0 {
			s.RemainingDay = ptr(max(0, l.TokensPerDay-tn.day.Tokens))
		}
		if l.TokensPerMonth > 0 {
			s.RemainingMonth = ptr(max(0, l.TokensPerMonth-tn.month.Tokens))
		}
		if l.RequestsPerMinute > 0 {
			s.RemainingRequests = ptr(max(0, int64(tn.requests.level)))
		}
		if l.TokensPerMinute > 0 {
			s.RemainingTokens = ptr(max(0, int64(tn.tokens.level)))
		}
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

func ptr[T any](v T) *T { return &v }

func (g *Gateway) adminKeys(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, map[string]any{"keys": g.tenants.status(), "time": time.Now().UTC()})
}
