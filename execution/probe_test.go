package execution

import (
	"context"
	"errors"
	"fmt"
	"testing"
)

func TestClassifyAndNormalizeProbeOutcome(t *testing.T) {
	req := ProbeRequest{Adapter: "ollama", InstanceKey: "http://gpu:11434", Target: "llama3.2"}
	match := func(s HealthStatus) ProbeResult {
		return ProbeResult{Adapter: "ollama", InstanceKey: "http://gpu:11434", Target: "llama3.2", Status: s}
	}
	unpinned := req
	unpinned.InstanceKey = ""
	tests := []struct {
		name      string
		o         ProbeOutcome
		wantClass LivenessClassification
		wantHlth  ProviderHealth
	}{
		{"available", ProbeOutcome{Requested: req, Result: match(HealthAvailable)}, LivenessAvailable, ProviderHealthRequestStalled},
		{"validated matching unavailable", ProbeOutcome{Requested: req, Result: match(HealthUnavailable)}, LivenessUnavailable, ProviderHealthProviderUnhealthy},
		{"unknown status", ProbeOutcome{Requested: req, Result: match(HealthUnknown)}, LivenessUnknown, ProviderHealthUnknown},
		{"empty status", ProbeOutcome{Requested: req, Result: match("")}, LivenessUnknown, ProviderHealthUnknown},
		{"non-normalized status", ProbeOutcome{Requested: req, Result: match("Available")}, LivenessUnknown, ProviderHealthUnknown},
		{"error", ProbeOutcome{Requested: req, Err: errors.New("connection refused")}, LivenessError, ProviderHealthUnknown},
		{"error takes precedence over available", ProbeOutcome{Requested: req, Result: match(HealthAvailable), Err: errors.New("decode")}, LivenessError, ProviderHealthUnknown},
		{"error takes precedence over unavailable", ProbeOutcome{Requested: req, Result: match(HealthUnavailable), Err: fmt.Errorf("HTTP 500")}, LivenessError, ProviderHealthUnknown},
		{"timeout", ProbeOutcome{Requested: req, Err: context.DeadlineExceeded}, LivenessTimeout, ProviderHealthUnknown},
		{"wrapped timeout over unavailable", ProbeOutcome{Requested: req, Result: match(HealthUnavailable), Err: fmt.Errorf("get tags: %w", context.DeadlineExceeded)}, LivenessTimeout, ProviderHealthUnknown},
		{"cancelled is an error", ProbeOutcome{Requested: req, Err: context.Canceled}, LivenessError, ProviderHealthUnknown},
		{"unsupported adapter", ProbeOutcome{Requested: req, Unsupported: true}, LivenessUnsupported, ProviderHealthUnknown},
		{"empty requested adapter", ProbeOutcome{Requested: ProbeRequest{Target: "llama3.2"}, Result: ProbeResult{Target: "llama3.2", Status: HealthAvailable}}, LivenessIdentityMismatch, ProviderHealthUnknown},
		{"empty requested target", ProbeOutcome{Requested: ProbeRequest{Adapter: "ollama"}, Result: ProbeResult{Adapter: "ollama", Status: HealthUnavailable}}, LivenessIdentityMismatch, ProviderHealthUnknown},
		{"adapter mismatch", ProbeOutcome{Requested: req, Result: ProbeResult{Adapter: "openai", InstanceKey: req.InstanceKey, Target: req.Target, Status: HealthAvailable}}, LivenessIdentityMismatch, ProviderHealthUnknown},
		{"target mismatch", ProbeOutcome{Requested: req, Result: ProbeResult{Adapter: "ollama", InstanceKey: req.InstanceKey, Target: "llama3.1", Status: HealthUnavailable}}, LivenessIdentityMismatch, ProviderHealthUnknown},
		{"empty reported target", ProbeOutcome{Requested: req, Result: ProbeResult{Adapter: "ollama", InstanceKey: req.InstanceKey, Status: HealthAvailable}}, LivenessIdentityMismatch, ProviderHealthUnknown},
		{"pinned instance mismatch", ProbeOutcome{Requested: req, Result: ProbeResult{Adapter: "ollama", InstanceKey: "http://other:11434", Target: req.Target, Status: HealthAvailable}}, LivenessIdentityMismatch, ProviderHealthUnknown},
		{"unpinned instance accepts any", ProbeOutcome{Requested: unpinned, Result: match(HealthAvailable)}, LivenessAvailable, ProviderHealthRequestStalled},
		{"zero outcome", ProbeOutcome{}, LivenessIdentityMismatch, ProviderHealthUnknown},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ClassifyProbeOutcome(tt.o); got != tt.wantClass {
				t.Errorf("ClassifyProbeOutcome = %s, want %s", got, tt.wantClass)
			}
			if got := NormalizeProbeOutcome(tt.o); got != tt.wantHlth {
				t.Errorf("NormalizeProbeOutcome = %s, want %s", got, tt.wantHlth)
			}
		})
	}
}

func TestProviderHealthPairs(t *testing.T) {
	tests := []struct {
		h    ProviderHealth
		want HealthStatus
	}{
		{ProviderHealthRequestStalled, HealthAvailable},
		{ProviderHealthProviderUnhealthy, HealthUnavailable},
		{ProviderHealthUnknown, HealthUnknown},
		{"bogus", HealthUnknown},
	}
	for _, tt := range tests {
		if got := tt.h.Status(); got != tt.want {
			t.Errorf("%q.Status() = %s, want %s", tt.h, got, tt.want)
		}
	}
	for in, want := range map[string]HealthStatus{"available": HealthAvailable, "unavailable": HealthUnavailable, "unknown": HealthUnknown, "": HealthUnknown, "AVAILABLE": HealthUnknown, "up": HealthUnknown} {
		if got := NormalizeHealthStatus(in); got != want {
			t.Errorf("NormalizeHealthStatus(%q) = %s, want %s", in, got, want)
		}
	}
}

type plainProvider struct{}

func (plainProvider) Execute(context.Context, *RunRequest, *Emitter) error { return nil }

type probingProvider struct {
	plainProvider
	calls int
}

func (p *probingProvider) ProbeTarget(_ context.Context, req ProbeRequest) (ProbeResult, error) {
	p.calls++
	return ProbeResult{Adapter: req.Adapter, Target: req.Target, Status: HealthAvailable}, nil
}

var (
	_ Provider       = plainProvider{}
	_ ProviderProber = (*probingProvider)(nil)
)

func TestResolveProbeFunc(t *testing.T) {
	if f := ResolveProbeFunc(plainProvider{}); f != nil {
		t.Fatal("ResolveProbeFunc returned a hook for a provider without ProviderProber")
	}
	p := &probingProvider{}
	f := ResolveProbeFunc(p)
	if f == nil {
		t.Fatal("ResolveProbeFunc returned nil for a ProviderProber")
	}
	res, err := f(context.Background(), ProbeRequest{Adapter: "sim", Target: "m"})
	if err != nil || res.Status != HealthAvailable || p.calls != 1 {
		t.Fatalf("hook = %+v, %v, calls %d", res, err, p.calls)
	}
}
