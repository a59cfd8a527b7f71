package pool

import (
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/iopgw/iop/streamgate"
	"github.com/iopgw/iop/wire"
)

// admissibleLocked reports whether a provider may take work, ignoring
// capacity: configuration-healthy, not lowered by the runtime overlay, and
// able to do what the request needs.
func (p *Pool) admissibleLocked(pp *pooled, model string, need streamgate.Need, surface string, aliases func(string) []ModelTarget) bool {
	if served, _ := targetOf(pp, model, aliases); pp.disabled || served == "" || p.nodeState[nodeGen{pp.key.NodeID, pp.key.Generation}] != "" {
		return false
	}
	if e := p.overlay[pp.key]; e != nil && e.lowered {
		return false
	}
	if need == streamgate.NeedTunnel && !tunnelable(pp.ad, surface) || need == streamgate.NeedOllamaAPI && !pp.ad.GetSupportsOllamaApi() {
		return false
	}
	return true
}

// eligibleLocked applies the avoidance filter — identically for initial
// and queued resolution.
func (p *Pool) eligibleLocked(req ProviderPoolDispatchRequest) (out []*pooled, avoidedEligible bool) {
	var avoided *pooled
	out = p.scratch.eligible[:0]
	defer func() { p.scratch.eligible = out }()
	for _, pp := range p.routableLocked(req.Model, req.Need, req.Surface, p.aliasesOf(req)) {
		if slices.Contains(req.Exclude, pp.key.ID()) || (req.Prefill && !continues(pp.ad, req.Surface)) || (req.Pin != "" && pp.key.ID() != req.Pin) {
			continue
		}
		if req.AvoidProviderID != "" && pp.key.ID() == req.AvoidProviderID {
			avoided = pp
			continue
		}
		out = append(out, pp)
	}
	if len(out) == 0 && avoided != nil && req.AllowAvoidedProviderFallback {
		out = append(out, avoided)
	}
	return out, avoided != nil
}

// continues reports whether a provider continues an assistant prefill
// of a request of the surface: it declares prefill, or it carries the
// request to an upstream that serves the surface natively (an Anthropic
// Messages prefill on a messages upstream). A request with no surface
// (a resumed stream's continuation) runs translated.
func continues(ad *wire.ProviderAdvertisement, surface string) bool {
	return ad.GetPrefill() || surface != "" && passesThrough(ad.GetSupportsTunnel(), ad.GetExecutionPath(), ad.GetSurfaces(), surface)
}

// pickLocked selects among eligible providers with a free slot for model:
// the least in-flight relative to capacity (an alias target's capacity
// scaled by its weight), then the higher configured priority; among those
// still tied, an alias's targets by smooth weighted round robin, other
// providers the least recently used.
func (p *Pool) pickLocked(cands []*pooled, req ProviderPoolDispatchRequest) *pooled {
	model, aliases := req.Model, p.aliasesOf(req)
	var tied []*pooled
	var weights []int
	var bestLoad float64
	bestPrio := 0
	for _, c := range cands {
		if !c.hasSlot() {
			continue
		}
		_, w := targetOf(c, model, aliases)
		l := load(c) / float64(w)
		switch {
		case tied == nil || l < bestLoad || l == bestLoad && c.priority > bestPrio:
			tied, weights, bestLoad, bestPrio = []*pooled{c}, []int{w}, l, c.priority
		case l == bestLoad && c.priority == bestPrio:
			tied, weights = append(tied, c), append(weights, w)
		}
	}
	if len(tied) <= 1 || len(aliases(model)) == 0 {
		var best *pooled
		for _, c := range tied {
			if best == nil || c.lastUsed < best.lastUsed {
				best = c
			}
		}
		return best
	}
	// A stable order, so ties between equal round-robin values always
	// break the same way (the interleaving stays smooth).
	order := make([]int, len(tied))
	for i := range order {
		order[i] = i
	}
	sort.Slice(order, func(i, j int) bool { return tied[order[i]].key.ID() < tied[order[j]].key.ID() })
	sorted, sw := make([]*pooled, len(tied)), make([]int, len(tied))
	for i, k := range order {
		sorted[i], sw[i] = tied[k], weights[k]
	}
	tied, weights = sorted, sw
	ids := make([]string, len(tied))
	for i, c := range tied {
		ids[i] = c.key.ID()
	}
	key := strings.ToLower(model)
	if p.rr[key] == nil {
		p.rr[key] = swrr{}
	}
	return tied[p.rr[key].pick(ids, weights)]
}

func load(p *pooled) float64 {
	if p.capacity() <= 0 {
		return 0
	}
	return float64(p.inFlight) / float64(p.capacity())
}

// leaseLocked takes a slot on pp.
func (p *Pool) leaseLocked(pp *pooled, req ProviderPoolDispatchRequest) *Lease {
	model := req.Model
	pp.inFlight++
	p.useSeq++
	pp.lastUsed = p.useSeq
	ad := pp.ad
	target, _ := targetOf(pp, model, p.aliasesOf(req))
	return &Lease{
		NodeID: pp.key.NodeID, ConnectionGeneration: pp.key.Generation, ProviderID: pp.key.ID(), LocalProviderID: pp.key.ProviderID,
		Adapter: ad.GetAdapter(), Target: target, InstanceKey: ad.GetInstanceKey(), Model: model,
		Path: ad.GetExecutionPath(), Surfaces: ad.GetSurfaces(), StallTimeout: time.Duration(ad.GetResponseStallTimeoutMs()) * time.Millisecond,
		SupportsTunnel: ad.GetSupportsTunnel(), SupportsOllamaAPI: ad.GetSupportsOllamaApi(),
		slot: pp, pool: p,
	}
}
