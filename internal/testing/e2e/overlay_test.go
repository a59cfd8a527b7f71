package e2e

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/iopgw/iop/gateway"
	"github.com/iopgw/iop/gateway/pool"
	"github.com/iopgw/iop/nodeagent"
)

func adminProviders(t *testing.T, c *Cluster) map[string]pool.ProviderSnapshot {
	t.Helper()
	resp, err := http.Get(c.AdminURL + "/admin/providers")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Providers []pool.ProviderSnapshot `json:"providers"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	out := map[string]pool.ProviderSnapshot{}
	for _, p := range body.Providers {
		out[p.LocalProviderID] = p
	}
	return out
}

// TestOverlayLowersAndRecoversEndToEnd: sim-a stalls and its probe reports
// unavailable; the edge lowers it, excludes it from admission, and
// restores it (with its capacity) once a CAPABILITIES probe reports
// available again.
func TestOverlayLowersAndRecoversEndToEnd(t *testing.T) {
	c := Start(t, Options{Gateway: func(g *gateway.Config) {
		g.Providers = []pool.ProviderPolicy{{ID: "node-a/sim-a", Priority: 10}}
		g.Overlay = pool.OverlayConfig{RecoveryInterval: 200 * time.Millisecond, RecoveryMaxInterval: 400 * time.Millisecond}
	}}, func(c *Cluster) []NodeSpec {
		a := Sim("sim-a", nodeagent.SimConfig{StallBeforeFirst: true, StallAttempts: 1, UnhealthyAfterStall: time.Second})
		a.ResponseStallTimeoutMS, a.Capacity = 300, 3
		b := Sim("sim-b", nodeagent.SimConfig{})
		return []NodeSpec{{ID: "node-a", Providers: []nodeagent.ProviderConfig{a, b},
			Configure: func(n *nodeagent.Config) { n.Liveness.CloseGrace = 200 * time.Millisecond }}}
	})
	appliedBefore := c.Metric(t, "iop_edge_provider_health_evidence_total", map[string]string{"source": "stall", "evidence_health": "unavailable", "decision": "applied"})
	r := streamChat(t, c.URL, "iop-sim")
	if r.status != 200 || r.done != 1 || len(r.errors) != 0 {
		t.Fatalf("client %+v", r)
	}
	snap := adminProviders(t, c)
	if a := snap["sim-a"]; a.Status != "unavailable" || a.Health != "unavailable" || a.EffectiveCapacity != 0 || a.LastObservationSeq == 0 {
		t.Fatalf("sim-a after its stall: %+v", a)
	}
	if d := c.Metric(t, "iop_edge_provider_health_evidence_total", map[string]string{"source": "stall", "evidence_health": "unavailable", "decision": "applied"}) - appliedBefore; d != 1 {
		t.Fatalf("stall evidence applied +%v", d)
	}
	// Excluded: every request goes to sim-b meanwhile.
	for range 3 {
		if r := streamChat(t, c.URL, "iop-sim"); r.done != 1 {
			t.Fatalf("while lowered: %+v", r)
		}
	}
	lowered := time.Now()
	deadline := lowered.Add(5 * time.Second)
	for {
		a := adminProviders(t, c)["sim-a"]
		if a.Status == "available" {
			if a.Health != "available" || a.EffectiveCapacity != 3 {
				t.Fatalf("recovered snapshot %+v", a)
			}
			t.Logf("recovered %v after lowering (unhealthy window 1s, probe interval 200ms doubling to 400ms)", time.Since(lowered))
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("sim-a never recovered: %+v", a)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if c.Metric(t, "iop_edge_provider_health_transitions_total", map[string]string{"from_health": "unavailable", "to_health": "available"}) < 1 {
		t.Fatal("no recovery transition recorded")
	}
	c.WaitIdle(t)
}
