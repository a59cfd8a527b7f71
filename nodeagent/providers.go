package nodeagent

import (
	"fmt"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/iopgw/iop/execution"
	"github.com/iopgw/iop/nodeagent/providers/httpx"
	"github.com/iopgw/iop/nodeagent/providers/ollama"
	"github.com/iopgw/iop/nodeagent/providers/openai"
	"github.com/iopgw/iop/nodeagent/providers/sim"
)

// buildRegistry constructs every configured provider and registers it.
func buildRegistry(cfg Config, malformed *prometheus.CounterVec, log *slog.Logger) (*execution.Registry, error) {
	reg := execution.NewRegistry()
	for i := range cfg.Providers {
		pc := &cfg.Providers[i]
		p, err := newProvider(pc, malformed, log)
		if err != nil {
			return nil, fmt.Errorf("providers[%d]: %w", i, err)
		}
		if err := reg.Register(descriptorOf(pc), p); err != nil {
			return nil, err
		}
	}
	return reg, nil
}

func newProvider(pc *ProviderConfig, malformed *prometheus.CounterVec, log *slog.Logger) (execution.Provider, error) {
	cred := httpx.Credentials{APIKey: pc.APIKey, Headers: pc.Headers, Forward: pc.ForwardHeaders}
	switch pc.Adapter {
	case "sim":
		s := pc.Sim
		return sim.New(sim.Config{
			ID: pc.ID, InstanceKey: pc.InstanceKey, Target: pc.Target, Models: pc.Models,
			TokenLatency: s.TokenLatency, FirstTokenDelay: s.FirstTokenDelay, MaxTokens: s.MaxTokens,
			StallBeforeFirst: s.StallBeforeFirst, StallAfter: s.StallAfter, StallAttempts: s.StallAttempts,
			CutAfter: s.CutAfter, MalformedAt: s.MalformedAt, ErrorStatus: s.ErrorStatus, ErrorCount: s.ErrorCount,
			IgnoreCancel: s.IgnoreCancel, ProbeUnavailable: s.Probe == "unavailable", UnhealthyAfterStall: s.UnhealthyAfterStall,
		}), nil
	case "ollama":
		return ollama.New(ollama.Config{BaseURL: pc.BaseURL, InstanceKey: pc.InstanceKey, Credentials: cred, Client: httpx.NewClient(pc.Capacity)}), nil
	case "openai":
		return openai.New(openai.Config{BaseURL: pc.BaseURL, InstanceKey: pc.InstanceKey, Credentials: cred, NonStream: pc.NonStream, Client: httpx.NewClient(pc.Capacity),
			PrefillFields: pc.PrefillFields,
			OnMalformed: func() {
				malformed.WithLabelValues(pc.Adapter).Inc()
				log.Debug("upstream event skipped: not the JSON expected", "provider_id", pc.ID, "adapter", pc.Adapter)
			}}), nil
	}
	return nil, fmt.Errorf("unknown adapter %q", pc.Adapter)
}

// descriptorOf is a provider config's registry identity and shape.
func descriptorOf(pc *ProviderConfig) execution.ProviderDescriptor {
	return execution.ProviderDescriptor{
		ProviderID: pc.ID, Adapter: pc.Adapter, InstanceKey: pc.InstanceKey, Target: pc.Target,
		Models: pc.Models, Capacity: pc.Capacity, ResponseStallTimeoutMS: pc.ResponseStallTimeoutMS,
	}
}
