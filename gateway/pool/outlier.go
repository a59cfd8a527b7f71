package pool

import (
	"time"

	"github.com/iopgw/iop/streamgate"
)

// OutlierConfig configures passive outlier ejection (Envoy's
// consecutive_5xx): a provider whose attempts keep failing on the server
// side is taken out of selection for a while, so a provider that fails
// fast cannot attract traffic through least-load selection.
type OutlierConfig struct {
	// Consecutive5xx is how many consecutive server-side failures (5xx,
	// unreachable, cut mid-stream) eject a provider; default 5, negative
	// disables ejection. 429 and 4xx are the client's or the quota's, never
	// the provider's, and neither count nor reset the streak.
	Consecutive5xx int `koanf:"consecutive_5xx"`
	// BaseEjectionTime is the first ejection's length; the n-th
	// consecutive ejection lasts n times as long, up to MaxEjectionTime.
	// Defaults 30s and 300s.
	BaseEjectionTime time.Duration `koanf:"base_ejection_time"`
	MaxEjectionTime  time.Duration `koanf:"max_ejection_time"`
}

func (c OutlierConfig) withDefaults() OutlierConfig {
	if c.Consecutive5xx == 0 {
		c.Consecutive5xx = 5
	}
	if c.BaseEjectionTime <= 0 {
		c.BaseEjectionTime = 30 * time.Second
	}
	if c.MaxEjectionTime <= 0 {
		c.MaxEjectionTime = 300 * time.Second
	}
	return c
}

// outlierState is a provider's failure streak and ejection.
type outlierState struct {
	streak    int       // consecutive server-side failures
	ejections int       // consecutive ejections, for the backoff
	until     time.Time // ejected until
}

func (o *outlierState) ejected(now time.Time) bool { return now.Before(o.until) }

// attemptResult is what an attempt's end says about its provider.
type AttemptResult int

const (
	ResultNeutral AttemptResult = iota // client-side or quota: says nothing
	ResultSuccess
	ResultServerFailure
)

// Report feeds one attempt's result into its lease's provider's outlier
// state, and logs an ejection it caused.
func (p *Pool) Report(l *Lease, r AttemptResult) {
	if p.reportResult(l.slot, r) {
		p.logEjection(l.ProviderID)
	}
}

// reportResult feeds one attempt's result into its provider's outlier
// state and reports whether that ejected the provider.
func (p *Pool) reportResult(pp *pooled, r AttemptResult) bool {
	if r == ResultNeutral {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	cfg := p.outlierCfg // under the lock: Reconfigure replaces it
	if cfg.Consecutive5xx < 0 {
		return false
	}
	o := &pp.outlier
	now := p.now()
	if r == ResultSuccess {
		o.streak = 0
		if o.ejections > 0 && now.Sub(o.until) > cfg.MaxEjectionTime {
			o.ejections = 0 // healthy for a long while: the backoff starts over
		}
		return false
	}
	o.streak++
	if o.streak < cfg.Consecutive5xx || o.ejected(now) {
		return false
	}
	o.streak = 0
	o.ejections++
	o.until = now.Add(min(cfg.BaseEjectionTime*time.Duration(o.ejections), cfg.MaxEjectionTime))
	if p.metrics != nil {
		p.metrics.ejections.Inc()
	}
	return true
}

// routableLocked is the providers that may take req's work: the
// admissible ones minus those ejected as outliers — unless every
// admissible provider is ejected, in which case all of them stay routable
// (panic routing: a degraded provider beats none).
func (p *Pool) routableLocked(model string, need streamgate.Need, surface string, aliases func(string) []ModelTarget) []*pooled {
	now := p.now()
	healthy, ejected := p.scratch.healthy[:0], p.scratch.ejected[:0]
	defer func() { p.scratch.healthy, p.scratch.ejected = healthy, ejected }()
	for _, pp := range p.providers {
		if !p.admissibleLocked(pp, model, need, surface, aliases) {
			continue
		}
		if pp.outlier.ejected(now) {
			ejected = append(ejected, pp)
			continue
		}
		healthy = append(healthy, pp)
	}
	if len(healthy) == 0 {
		return ejected
	}
	return healthy
}

// logEjection records an ejection in the admin event log (the only place
// a provider id is written).
func (p *Pool) logEjection(providerID string) {
	if p.observer == nil || p.observer.events == nil {
		return
	}
	p.mu.Lock()
	var until time.Time
	for _, pp := range p.providers {
		if pp.key.ID() == providerID {
			until = pp.outlier.until
		}
	}
	p.mu.Unlock()
	p.observer.events.Add(Event{Time: p.now(), Kind: "ejection", ProviderID: providerID, Until: &until})
}
