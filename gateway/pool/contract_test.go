package pool

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/iopgw/iop/internal/testing/wait"
)

// Regression tests for the contract audit of issue 32 (edge overlay and
// health observations), named after the rules they guard and driven
// through the pool's exported seam (AcceptStall, ApplyProbe, Snapshot).

// TestStallEvidenceOnlyExactPairsPass guards "the joined
// liveness_classification/provider_health pair is exactly
// request_stalled/available, provider_unhealthy/unavailable, or
// health_unknown/unknown": any other pair, an unknown classification
// included, is malformed — no handoff, rejected_ambiguous — and the
// lease is still released once.
func TestStallEvidenceOnlyExactPairsPass(t *testing.T) {
	own := Reception{NodeID: "n1", ConnectionGeneration: 7}
	for _, tt := range []struct {
		class, health string
		ok            bool
	}{
		{"request_stalled", "available", true},
		{"provider_unhealthy", "unavailable", true},
		{"health_unknown", "unknown", true},
		{"garbage", "unknown", false},
		{"", "unknown", false},
		{"unknown", "unknown", false},
		{"request_stalled", "unknown", false},
		{"health_unknown", "available", false},
		{"provider_unhealthy", "unknown", false},
		{"REQUEST_STALLED", "available", false},
	} {
		t.Run(tt.class+"/"+tt.health, func(t *testing.T) {
			p, rec, _, _ := overlayPool(t)
			l := leaseFor(t, p, "a")
			releases := 0
			v := p.AcceptStall(l, own, stall(tt.health, tt.class, "confirmed", "3", true), func() { releases++; l.Release() })
			handoff := v.Failure.Metadata[recoveryHandoffKey] == "confirmed"
			if handoff != tt.ok || releases != 1 || !l.Released() {
				t.Fatalf("handoff %v (want %v), releases %d", handoff, tt.ok, releases)
			}
			if got := rec.last().decision; (got == "rejected_ambiguous") == tt.ok {
				t.Fatalf("decision %s", got)
			}
		})
	}
}

const recoveryHandoffKey = "recovery_handoff"

// TestHealthObservationDeliveredAfterRelease guards "Edge delivery is
// synchronous after decision/release/pump and after the queue lock is
// released": when the observer sees the stall's observation, the lease
// is already released and a request queued for its slot already holds it.
func TestHealthObservationDeliveredAfterRelease(t *testing.T) {
	p, _, _, _ := overlayPool(t)
	for range 3 { // every slot but one (overlayPool: two providers, capacity 2 each)
		if _, err := p.Acquire(t.Context(), ProviderPoolDispatchRequest{Model: "llama3.2"}); err != nil {
			t.Fatal(err)
		}
	}
	l, err := p.Acquire(t.Context(), ProviderPoolDispatchRequest{Model: "llama3.2"}) // the last free slot
	if err != nil {
		t.Fatal(err)
	}
	queued := make(chan *Lease, 1)
	go func() {
		q, err := p.Acquire(t.Context(), ProviderPoolDispatchRequest{Model: "llama3.2"})
		if err != nil {
			t.Error(err)
		}
		queued <- q
	}()
	wait.Until(t, func() bool { return p.QueueDepth("llama3.2") == 1 })
	var atDelivery struct {
		released bool
		queue    int
	}
	p.observer.hook = func(HealthObservation) {
		atDelivery.released, atDelivery.queue = l.Released(), p.QueueDepth("llama3.2")
	}
	f := stall("available", "request_stalled", "confirmed", "1", true)
	p.AcceptStall(l, Reception{NodeID: "n1", ConnectionGeneration: 7}, f, func() { l.Release() })
	if !atDelivery.released || atDelivery.queue != 0 {
		t.Fatalf("at delivery: lease released %v, still queued %d", atDelivery.released, atDelivery.queue)
	}
	if q := <-queued; q == nil {
		t.Fatal("the queued request got no lease")
	}
}

// TestHealthLogStaysInItsClosedSet guards "from_health/to_health ∈
// {available, unavailable, unknown}" for every record, also when the
// state does not change (before: "").
func TestHealthLogStaysInItsClosedSet(t *testing.T) {
	p, _, _, buf := overlayPool(t)
	own := Reception{NodeID: "n1", ConnectionGeneration: 7}
	l := leaseFor(t, p, "a")
	p.AcceptStall(l, own, stall("available", "request_stalled", "confirmed", "1", true), nil)                  // applied, no change
	p.AcceptStall(l, own, stall("unknown", "health_unknown", "confirmed", "2", true), nil)                     // inconclusive
	p.AcceptStall(l, own, stall("available", "request_stalled", "confirmed", "2", true), nil)                  // stale
	p.AcceptStall(l, own, stall("unavailable", "provider_unhealthy", "confirmed", "3", true), nil)             // lowers
	p.AcceptStall(l, Reception{NodeID: "n9"}, stall("unknown", "health_unknown", "confirmed", "4", true), nil) // owner mismatch
	p.ApplyProbe(ProbeResult{NodeID: "n1", Generation: 7, ProviderID: "a", AdapterKey: "http://gpu:11434", Target: "llama3.2", Status: "unknown", Seq: 5})
	p.ApplyProbe(ProbeResult{NodeID: "n1", Generation: 7, ProviderID: "a", AdapterKey: "http://gpu:11434", Target: "llama3.2", Status: "bogus", Seq: 6})
	p.ApplyProbe(ProbeResult{NodeID: "n1", Generation: 7, ProviderID: "a", AdapterKey: "http://gpu:11434", Target: "llama3.2", Status: "available", Seq: 7})
	l.Release()
	records := 0
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var r map[string]any
		if err := json.Unmarshal([]byte(line), &r); err != nil || r["msg"] != "edge_provider_health_observation" {
			continue
		}
		records++
		for _, k := range []string{"from_health", "to_health"} {
			if v, _ := r[k].(string); v != "available" && v != "unavailable" && v != "unknown" {
				t.Fatalf("%s=%q in %s", k, v, line)
			}
		}
		if r["state_changed"] == false && r["from_health"] != r["to_health"] {
			t.Fatalf("no change but %v → %v", r["from_health"], r["to_health"])
		}
	}
	if records != 8 {
		t.Fatalf("%d observation records, want 8:\n%s", records, buf.String())
	}
}
