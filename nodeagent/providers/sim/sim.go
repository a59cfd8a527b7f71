// Package sim is iop's built-in simulated model: a provider that needs no
// other software. It answers with deterministic, prompt-derived text (or a
// tool call when the request offers tools), at a configurable token
// latency, with usage counts, and can be scripted to misbehave — stall
// before its first token or after N tokens, cut the stream, answer with an
// HTTP-style error, send a slow first token or a malformed chunk — so every
// behaviour of the gateway can be demonstrated and tested. It serves the
// normalized path (Execute) and the tunnel path (Tunnel, OpenAI-compatible
// bytes), and its probe reports availability per configuration.
package sim

import (
	"context"
	"sync"
	"time"

	"github.com/iopgw/iop/execution"
)

// Config scripts a sim provider. Zero values mean "behave".
type Config struct {
	ID          string
	InstanceKey string
	Target      string
	Models      []string

	TokenLatency    time.Duration // between tokens; default 20ms
	FirstTokenDelay time.Duration // extra delay before the first token
	MaxTokens       int           // answer length cap; default 24

	StallBeforeFirst bool // never produce a token (until cancelled)
	StallAfter       int  // stall after N tokens
	StallAttempts    int  // stall only the first N attempts; 0 = all
	CutAfter         int  // end abruptly after N tokens
	MalformedAt      int  // event N is invalid (tunnel) / a decode error (normalized)
	ErrorStatus      int  // answer with this status
	ErrorCount       int  // only the first N attempts get ErrorStatus; 0 = all
	IgnoreCancel     bool // hold the attempt for a while after cancellation

	ProbeUnavailable bool // the probe reports the target unavailable
	// UnhealthyAfterStall makes the probe report unavailable from the
	// moment an attempt stalls until this long after the stall ends.
	UnhealthyAfterStall time.Duration
}

// IgnoreCancelHold is how long an IgnoreCancel sim keeps an attempt after
// cancellation: longer than any close grace, so its fence is unconfirmed.
const IgnoreCancelHold = 10 * time.Second

// Provider is a sim provider. It is safe for concurrent use.
type Provider struct {
	cfg Config

	mu        sync.Mutex // guards the following fields
	attempts  int
	stalling  int
	recoverAt time.Time
}

var (
	_ execution.Provider       = (*Provider)(nil)
	_ execution.Tunneler       = (*Provider)(nil)
	_ execution.ProviderProber = (*Provider)(nil)
)

// New returns a sim provider.
func New(cfg Config) *Provider {
	if cfg.TokenLatency == 0 {
		cfg.TokenLatency = 20 * time.Millisecond
	}
	if cfg.MaxTokens <= 0 {
		cfg.MaxTokens = 24
	}
	return &Provider{cfg: cfg}
}

// plan is what one attempt will do.
type plan struct {
	errorStatus int
	stallAt     int // token index to stall at; -1 = never
	cutAt       int // -1 = never
	malformedAt int // -1 = never
}

func (p *Provider) nextPlan() plan {
	p.mu.Lock()
	p.attempts++
	n := p.attempts
	p.mu.Unlock()
	pl := plan{stallAt: -1, cutAt: -1, malformedAt: -1}
	if p.cfg.ErrorStatus != 0 && (p.cfg.ErrorCount == 0 || n <= p.cfg.ErrorCount) {
		pl.errorStatus = p.cfg.ErrorStatus
	}
	if p.cfg.StallAttempts == 0 || n <= p.cfg.StallAttempts {
		switch {
		case p.cfg.StallBeforeFirst:
			pl.stallAt = 0
		case p.cfg.StallAfter > 0:
			pl.stallAt = p.cfg.StallAfter
		}
	}
	if p.cfg.CutAfter > 0 {
		pl.cutAt = p.cfg.CutAfter
	}
	if p.cfg.MalformedAt > 0 {
		pl.malformedAt = p.cfg.MalformedAt - 1
	}
	return pl
}

// stall blocks like a hung upstream until ctx ends (and, with
// IgnoreCancel, for IgnoreCancelHold more), marking the provider unhealthy
// for the probe meanwhile.
func (p *Provider) stall(ctx context.Context) error {
	p.mu.Lock()
	p.stalling++
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		p.stalling--
		if until := time.Now().Add(p.cfg.UnhealthyAfterStall); until.After(p.recoverAt) {
			p.recoverAt = until
		}
		p.mu.Unlock()
	}()
	<-ctx.Done()
	if p.cfg.IgnoreCancel {
		time.Sleep(IgnoreCancelHold)
	}
	return ctx.Err()
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// ProbeTarget implements [execution.ProviderProber]: an exact target it
// serves is available unless scripted otherwise; any other target is
// unavailable.
func (p *Provider) ProbeTarget(ctx context.Context, req execution.ProbeRequest) (execution.ProbeResult, error) {
	res := execution.ProbeResult{Adapter: "sim", InstanceKey: p.cfg.InstanceKey, Target: req.Target, Status: execution.HealthAvailable}
	if err := ctx.Err(); err != nil {
		return res, err
	}
	p.mu.Lock()
	unhealthy := p.cfg.UnhealthyAfterStall > 0 && (p.stalling > 0 || time.Now().Before(p.recoverAt))
	p.mu.Unlock()
	if p.cfg.ProbeUnavailable || unhealthy || !p.serves(req.Target) {
		res.Status = execution.HealthUnavailable
	}
	return res, nil
}

func (p *Provider) serves(model string) bool {
	for _, m := range p.cfg.Models {
		if m == model {
			return true
		}
	}
	return false
}
