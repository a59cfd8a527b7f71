package nodeagent

import (
	"context"
	"log/slog"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/iopgw/iop/execution"
)

// StallObservation is the bounded operational projection of one claimed
// stall, taken after the terminal was finalized. It holds closed-vocabulary
// values and the idle duration only: no identifiers, no payload.
type StallObservation struct {
	ExecutionPath          execution.ExecutionPath
	ProviderHealth         execution.HealthStatus
	LivenessClassification execution.ProviderHealth
	AttemptFence           execution.AttemptFence
	IdleDurationMS         int64
}

// StallObserver receives stall observations. Calls are fire-and-forget:
// a panicking or slow observer never suppresses or delays the terminal,
// which is delivered before the observer is called.
type StallObserver interface {
	ObserveStall(StallObservation)
}

// livenessObservability is the node's process-global StallObserver:
// iop_node_response_stalls_total, iop_node_response_stall_duration_seconds
// and the node_response_stall_observation log record.
type livenessObservability struct {
	stalls   *prometheus.CounterVec
	duration *prometheus.HistogramVec
	log      *slog.Logger
}

var stallLabels = []string{"execution_path", "provider_health", "liveness_classification", "attempt_fence"}

// newLivenessObservability registers the node stall collectors on reg.
func newLivenessObservability(reg prometheus.Registerer, log *slog.Logger) *livenessObservability {
	o := &livenessObservability{
		stalls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "iop_node_response_stalls_total",
			Help: "Stalls claimed by the node watchdog; every claimed stall increments exactly one series.",
		}, stallLabels),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "iop_node_response_stall_duration_seconds",
			Help:    "Idle duration of claimed stalls, in seconds.",
			Buckets: []float64{0.1, 0.5, 1, 5, 15, 30, 60, 120, 300, 600, 1800},
		}, stallLabels),
		log: log,
	}
	reg.MustRegister(o.stalls, o.duration)
	return o
}

// ObserveStall implements [StallObserver].
func (o *livenessObservability) ObserveStall(obs StallObservation) {
	path, health, class, fence := normalizeStallLabels(obs)
	o.stalls.WithLabelValues(path, health, class, fence).Inc()
	o.duration.WithLabelValues(path, health, class, fence).Observe(float64(obs.IdleDurationMS) / 1000)
	o.log.LogAttrs(context.Background(), slog.LevelWarn, "node_response_stall_observation",
		slog.String("execution_path", path),
		slog.String("provider_health", health),
		slog.String("liveness_classification", class),
		slog.String("attempt_fence", fence),
		slog.Int64("idle_duration_ms", obs.IdleDurationMS),
	)
}

// normalizeStallLabels maps every value onto its closed, low-cardinality
// set; anything else becomes unknown.
func normalizeStallLabels(obs StallObservation) (path, health, class, fence string) {
	path = string(execution.ExecutionPathUnknown)
	switch obs.ExecutionPath {
	case execution.ExecutionPathNormalized, execution.ExecutionPathProviderTunnel:
		path = string(obs.ExecutionPath)
	}
	health = string(execution.NormalizeHealthStatus(string(obs.ProviderHealth)))
	class = string(execution.ProviderHealthUnknown)
	if obs.LivenessClassification.Valid() {
		class = string(obs.LivenessClassification)
	}
	fence = string(execution.AttemptFenceUnknown)
	if obs.AttemptFence.Valid() {
		fence = string(obs.AttemptFence)
	}
	return path, health, class, fence
}

// observeSafely calls o without letting a panic escape.
func observeSafely(o StallObserver, obs StallObservation, log *slog.Logger) {
	if o == nil {
		return
	}
	defer func() {
		if r := recover(); r != nil {
			log.Error("stall observer failed", slog.String("panic", strconv.Quote(truncate(r, 128))))
		}
	}()
	o.ObserveStall(obs)
}

func truncate(v any, n int) string {
	s := ""
	switch x := v.(type) {
	case error:
		s = x.Error()
	case string:
		s = x
	default:
		s = "non-string panic"
	}
	if len(s) > n {
		s = s[:n]
	}
	return s
}
