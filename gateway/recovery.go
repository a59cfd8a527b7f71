package gateway

import (
	"context"
	"time"

	"github.com/iopgw/iop/execution"
	"github.com/iopgw/iop/wire"
)

// recoveryTick is how often the edge looks for lowered providers due for
// a recovery probe.
const recoveryTick = 250 * time.Millisecond

// runRecoveryProbes sends CAPABILITIES probes to providers the runtime
// overlay lowered, at the configured interval with doubling backoff, and
// applies their results. Only a later, strictly newer, exactly available
// result for the same adapter/target mapping recovers a provider.
func (g *Gateway) runRecoveryProbes(ctx context.Context) {
	t := time.NewTicker(recoveryTick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			for _, pt := range g.pool.dueProbes(now) {
				g.probe(ctx, pt)
			}
		}
	}
}

func (g *Gateway) probe(ctx context.Context, pt probeTarget) {
	owner := Reception{NodeID: pt.key.NodeID, ConnectionGeneration: pt.key.Generation}
	res, err := g.hub.command(ctx, owner, &wire.Command{Command: string(execution.CommandCapabilities),
		ProviderId: pt.key.ProviderID, AdapterKey: pt.instanceKey, Target: pt.target})
	if err != nil {
		g.log.Debug("recovery probe failed", "error", err.Error())
		return
	}
	caps := res.GetCapabilities()
	g.pool.ApplyProbe(ProbeResult{NodeID: pt.key.NodeID, Generation: pt.key.Generation, ProviderID: pt.key.ProviderID,
		AdapterKey: caps.GetAdapterKey(), Target: caps.GetTarget(), Status: caps.GetProviderStatus(), Seq: caps.GetHealthObservationSeq()})
}

// probeOnConnect probes each provider of a node that just connected, so
// status shows an unreachable upstream before the first request fails on
// it. The evidence is shown and logged; it never lowers or routes.
func (g *Gateway) probeOnConnect(life context.Context, owner Reception, ads []*wire.ProviderAdvertisement) {
	for _, ad := range ads {
		ctx, cancel := context.WithTimeout(life, 10*time.Second)
		res, err := g.hub.command(ctx, owner, &wire.Command{Command: string(execution.CommandCapabilities),
			ProviderId: ad.GetProviderId(), AdapterKey: ad.GetInstanceKey(), Target: ad.GetTarget()})
		cancel()
		status := string(execution.HealthUnknown)
		if err == nil {
			if s := execution.HealthStatus(res.GetCapabilities().GetProviderStatus()); s.Valid() {
				status = string(s)
			}
		}
		k := providerKey{NodeID: owner.NodeID, Generation: owner.ConnectionGeneration, ProviderID: ad.GetProviderId()}
		g.pool.NoteProbe(k, status)
		if status != string(execution.HealthAvailable) {
			g.log.Warn("provider probe at connect: its upstream does not answer as expected", "provider_id", k.edgeID(), "probe", status)
		}
	}
}
