package pool

import (
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/iopgw/iop/execution"
	"github.com/iopgw/iop/streamgate"
	"github.com/iopgw/iop/wire"
)

// ProviderPoolDispatchRequest asks the pool for a provider. The two
// recovery hints are request-local selection policy only: they create no
// retry loop, reserve no slot, change no priority, are never persisted and
// count nothing. Zero values preserve the normal selection.
type ProviderPoolDispatchRequest struct {
	Model string
	Need  streamgate.Need
	// Surface is the client's API surface (chat, responses, completions,
	// embeddings, ollama); with NeedTunnel, only providers that tunnel it
	// are admissible.
	Surface string
	// AvoidProviderID, when non-empty, prefers any runtime-eligible
	// alternate over this (edge-owned) provider id.
	AvoidProviderID string
	// AllowAvoidedProviderFallback permits the avoided provider when no
	// alternate exists and it remains runtime eligible.
	AllowAvoidedProviderFallback bool
	// Exclude are edge provider ids never selected for this request (they
	// already failed it).
	Exclude []string
	// Prefill selects only providers that continue an assistant prefill
	// (a resumed stream, an Anthropic client's prefill): declared
	// prefill, or a native upstream of the request's surface.
	Prefill bool
	// Pin, when set, is the only provider (edge id) that may be selected:
	// the one that keeps state the request names (a stored response).
	Pin string
	// Aliases and Queue are the request's configuration generation's alias
	// targets and queue settings (nil: the pool's own, the running
	// configuration's), so a request queued or retried across a reload
	// keeps the ones it started with.
	Aliases func(model string) []ModelTarget
	Queue   func(model string) QueueConfig
}

// aliasesOf is the alias table req resolves model names with.
func (p *Pool) aliasesOf(req ProviderPoolDispatchRequest) func(string) []ModelTarget {
	if req.Aliases != nil {
		return req.Aliases
	}
	return p.aliases
}

// The path policies a provider advertises (execution_path).
const (
	pathAuto       = "auto"
	pathTunnel     = string(execution.ExecutionPathProviderTunnel)
	pathNormalized = string(execution.ExecutionPathNormalized)
)

// Pool is the edge's provider pool: admission, per-model FIFO queues,
// leases and the runtime health overlay. It is safe for concurrent use.
type Pool struct {
	cfgQueue   func(model string) QueueConfig
	policy     func(providerID string) ProviderPolicy
	observer   *HealthObservability
	overlayCfg OverlayConfig
	metrics    *poolMetrics // nil: not registered
	outlierCfg OutlierConfig
	now        func() time.Time

	mu        sync.Mutex // guards the following fields
	providers map[ProviderKey]*pooled
	queues    map[string]*waitQueue
	overlay   map[ProviderKey]*overlayEntry
	nodeGen   map[string]uint64  // the newest connection generation set per node
	nodeState map[nodeGen]string // NodeSuspect or NodeDraining: takes no new work
	served    map[string]bool    // lower-cased models any node has advertised since start (bounded)
	aliases   func(model string) []ModelTarget
	rr        map[string]swrr // weighted round-robin state, by alias
	useSeq    uint64
	scratch   scratch
}

// scratch is the room a dispatch's candidate lists are built in, reused
// under p.mu: every caller is done with a list before the lock is
// released, so a dispatch allocates none.
type scratch struct {
	healthy, ejected, eligible []*pooled
}

// nodeGen is one connection of one node.
type nodeGen struct {
	NodeID     string
	Generation uint64
}

// The states of a node connection that take no new work.
const (
	// NodeSuspect: the node did not open a dispatched attempt in time or
	// missed heartbeats; it is used again once it answers.
	NodeSuspect = "suspect"
	// NodeDraining: the node is shutting down.
	NodeDraining = "draining"
)

// SetNodeState marks a node connection suspect or draining ("" clears
// it): its providers take no new work meanwhile, and queued requests are
// re-resolved at once.
func (p *Pool) SetNodeState(nodeID string, gen uint64, state string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	k := nodeGen{nodeID, gen}
	if cur := p.nodeState[k]; cur == state || cur == NodeDraining {
		return // unchanged (every heartbeat answer lands here), or draining, which is final
	}
	if state == "" {
		delete(p.nodeState, k)
	} else {
		p.nodeState[k] = state
	}
	p.pumpLocked()
}

// NodeState is a node connection's state: NodeSuspect, NodeDraining or
// "" (takes work).
func (p *Pool) NodeState(nodeID string, gen uint64) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.nodeState[nodeGen{nodeID, gen}]
}

// PoolConfig configures a Pool.
type PoolConfig struct {
	Queue    func(model string) QueueConfig
	Policy   func(providerID string) ProviderPolicy
	Observer *HealthObservability
	Overlay  OverlayConfig
	Outlier  OutlierConfig
	Now      func() time.Time // default time.Now
	// Registerer, when set, takes the pool's collectors.
	Registerer prometheus.Registerer
	// Aliases returns the targets of a model name that is an alias (nil
	// for any other name).
	Aliases func(model string) []ModelTarget
}

// NewPool returns an empty pool.
func NewPool(c PoolConfig) *Pool {
	if c.Queue == nil {
		c.Queue = func(string) QueueConfig { return QueueConfig{MaxLength: 256, MaxWait: 30 * time.Second} }
	}
	if c.Policy == nil {
		c.Policy = func(string) ProviderPolicy { return ProviderPolicy{} }
	}
	if c.Aliases == nil {
		c.Aliases = func(string) []ModelTarget { return nil }
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	p := &Pool{cfgQueue: c.Queue, policy: c.Policy, aliases: c.Aliases, rr: map[string]swrr{}, observer: c.Observer, overlayCfg: c.Overlay, outlierCfg: c.Outlier.withDefaults(), now: c.Now,
		providers: map[ProviderKey]*pooled{}, queues: map[string]*waitQueue{}, overlay: map[ProviderKey]*overlayEntry{}, nodeGen: map[string]uint64{},
		nodeState: map[nodeGen]string{}}
	if c.Registerer != nil {
		p.metrics = newPoolMetrics(c.Registerer, p)
	}
	return p
}

// SetNode sets the providers of nodeID's connection generation gen. It is
// compare-and-swap on the generation: an advertisement of an older
// generation than one already set never replaces it (reported false); a
// newer generation replaces every provider of the node; the same
// generation (a re-advertisement) updates its providers in place, so
// leases, in-flight counts and outlier state carry over exactly.
func (p *Pool) SetNode(nodeID string, gen uint64, ads []*wire.ProviderAdvertisement) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if gen < p.nodeGen[nodeID] {
		return false
	}
	p.nodeGen[nodeID] = gen
	keep := map[ProviderKey]bool{}
	for _, ad := range ads {
		k := ProviderKey{NodeID: nodeID, Generation: gen, ProviderID: ad.GetProviderId()}
		keep[k] = true
		pol := p.policy(k.ID())
		if pol.ID == "" {
			pol = p.policy(ad.GetProviderId())
		}
		p.noteServedLocked(ad.GetModels())
		if pp := p.providers[k]; pp != nil {
			pp.advertise(ad)
			pp.priority, pp.disabled, pp.advertised = pol.Priority, pol.Disabled, 0
			continue
		}
		pp := &pooled{key: k, priority: pol.Priority, disabled: pol.Disabled}
		pp.advertise(ad)
		p.providers[k] = pp
	}
	for k := range p.providers {
		if k.NodeID == nodeID && !keep[k] {
			delete(p.providers, k)
		}
	}
	for k := range p.overlay {
		if k.NodeID == nodeID && k.Generation != gen {
			delete(p.overlay, k)
		}
	}
	for k := range p.nodeState {
		if k.NodeID == nodeID && k.Generation != gen {
			delete(p.nodeState, k)
		}
	}
	p.pumpLocked()
	return true
}

// RemoveNode drops nodeID's providers, but only those of generation gen:
// the cleanup of an old connection never removes a newer one.
func (p *Pool) RemoveNode(nodeID string, gen uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for k := range p.providers {
		if k.NodeID == nodeID && k.Generation == gen {
			delete(p.providers, k)
		}
	}
	for k := range p.overlay {
		if k.NodeID == nodeID && k.Generation == gen {
			delete(p.overlay, k)
		}
	}
	delete(p.nodeState, nodeGen{nodeID, gen})
	p.failUnservableLocked()
}

// Candidates reports who could serve req now, ignoring capacity.
func (p *Pool) Candidates(req ProviderPoolDispatchRequest) streamgate.Candidates {
	p.mu.Lock()
	defer p.mu.Unlock()
	req.AllowAvoidedProviderFallback = false // count the alternates only
	alts, avoided := p.eligibleLocked(req)
	return streamgate.Candidates{Alternates: len(alts), AvoidedOnly: len(alts) == 0 && avoided}
}

// Models returns the models served by admissible providers, sorted.
func (p *Pool) Models() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	seen := map[string]bool{}
	for _, pp := range p.providers {
		for _, m := range pp.ad.GetModels() {
			if !seen[m] && p.admissibleLocked(pp, m, streamgate.NeedAny, "", p.aliases) {
				seen[m] = true
			}
		}
	}
	out := make([]string, 0, len(seen))
	for m := range seen {
		out = append(out, m)
	}
	sort.Strings(out)
	return out
}

// Known reports whether any provider (admissible or not) serves model.
// maxServed bounds the models remembered as served (node_limits.max_models
// already bounds each advertisement).
const maxServed = 4096

func (p *Pool) noteServedLocked(models []string) {
	if p.served == nil {
		p.served = map[string]bool{}
	}
	for _, m := range models {
		if len(p.served) >= maxServed {
			return
		}
		p.served[strings.ToLower(m)] = true
	}
}

// Served reports whether any node advertised model since the edge
// started: its absence now is a node away or reconnecting (503), not an
// unknown model (404).
func (p *Pool) Served(model string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.served[strings.ToLower(model)]
}

func (p *Pool) Known(model string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, pp := range p.providers {
		if served, _ := targetOf(pp, model, p.aliases); served != "" {
			return true
		}
	}
	return false
}

// Carries reports whether any connected provider of model — healthy or
// not — may receive surface through the tunnel: false means no provider
// of the model serves that endpoint at all (not that they are busy or
// down).
func (p *Pool) Carries(model, surface string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, pp := range p.providers {
		if served, _ := targetOf(pp, model, p.aliases); served != "" && tunnelable(pp.ad, surface) {
			return true
		}
	}
	return false
}

// Tunnels reports whether an admissible provider of model (or of one of
// its fallbacks' — the caller checks those) carries the client surface
// through unchanged.
func (p *Pool) Tunnels(model, surface string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.routableLocked(model, streamgate.NeedTunnel, surface, p.aliases)) > 0
}

// SpeaksOllama reports whether an admissible provider of model speaks
// Ollama's API natively (takes an ollama_api command).
func (p *Pool) SpeaksOllama(model string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.routableLocked(model, streamgate.NeedOllamaAPI, wire.SurfaceOllama, p.aliases)) > 0
}

// InUse returns the number of leased slots.
func (p *Pool) InUse() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, pp := range p.providers {
		n += pp.inFlight
	}
	return n
}

// Reconfigure applies reloaded overlay and outlier settings and each
// provider's configured policy (priority, disabled) to the providers
// already registered; leases in flight are untouched.
func (p *Pool) Reconfigure(overlay OverlayConfig, outlier OutlierConfig) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.overlayCfg, p.outlierCfg = overlay, outlier.withDefaults()
	for k, pp := range p.providers {
		pol := p.policy(k.ID())
		if pol.ID == "" {
			pol = p.policy(pp.ad.GetProviderId())
		}
		pp.priority, pp.disabled = pol.Priority, pol.Disabled
	}
	p.pumpLocked()
}
