package pool

import (
	"context"
	"fmt"
	"slices"
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
	// (a resumed stream).
	Prefill bool
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

// providerKey identifies a provider on one connection.
type ProviderKey struct {
	NodeID     string
	Generation uint64
	ProviderID string // the node's provider id
}

// ID is the edge-owned provider id.
func (k ProviderKey) ID() string { return k.NodeID + "/" + k.ProviderID }

// pooled is one advertised provider on a live connection.
type pooled struct {
	key      ProviderKey
	ad       *wire.ProviderAdvertisement
	inFlight int
	lastUsed uint64
	priority int
	disabled bool // configuration health
	outlier  outlierState
	probe    string // the last connect probe's evidence (status only; routing ignores it)
	// advertised is the capacity the node advertised when it was more
	// than node_limits.max_capacity (0: not clamped), for the status views.
	advertised int
	probedAt   time.Time         // when it answered
	served     map[string]string // servedIndex(ad)
}

// advertise sets the provider's advertisement and its index of names.
func (p *pooled) advertise(ad *wire.ProviderAdvertisement) {
	p.ad, p.served = ad, servedIndex(ad)
}

// ServedName is the name under which ad serves model, or "": the first of
// its models that names model. Names compare as the adapter does: Ollama
// treats "llama3.2" and "llama3.2:latest" as one model. (The pool looks
// names up in an index of each advertisement, servedIndex, built to give
// the same answers.)
func ServedName(ad *wire.ProviderAdvertisement, model string) string {
	ollama := ad.GetAdapter() == "ollama"
	for _, m := range ad.GetModels() {
		if m == model || ollama && OllamaName(m) == OllamaName(model) {
			return m
		}
	}
	return ""
}

// servedIndex maps each name a request may use for a model of ad to the
// name ServedName gives it, so that a request looks its model up once
// instead of comparing it with every advertised model on every
// candidate (a node serving 50 Ollama models made each comparison build
// two names). For Ollama, a model is indexed under its tagged name and,
// for the implicit tag, its bare one too; the first advertised model
// that answers a name keeps it, as ServedName's scan does.
func servedIndex(ad *wire.ProviderAdvertisement) map[string]string {
	models := ad.GetModels()
	idx := make(map[string]string, len(models))
	add := func(name, m string) {
		if _, ok := idx[name]; !ok {
			idx[name] = m
		}
	}
	ollama := ad.GetAdapter() == "ollama"
	for _, m := range models {
		if !ollama {
			add(m, m)
			continue
		}
		tagged := OllamaName(m)
		add(tagged, m)
		if bare, ok := strings.CutSuffix(tagged, ":latest"); ok && OllamaName(bare) == tagged {
			add(bare, m)
		}
	}
	return idx
}

// ollamaName adds Ollama's implicit ":latest" tag to a name without one.
func OllamaName(m string) string {
	if strings.Contains(m[strings.LastIndex(m, "/")+1:], ":") {
		return m
	}
	return m + ":latest"
}

// The path policies a provider advertises (execution_path).
const (
	pathAuto       = "auto"
	pathTunnel     = string(execution.ExecutionPathProviderTunnel)
	pathNormalized = string(execution.ExecutionPathNormalized)
)

// tunnelable reports whether ad can carry a request of the client
// surface through unchanged: any surface for a tunnel-capable provider on
// a forced path, only the surfaces its upstream serves natively under
// path auto.
func tunnelable(ad *wire.ProviderAdvertisement, surface string) bool {
	if !ad.GetSupportsTunnel() {
		return false
	}
	return ad.GetExecutionPath() != pathAuto || nativeSurface(ad.GetSurfaces(), surface)
}

// nativeSurface reports whether surface is in the advertised list; a
// provider that advertised none serves every OpenAI surface.
func nativeSurface(surfaces []string, surface string) bool {
	return len(surfaces) == 0 || slices.Contains(surfaces, surface)
}

func (p *pooled) capacity() int { return int(p.ad.GetCapacity()) }

func (p *pooled) hasSlot() bool { return p.capacity() <= 0 || p.inFlight < p.capacity() }

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
	if need == streamgate.NeedTunnel && !tunnelable(pp.ad, surface) {
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
		if slices.Contains(req.Exclude, pp.key.ID()) || (req.Prefill && !pp.ad.GetPrefill()) {
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

// Acquire returns a lease for req, waiting in the model's FIFO queue when
// every eligible provider is busy. It fails fast with ErrNoProvider when
// nothing eligible serves the model, and with ErrQueueFull or
// ErrQueueTimeout when the queue is full or the wait too long. A request
// cancelled while queued is never sent upstream.
func (p *Pool) Acquire(ctx context.Context, req ProviderPoolDispatchRequest) (*Lease, error) {
	p.mu.Lock()
	cands, _ := p.eligibleLocked(req)
	if len(cands) == 0 {
		p.mu.Unlock()
		return nil, fmt.Errorf("model %q: %w", req.Model, streamgate.ErrNoProvider)
	}
	if pp := p.pickLocked(cands, req); pp != nil {
		l := p.leaseLocked(pp, req)
		p.mu.Unlock()
		return l, nil
	}
	qc := p.cfgQueue(req.Model)
	if req.Queue != nil {
		qc = req.Queue(req.Model)
	}
	q := p.queueLocked(req.Model)
	if len(q.waiters) >= qc.MaxLength {
		p.mu.Unlock()
		p.countQueueRejected("full")
		return nil, streamgate.ErrQueueFull
	}
	w := &waiter{req: req, ch: make(chan result, 1)}
	q.waiters = append(q.waiters, w)
	p.mu.Unlock()
	return p.wait(ctx, w, qc.MaxWait)
}

func (p *Pool) wait(ctx context.Context, w *waiter, maxWait time.Duration) (*Lease, error) {
	t := time.NewTimer(maxWait)
	defer t.Stop()
	select {
	case r := <-w.ch:
		return r.lease, r.err
	case <-ctx.Done():
		p.abandon(w)
		return nil, ctx.Err()
	case <-t.C:
		if p.abandon(w) {
			p.countQueueRejected("timeout")
			return nil, streamgate.ErrQueueTimeout
		}
		r := <-w.ch // assigned while timing out: use it
		return r.lease, r.err
	}
}

// abandon removes a waiter; if it was assigned meanwhile, the lease goes
// back. It reports whether the waiter was still queued.
func (p *Pool) abandon(w *waiter) bool {
	p.mu.Lock()
	q := p.queues[w.req.Model]
	for i, x := range q.waiters {
		if x == w {
			q.waiters = append(q.waiters[:i], q.waiters[i+1:]...)
			p.mu.Unlock()
			return true
		}
	}
	p.mu.Unlock()
	select {
	case r := <-w.ch:
		if r.lease != nil {
			r.lease.Release()
		}
	default:
	}
	return false
}

// release returns a lease's slot and re-resolves the queues.
func (p *Pool) release(l *Lease) {
	p.mu.Lock()
	l.slot.inFlight--
	p.pumpLocked()
	p.mu.Unlock()
}

// pumpLocked hands free slots to queued requests in FIFO order per model,
// each with its own avoidance filter; a waiter nothing can ever serve
// fails with ErrNoProvider.
func (p *Pool) pumpLocked() {
	for _, q := range p.queues {
		kept := q.waiters[:0]
		for _, w := range q.waiters {
			cands, _ := p.eligibleLocked(w.req)
			if len(cands) == 0 {
				w.ch <- result{err: streamgate.ErrNoProvider}
				continue
			}
			if pp := p.pickLocked(cands, w.req); pp != nil {
				w.ch <- result{lease: p.leaseLocked(pp, w.req)}
				continue
			}
			kept = append(kept, w)
		}
		q.waiters = kept
	}
}

func (p *Pool) failUnservableLocked() { p.pumpLocked() }

func (p *Pool) queueLocked(model string) *waitQueue {
	q := p.queues[model]
	if q == nil {
		q = &waitQueue{}
		p.queues[model] = q
	}
	return q
}

type waitQueue struct{ waiters []*waiter }

type waiter struct {
	req ProviderPoolDispatchRequest
	ch  chan result
}

type result struct {
	lease *Lease
	err   error
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

// QueueDepth returns the number of requests waiting for model.
func (p *Pool) QueueDepth(model string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if q := p.queues[model]; q != nil {
		return len(q.waiters)
	}
	return 0
}

func (p *Pool) countQueueRejected(reason string) {
	if p.metrics != nil {
		p.metrics.queueRejected.WithLabelValues(reason).Inc()
	}
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
