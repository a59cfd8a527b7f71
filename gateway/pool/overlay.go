package pool

import (
	"time"

	"github.com/iopgw/iop/execution"
)

// overlayEntry is the runtime health overlay of one provider on one
// connection generation — separate from configuration health.
type overlayEntry struct {
	lowered   bool
	lastSeq   uint64 // last applied observation sequence
	reason    string // why it was lowered (closed vocabulary)
	loweredAt time.Time
	nextProbe time.Time
	interval  time.Duration
	target    string // the exact target whose stall lowered it; recovery probes it
}

// StallVerdict is the edge's decision on one stall terminal.
type StallVerdict struct {
	// Failure is what the request runtime receives: on a validated current
	// bound stall, annotated with the edge-owned provider_id, the validated
	// provider_health and recovery_handoff=confirmed; otherwise without the
	// handoff token.
	Failure *execution.ExecutionFailure
	// ReleaseLease is false only for a reception-owner mismatch, which
	// changes neither overlay nor lease state.
	ReleaseLease bool
}

// AcceptStall validates a stall terminal received on reception for lease
// l. The observation is projected provider-wide only when the reception
// matches the lease, the local attempt fence is confirmed, the metadata
// binds to the lease's adapter and target, the liveness_classification /
// provider_health pair is one of the three exact pairs, and the sequence
// is strictly newer than the last applied for the key; only a fresh
// unavailable lowers the overlay. It never authorizes retry.
//
// release is called once when the verdict releases the lease (every case
// but a reception-owner mismatch), after the decision and before the
// health observation is delivered: the contract orders delivery after
// decision, release and queue pump, outside the pool lock, so a slow
// observer never delays the slot's release.
func (p *Pool) AcceptStall(l *Lease, r Reception, f *execution.ExecutionFailure, release func()) StallVerdict {
	v, obs := p.decideStall(l, r, f)
	if v.ReleaseLease && release != nil {
		release()
	}
	p.observer.observe(obs)
	return v
}

// decideStall is AcceptStall's decision and the observation it yields;
// the failure handed on carries its evidence's contract form too.
func (p *Pool) decideStall(l *Lease, r Reception, f *execution.ExecutionFailure) (StallVerdict, HealthObservation) {
	v, obs := p.judgeStall(l, r, f)
	v.Failure.Metadata = v.Failure.Stall.Metadata()
	return v, obs
}

// judgeStall validates the stall's evidence against the lease.
func (p *Pool) judgeStall(l *Lease, r Reception, f *execution.ExecutionFailure) (StallVerdict, HealthObservation) {
	out := &execution.ExecutionFailure{Code: execution.FailureCodeResponseStalled, Message: execution.StalledMessage, Retryable: f.Retryable}
	if !l.Owns(r) {
		return StallVerdict{Failure: out}, HealthObservation{source: "stall", evidence: "unknown", decision: "rejected_binding"}
	}
	ev := f.Stall
	if ev == nil {
		ev = &execution.StallEvidence{}
	}
	health, fence := ev.Health, ev.Fence
	verdict := &execution.StallEvidence{Fence: fence}
	out.Stall = verdict
	released := StallVerdict{Failure: out, ReleaseLease: true}
	switch {
	case !exactPair(ev.Classification, health) || fence == "":
		return released, HealthObservation{source: "stall", evidence: "unknown", decision: "rejected_ambiguous"}
	case ev.Adapter != l.Adapter || ev.Target != l.Target:
		return released, HealthObservation{source: "stall", evidence: string(health), decision: "rejected_binding"}
	case fence != execution.AttemptFenceConfirmed || !f.Retryable:
		return released, HealthObservation{source: "stall", evidence: string(health), decision: "rejected_binding"}
	}
	// A validated current bound stall: annotate, whatever the sequence says.
	verdict.ProviderID, verdict.Health, verdict.HandoffConfirmed = l.ProviderID, health, true
	seq := ev.Seq
	if seq == 0 {
		return released, HealthObservation{source: "stall", evidence: string(health), decision: "rejected_ambiguous"}
	}
	return released, p.applyStall(l, health, seq)
}

// exactPair reports whether class and health are one of the contract's
// three joined pairs: request_stalled/available,
// provider_unhealthy/unavailable, health_unknown/unknown. Anything else,
// an unknown class included, is malformed evidence.
func exactPair(c execution.ProviderHealth, health execution.HealthStatus) bool {
	return c.Valid() && health.Valid() && c.Status() == health
}

// applyStall projects a validated stall observation onto the overlay and
// returns the observation to deliver once the lease is released.
func (p *Pool) applyStall(l *Lease, health execution.HealthStatus, seq uint64) HealthObservation {
	k := ProviderKey{NodeID: l.NodeID, Generation: l.ConnectionGeneration, ProviderID: l.LocalProviderID}
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, live := p.providers[k]; !live {
		return HealthObservation{source: "stall", evidence: string(health), decision: "rejected_binding"}
	}
	e := p.overlay[k]
	if e == nil {
		e = &overlayEntry{}
		p.overlay[k] = e
	}
	state := e.health()
	if seq <= e.lastSeq {
		return HealthObservation{source: "stall", evidence: string(health), decision: "rejected_stale", from: state, to: state}
	}
	e.lastSeq = seq
	obs := HealthObservation{source: "stall", evidence: string(health), decision: "applied", provider: l.ProviderID, from: state, to: state}
	switch health {
	case execution.HealthUnavailable:
		if !e.lowered {
			e.lowered, e.reason, e.loweredAt, e.target = true, "stall_provider_unhealthy", time.Now(), l.Target
			e.interval = p.recoveryInterval()
			e.nextProbe = e.loweredAt.Add(e.interval)
			obs.to, obs.changed = "unavailable", true
		}
	case execution.HealthUnknown:
		obs.decision = "inconclusive"
	}
	return obs
}

// health is the overlay state of the entry's provider: unavailable while
// lowered, else available (the overlay only ever lowers).
func (e *overlayEntry) health() string {
	if e.lowered {
		return string(execution.HealthUnavailable)
	}
	return string(execution.HealthAvailable)
}

// ProbeResult is a CAPABILITIES result for a lowered provider.
type ProbeResult struct {
	NodeID     string
	Generation uint64
	ProviderID string // the node's provider id
	AdapterKey string
	Target     string
	Status     string
	Seq        uint64
}

// ApplyProbe applies a CAPABILITIES result. Recovery needs the same
// current adapter/target mapping, a strictly higher sequence and exactly
// available; malformed, ambiguous, stale-generation, unknown and
// unavailable results change nothing.
func (p *Pool) ApplyProbe(r ProbeResult) {
	k := ProviderKey{NodeID: r.NodeID, Generation: r.Generation, ProviderID: r.ProviderID}
	status := execution.HealthStatus(r.Status)
	p.mu.Lock()
	pp, live := p.providers[k]
	e := p.overlay[k]
	var obs HealthObservation
	state := string(execution.HealthUnknown)
	if e != nil {
		state = e.health()
	}
	switch {
	case !status.Valid() || r.Seq == 0:
		obs = HealthObservation{source: "probe", evidence: "unknown", decision: "rejected_ambiguous"}
	case !live || e == nil || pp.ad.GetInstanceKey() != r.AdapterKey || e.target != r.Target:
		obs = HealthObservation{source: "probe", evidence: string(status), decision: "rejected_binding"}
	case r.Seq <= e.lastSeq:
		obs = HealthObservation{source: "probe", evidence: string(status), decision: "rejected_stale"}
	case status != execution.HealthAvailable:
		// Unknown and unavailable results are no-ops on the overlay (no
		// sequence advance, no state change: inconclusive); only the
		// probe schedule, which is not overlay state, backs off.
		p.backoffLocked(e)
		obs = HealthObservation{source: "probe", evidence: string(status), decision: "inconclusive"}
	default:
		e.lastSeq = r.Seq
		obs = HealthObservation{source: "probe", evidence: "available", decision: "applied"}
		if e.lowered {
			e.lowered, e.reason = false, ""
			obs.from, obs.to, obs.changed = "unavailable", "available", true
		}
	}
	obs.provider = k.ID()
	if !obs.changed {
		obs.from, obs.to = state, state
	}
	recovered := obs.changed
	if recovered {
		p.pumpLocked()
	}
	p.mu.Unlock()
	p.observer.observe(obs)
}

func (p *Pool) backoffLocked(e *overlayEntry) {
	e.interval = min(e.interval*2, p.recoveryMax())
	e.nextProbe = time.Now().Add(e.interval)
}

func (p *Pool) recoveryInterval() time.Duration {
	if p.overlayCfg.RecoveryInterval > 0 {
		return p.overlayCfg.RecoveryInterval
	}
	return 5 * time.Second
}

func (p *Pool) recoveryMax() time.Duration {
	if p.overlayCfg.RecoveryMaxInterval > 0 {
		return p.overlayCfg.RecoveryMaxInterval
	}
	return 60 * time.Second
}

// ProbeTarget is a lowered provider due for a recovery probe.
type ProbeTarget struct {
	Key         ProviderKey
	InstanceKey string
	Target      string
}

// DueProbes returns lowered providers whose next probe is due, and marks
// them probed (the next probe waits for a result's backoff).
func (p *Pool) DueProbes(now time.Time) []ProbeTarget {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []ProbeTarget
	for k, e := range p.overlay {
		pp, live := p.providers[k]
		if !e.lowered || !live || now.Before(e.nextProbe) {
			continue
		}
		e.nextProbe = now.Add(e.interval)
		out = append(out, ProbeTarget{Key: k, InstanceKey: pp.ad.GetInstanceKey(), Target: e.target})
	}
	return out
}
