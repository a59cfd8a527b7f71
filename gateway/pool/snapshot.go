package pool

import (
	"sort"
	"time"
)

// ProviderSnapshot is one provider as GET /admin/providers shows it.
type ProviderSnapshot struct {
	NodeID               string   `json:"node_id"`
	ConnectionGeneration uint64   `json:"connection_generation"`
	ProviderID           string   `json:"provider_id"`
	LocalProviderID      string   `json:"node_provider_id"`
	Adapter              string   `json:"adapter"`
	Target               string   `json:"target"`
	Models               []string `json:"models"`
	ExecutionPath        string   `json:"execution_path"`
	// Surfaces are the client surfaces the provider serves natively
	// (passthrough); the rest of its requests are translated.
	Surfaces           []string `json:"surfaces"`
	ConfiguredCapacity int      `json:"configured_capacity"`
	// AdvertisedCapacity is what the node advertised when the edge's
	// node_limits.max_capacity cut it down to ConfiguredCapacity.
	AdvertisedCapacity int    `json:"advertised_capacity,omitempty"`
	EffectiveCapacity  int    `json:"effective_capacity"`
	InFlight           int    `json:"in_flight"`
	QueueDepth         int    `json:"queue_depth"`
	Status             string `json:"status"` // available, unavailable
	Health             string `json:"health"` // available, unavailable, unknown
	OverlayReason      string `json:"overlay_reason,omitempty"`
	// EjectedUntil is set while the provider is ejected as an outlier
	// (consecutive server-side failures); it is routable again after.
	EjectedUntil       *time.Time `json:"ejected_until,omitempty"`
	LastObservationSeq uint64     `json:"last_observation_seq"`
	// Probe is what the CAPABILITIES probe sent when the node connected
	// said (available, unavailable, unknown): evidence shown before the
	// first request, never a routing decision.
	Probe    string     `json:"probe,omitempty"`
	ProbedAt *time.Time `json:"probed_at,omitempty"`
}

// Snapshot projects every provider: a provider lowered by the runtime
// overlay (or disabled by configuration) is unavailable with effective
// capacity 0; a recovered one is available with its configured capacity.
func (p *Pool) Snapshot() []ProviderSnapshot {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]ProviderSnapshot, 0, len(p.providers))
	for k, pp := range p.providers {
		s := ProviderSnapshot{
			NodeID: k.NodeID, ConnectionGeneration: k.Generation, ProviderID: k.ID(), LocalProviderID: k.ProviderID,
			Adapter: pp.ad.GetAdapter(), Target: pp.ad.GetTarget(), Models: pp.ad.GetModels(), ExecutionPath: pp.ad.GetExecutionPath(),
			Surfaces:           append([]string{}, pp.ad.GetSurfaces()...),
			ConfiguredCapacity: pp.capacity(), EffectiveCapacity: pp.capacity(), InFlight: pp.inFlight,
			Status: "available", Health: "available", AdvertisedCapacity: pp.advertised,
		}
		for _, m := range pp.ad.GetModels() {
			if q := p.queues[m]; q != nil {
				s.QueueDepth += len(q.waiters)
			}
		}
		if e := p.overlay[k]; e != nil {
			s.LastObservationSeq = e.lastSeq
			if e.lowered {
				s.Status, s.Health, s.OverlayReason, s.EffectiveCapacity = "unavailable", "unavailable", e.reason, 0
			}
		}
		if now := p.now(); pp.outlier.ejected(now) {
			until := pp.outlier.until
			s.EjectedUntil = &until
		}
		if !pp.probedAt.IsZero() {
			at := pp.probedAt
			s.Probe, s.ProbedAt = pp.probe, &at
		}
		if pp.disabled {
			s.Status, s.EffectiveCapacity, s.OverlayReason = "unavailable", 0, "disabled_by_configuration"
		}
		if st := p.nodeState[nodeGen{k.NodeID, k.Generation}]; st != "" {
			s.Status, s.EffectiveCapacity, s.OverlayReason = "unavailable", 0, "node_"+st
		}
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ProviderID < out[j].ProviderID })
	return out
}

// NoteAdvertisedCapacity records that k advertised more capacity than
// the edge's limit gives it, for the status views.
func (p *Pool) NoteAdvertisedCapacity(k ProviderKey, advertised int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if pp := p.providers[k]; pp != nil {
		pp.advertised = advertised
	}
}

// NoteProbe records a connect probe's evidence for the status views.
func (p *Pool) NoteProbe(k ProviderKey, status string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if pp := p.providers[k]; pp != nil {
		pp.probe, pp.probedAt = status, time.Now()
	}
}
