package fleet

import (
	"context"
	"time"

	"github.com/iopgw/iop/execution"
	"github.com/iopgw/iop/gateway/pool"
	"github.com/iopgw/iop/internal/clock"
	"github.com/iopgw/iop/wire"
)

// recoveryTick is how often the edge looks for lowered providers due for
// a recovery probe.
const recoveryTick = 250 * time.Millisecond

// RunRecoveryProbes sends CAPABILITIES probes to providers the runtime
// overlay lowered, at the configured interval with doubling backoff, and
// applies their results, until ctx ends. Only a later, strictly newer,
// exactly available result for the same adapter/target mapping recovers
// a provider.
func (h *Hub) RunRecoveryProbes(ctx context.Context) {
	for {
		tick, t := clock.After(h.clock, recoveryTick)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-tick:
			for _, pt := range h.pool.DueProbes(h.clock.Now()) {
				h.probe(ctx, pt)
			}
		}
	}
}

func (h *Hub) probe(ctx context.Context, pt pool.ProbeTarget) {
	owner := pool.Reception{NodeID: pt.Key.NodeID, ConnectionGeneration: pt.Key.Generation}
	res, err := h.Command(ctx, owner, &wire.Command{Command: string(execution.CommandCapabilities),
		ProviderId: pt.Key.ProviderID, AdapterKey: pt.InstanceKey, Target: pt.Target})
	if err != nil {
		h.log.Debug("recovery probe failed", "error", err.Error())
		return
	}
	caps := res.GetCapabilities()
	h.pool.ApplyProbe(pool.ProbeResult{NodeID: pt.Key.NodeID, Generation: pt.Key.Generation, ProviderID: pt.Key.ProviderID,
		AdapterKey: caps.GetAdapterKey(), Target: caps.GetTarget(), Status: caps.GetProviderStatus(), Seq: caps.GetHealthObservationSeq()})
}

// probeProviders probes each provider of a node that just connected, so
// status shows an unreachable upstream before the first request fails on
// it. The evidence is shown and logged; it never lowers or routes.
func (h *Hub) probeProviders(life context.Context, owner pool.Reception, ads []*wire.ProviderAdvertisement) {
	for _, ad := range ads {
		ctx, cancel := context.WithTimeout(life, 10*time.Second)
		res, err := h.Command(ctx, owner, &wire.Command{Command: string(execution.CommandCapabilities),
			ProviderId: ad.GetProviderId(), AdapterKey: ad.GetInstanceKey(), Target: ad.GetTarget()})
		cancel()
		status := string(execution.HealthUnknown)
		if err == nil {
			if s := execution.HealthStatus(res.GetCapabilities().GetProviderStatus()); s.Valid() {
				status = string(s)
			}
		}
		k := pool.ProviderKey{NodeID: owner.NodeID, Generation: owner.ConnectionGeneration, ProviderID: ad.GetProviderId()}
		h.pool.NoteProbe(k, status)
		if status != string(execution.HealthAvailable) {
			h.log.Warn("provider probe at connect: its upstream does not answer as expected", "provider_id", k.ID(), "probe", status)
		}
	}
}
