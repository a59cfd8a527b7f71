package pool

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// healthObservation is one authoritative overlay decision, in closed
// vocabularies only: no provider, node, run, adapter or target value.
type HealthObservation struct {
	source   string // stall, probe, unknown
	evidence string // available, unavailable, unknown
	decision string // applied, rejected_stale, rejected_binding, rejected_ambiguous, inconclusive
	from, to string // for a state change: available, unavailable, unknown
	changed  bool
	// provider is the edge-owned provider id, for the admin event log
	// only: it never reaches a metric label or the log record.
	provider string
}

var (
	healthSources   = map[string]bool{"stall": true, "probe": true, "unknown": true}
	healthEvidences = map[string]bool{"available": true, "unavailable": true, "unknown": true}
	healthDecisions = map[string]bool{"applied": true, "rejected_stale": true, "rejected_binding": true, "rejected_ambiguous": true, "inconclusive": true}
)

func closedOr(m map[string]bool, v, fallback string) string {
	if m[v] {
		return v
	}
	return fallback
}

// healthObservability is the edge's process-global projection of overlay
// decisions: iop_edge_provider_health_evidence_total,
// iop_edge_provider_health_transitions_total and the
// edge_provider_health_observation log record. Observations are delivered
// synchronously after the decision, outside the pool lock: a slow
// observer can delay its caller but can neither hold the lock nor change
// the finalized transition.
type HealthObservability struct {
	evidence    *prometheus.CounterVec
	transitions *prometheus.CounterVec
	log         *slog.Logger
	events      *EventLog
	hook        func(HealthObservation) // tests
}

func NewHealthObservability(reg prometheus.Registerer, log *slog.Logger, events *EventLog) *HealthObservability {
	o := &HealthObservability{events: events,
		evidence: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "iop_edge_provider_health_evidence_total",
			Help: "Authoritative provider-health overlay decisions.",
		}, []string{"source", "evidence_health", "decision"}),
		transitions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "iop_edge_provider_health_transitions_total",
			Help: "Provider-health overlay state transitions.",
		}, []string{"from_health", "to_health"}),
		log: log,
	}
	reg.MustRegister(o.evidence, o.transitions)
	return o
}

func (o *HealthObservability) observe(obs HealthObservation) {
	if o == nil {
		return
	}
	src := closedOr(healthSources, obs.source, "unknown")
	ev := closedOr(healthEvidences, obs.evidence, "unknown")
	dec := closedOr(healthDecisions, obs.decision, "inconclusive")
	o.evidence.WithLabelValues(src, ev, dec).Inc()
	// from_health/to_health are always in their closed set: the state
	// before and after (equal when nothing changed, unknown when the
	// decision could not bind to a provider's state).
	from, to := closedOr(healthEvidences, obs.from, "unknown"), closedOr(healthEvidences, obs.to, "unknown")
	if obs.changed {
		o.transitions.WithLabelValues(from, to).Inc()
	}
	if o.log != nil {
		o.log.LogAttrs(context.Background(), slog.LevelInfo, "edge_provider_health_observation",
			slog.String("source", src), slog.String("evidence_health", ev), slog.String("decision", dec),
			slog.String("from_health", from), slog.String("to_health", to), slog.Bool("state_changed", obs.changed))
	}
	if o.events != nil {
		o.events.Add(Event{Time: time.Now(), Kind: "health", ProviderID: obs.provider, Source: src, Evidence: ev, Decision: dec, From: from, To: to})
	}
	if o.hook != nil {
		o.hook(obs)
	}
}
