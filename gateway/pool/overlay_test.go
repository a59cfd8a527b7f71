package pool

import (
	"bytes"
	"context"
	"log/slog"
	"maps"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/expfmt"

	"github.com/iopgw/iop/execution"
	"github.com/iopgw/iop/internal/testing/bubble"
	"github.com/iopgw/iop/wire"
)

type obsRecorder struct {
	mu  sync.Mutex
	obs []HealthObservation
}

func (r *obsRecorder) add(o HealthObservation) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.obs = append(r.obs, o)
}

func (r *obsRecorder) last() HealthObservation {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.obs[len(r.obs)-1]
}

func overlayPool(t *testing.T) (*Pool, *obsRecorder, *prometheus.Registry, *bytes.Buffer) {
	reg := prometheus.NewRegistry()
	buf := &bytes.Buffer{}
	o := NewHealthObservability(reg, slog.New(slog.NewJSONHandler(buf, nil)), nil)
	rec := &obsRecorder{}
	o.hook = rec.add
	p := NewPool(PoolConfig{Observer: o, Overlay: OverlayConfig{RecoveryInterval: time.Millisecond, RecoveryMaxInterval: 4 * time.Millisecond}})
	p.SetNode("n1", 7, []*wire.ProviderAdvertisement{
		{ProviderId: "a", Adapter: "ollama", Target: "llama3.2", InstanceKey: "http://gpu:11434", Models: []string{"llama3.2"}, Capacity: 2},
		{ProviderId: "b", Adapter: "ollama", Target: "llama3.2", InstanceKey: "http://gpu2:11434", Models: []string{"llama3.2"}, Capacity: 2},
	})
	return p, rec, reg, buf
}

func stall(health, class, fence string, seq string, retryable bool) *execution.ExecutionFailure {
	md := map[string]string{
		"failure_code": "response_stalled", "provider_health": health, "liveness_classification": class,
		"attempt_fence": fence, "idle_duration_ms": "300000", "run_id": "r", "attempt_id": "a", "adapter": "ollama", "target": "llama3.2",
	}
	if seq != "" {
		md["health_observation_seq"] = seq
	}
	return fromWire(&execution.ExecutionFailure{Code: execution.FailureCodeResponseStalled, Retryable: retryable, Metadata: md})
}

// fromWire is f as the edge receives it: through the wire boundary, which
// parses its metadata into typed evidence.
func fromWire(f *execution.ExecutionFailure) *execution.ExecutionFailure {
	return wire.FailureFromProto("", &wire.ExecutionFailure{Code: string(f.Code), Retryable: f.Retryable, Metadata: f.Metadata}, nil)
}

func leaseFor(t *testing.T, p *Pool, id string) *Lease {
	t.Helper()
	l, err := p.Acquire(context.Background(), ProviderPoolDispatchRequest{Model: "llama3.2", AvoidProviderID: map[string]string{"a": "n1/b", "b": "n1/a"}[id]})
	if err != nil || l.LocalProviderID != id {
		t.Fatalf("lease %v %v", l, err)
	}
	return l
}

func providerStatus(p *Pool, id string) string {
	for _, s := range p.Snapshot() {
		if s.LocalProviderID == id {
			return s.Status
		}
	}
	return "absent"
}

// TestStallAcceptanceRules has one row per acceptance rule of the
// contract's "Edge accepts a typed stall observation" sentences.
func TestStallAcceptanceRules(t *testing.T) {
	own := Reception{NodeID: "n1", ConnectionGeneration: 7}
	tests := []struct {
		name        string
		prior       string // seq applied before, "" for none
		reception   Reception
		failure     *execution.ExecutionFailure
		wantHandoff bool
		wantRelease bool
		wantStatus  string
		wantDecide  string
	}{
		{"match lowers on fresh unavailable", "", own, stall("unavailable", "provider_unhealthy", "confirmed", "3", true), true, true, "unavailable", "applied"},
		{"match available does not lower", "", own, stall("available", "request_stalled", "confirmed", "3", true), true, true, "available", "applied"},
		{"match unknown is inconclusive", "", own, stall("unknown", "health_unknown", "confirmed", "3", true), true, true, "available", "inconclusive"},
		{"owner mismatch changes nothing", "", Reception{NodeID: "n1", ConnectionGeneration: 6}, stall("unavailable", "provider_unhealthy", "confirmed", "3", true), false, false, "available", "rejected_binding"},
		{"other node is an owner mismatch", "", Reception{NodeID: "n2", ConnectionGeneration: 7}, stall("unavailable", "provider_unhealthy", "confirmed", "3", true), false, false, "available", "rejected_binding"},
		{"unconfirmed fence", "", own, stall("unavailable", "provider_unhealthy", "unconfirmed", "3", false), false, true, "available", "rejected_binding"},
		{"confirmed metadata without Retryable", "", own, stall("unavailable", "provider_unhealthy", "confirmed", "3", false), false, true, "available", "rejected_binding"},
		{"equal sequence is stale but annotated", "3", own, stall("unavailable", "provider_unhealthy", "confirmed", "3", true), true, true, "available", "rejected_stale"},
		{"older sequence is stale but annotated", "5", own, stall("unavailable", "provider_unhealthy", "confirmed", "3", true), true, true, "available", "rejected_stale"},
		{"malformed pair", "", own, stall("unavailable", "request_stalled", "confirmed", "3", true), false, true, "available", "rejected_ambiguous"},
		{"malformed health", "", own, stall("down", "provider_unhealthy", "confirmed", "3", true), false, true, "available", "rejected_ambiguous"},
		{"missing metadata", "", own, &execution.ExecutionFailure{Code: execution.FailureCodeResponseStalled, Retryable: true}, false, true, "available", "rejected_ambiguous"},
		{"missing sequence (unbound path)", "", own, stall("unavailable", "provider_unhealthy", "confirmed", "", true), true, true, "available", "rejected_ambiguous"},
		{"target mismatch", "", own, func() *execution.ExecutionFailure {
			f := stall("unavailable", "provider_unhealthy", "confirmed", "3", true)
			f.Metadata["target"] = "other"
			return fromWire(f)
		}(), false, true, "available", "rejected_binding"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, rec, _, _ := overlayPool(t)
			if tt.prior != "" {
				l := leaseFor(t, p, "a")
				p.AcceptStall(l, own, stall("available", "request_stalled", "confirmed", tt.prior, true), nil)
				l.Release()
			}
			l := leaseFor(t, p, "a")
			releases := 0
			v := p.AcceptStall(l, tt.reception, tt.failure, func() { releases++ })
			if releases != map[bool]int{true: 1}[tt.wantRelease] {
				t.Fatalf("release called %d times, want release %v", releases, tt.wantRelease)
			}
			md := v.Failure.Metadata
			handoff := md["recovery_handoff"] == "confirmed"
			if handoff != tt.wantHandoff || v.ReleaseLease != tt.wantRelease {
				t.Fatalf("handoff %v release %v, want %v %v (%v)", handoff, v.ReleaseLease, tt.wantHandoff, tt.wantRelease, md)
			}
			if handoff && (md["provider_id"] != "n1/a" || md["provider_health"] != tt.failure.Metadata["provider_health"]) {
				t.Fatalf("annotation %v", md)
			}
			for k := range md {
				if k == "recovery_eligible" || k == "run_id" || k == "target" {
					t.Fatalf("annotation carries %s", k)
				}
			}
			if got := providerStatus(p, "a"); got != tt.wantStatus {
				t.Fatalf("provider a %s, want %s", got, tt.wantStatus)
			}
			if got := rec.last().decision; got != tt.wantDecide {
				t.Fatalf("decision %s, want %s", got, tt.wantDecide)
			}
			if providerStatus(p, "b") != "available" {
				t.Fatal("another provider was affected")
			}
			if l.Released() {
				t.Fatal("AcceptStall released the lease itself")
			}
			l.Release()
		})
	}
}

// TestOverlayExcludesAndRecovers: a lowered provider is excluded from
// admission; only a later, strictly newer, exactly available
// CAPABILITIES result for the same mapping recovers it.
func TestOverlayExcludesAndRecovers(t *testing.T) {
	p, rec, _, _ := overlayPool(t)
	l := leaseFor(t, p, "a")
	p.AcceptStall(l, Reception{NodeID: "n1", ConnectionGeneration: 7}, stall("unavailable", "provider_unhealthy", "confirmed", "4", true), nil)
	l.Release()
	for range 5 {
		l, err := p.Acquire(context.Background(), ProviderPoolDispatchRequest{Model: "llama3.2"})
		if err != nil || l.LocalProviderID != "b" {
			t.Fatalf("admitted %v %v while a is lowered", l, err)
		}
		l.Release()
	}
	snap := p.Snapshot()[0]
	if snap.Status != "unavailable" || snap.EffectiveCapacity != 0 || snap.OverlayReason == "" || snap.LastObservationSeq != 4 {
		t.Fatalf("snapshot %+v", snap)
	}
	good := ProbeResult{NodeID: "n1", Generation: 7, ProviderID: "a", AdapterKey: "http://gpu:11434", Target: "llama3.2", Status: "available", Seq: 5}
	noops := []struct {
		name     string
		r        ProbeResult
		decision string
	}{
		{"stale sequence", func() ProbeResult { r := good; r.Seq = 4; return r }(), "rejected_stale"},
		{"stale generation", func() ProbeResult { r := good; r.Generation = 6; return r }(), "rejected_binding"},
		{"other adapter key", func() ProbeResult { r := good; r.AdapterKey = "http://other:11434"; return r }(), "rejected_binding"},
		{"other target", func() ProbeResult { r := good; r.Target = "llama3.1"; return r }(), "rejected_binding"},
		{"malformed status", func() ProbeResult { r := good; r.Status = "AVAILABLE"; return r }(), "rejected_ambiguous"},
		{"unknown", func() ProbeResult { r := good; r.Status = "unknown"; return r }(), "inconclusive"},
		{"unavailable", func() ProbeResult { r := good; r.Status, r.Seq = "unavailable", 6; return r }(), "inconclusive"},
	}
	for _, n := range noops {
		p.ApplyProbe(n.r)
		if providerStatus(p, "a") != "unavailable" || rec.last().decision != n.decision {
			t.Fatalf("%s: status %s decision %s", n.name, providerStatus(p, "a"), rec.last().decision)
		}
		if s := p.Snapshot()[0]; s.LastObservationSeq != 4 {
			t.Fatalf("%s: a no-op moved the sequence to %d", n.name, s.LastObservationSeq)
		}
	}
	good.Seq = 7
	p.ApplyProbe(good)
	snap = p.Snapshot()[0]
	if snap.Status != "available" || snap.Health != "available" || snap.EffectiveCapacity != 2 || snap.LastObservationSeq != 7 {
		t.Fatalf("after recovery %+v", snap)
	}
	if o := rec.last(); !o.changed || o.from != "unavailable" || o.to != "available" {
		t.Fatalf("recovery observation %+v", o)
	}
}

func TestNewGenerationDoesNotInheritOverlay(t *testing.T) {
	p, _, _, _ := overlayPool(t)
	l := leaseFor(t, p, "a")
	p.AcceptStall(l, Reception{NodeID: "n1", ConnectionGeneration: 7}, stall("unavailable", "provider_unhealthy", "confirmed", "1", true), nil)
	l.Release()
	if providerStatus(p, "a") != "unavailable" {
		t.Fatal("not lowered")
	}
	p.SetNode("n1", 8, []*wire.ProviderAdvertisement{{ProviderId: "a", Adapter: "ollama", Target: "llama3.2", InstanceKey: "http://gpu:11434", Models: []string{"llama3.2"}, Capacity: 2}})
	if s := p.Snapshot()[0]; s.Status != "available" || s.ConnectionGeneration != 8 || s.LastObservationSeq != 0 {
		t.Fatalf("new generation %+v", s)
	}
}

// TestProviderHealthObservability asserts the collectors and the log
// record for one lowering and one recovery.
func TestProviderHealthObservability(t *testing.T) {
	p, _, reg, buf := overlayPool(t)
	l := leaseFor(t, p, "a")
	p.AcceptStall(l, Reception{NodeID: "n1", ConnectionGeneration: 7}, stall("unavailable", "provider_unhealthy", "confirmed", "1", true), nil)
	l.Release()
	p.ApplyProbe(ProbeResult{NodeID: "n1", Generation: 7, ProviderID: "a", AdapterKey: "http://gpu:11434", Target: "llama3.2", Status: "available", Seq: 2})
	want := `
# HELP iop_edge_provider_health_evidence_total Authoritative provider-health overlay decisions.
# TYPE iop_edge_provider_health_evidence_total counter
iop_edge_provider_health_evidence_total{decision="applied",evidence_health="available",source="probe"} 1
iop_edge_provider_health_evidence_total{decision="applied",evidence_health="unavailable",source="stall"} 1
# HELP iop_edge_provider_health_transitions_total Provider-health overlay state transitions.
# TYPE iop_edge_provider_health_transitions_total counter
iop_edge_provider_health_transitions_total{from_health="available",to_health="unavailable"} 1
iop_edge_provider_health_transitions_total{from_health="unavailable",to_health="available"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("log lines %q", buf.String())
	}
	for _, line := range lines {
		for _, f := range []string{`"msg":"edge_provider_health_observation"`, `"source":`, `"evidence_health":`, `"decision":`, `"from_health":`, `"to_health":`, `"state_changed":true`} {
			if !strings.Contains(line, f) {
				t.Fatalf("log %s lacks %s", line, f)
			}
		}
	}
}

// TestProviderHealthObservabilityDoesNotExposeSentinels: no provider,
// node, run, adapter, target or payload value reaches labels or logs.
func TestProviderHealthObservabilityDoesNotExposeSentinels(t *testing.T) {
	reg := prometheus.NewRegistry()
	buf := &bytes.Buffer{}
	o := NewHealthObservability(reg, slog.New(slog.NewJSONHandler(buf, nil)), nil)
	p := NewPool(PoolConfig{Observer: o})
	p.SetNode("SENTINEL-NODE", 1, []*wire.ProviderAdvertisement{{ProviderId: "SENTINEL-PROVIDER", Adapter: "SENTINEL-ADAPTER", Target: "SENTINEL-TARGET",
		InstanceKey: "SENTINEL-KEY", Models: []string{"SENTINEL-TARGET"}, Capacity: 1}})
	l, err := p.Acquire(context.Background(), ProviderPoolDispatchRequest{Model: "SENTINEL-TARGET"})
	if err != nil {
		t.Fatal(err)
	}
	f := stall("unavailable", "provider_unhealthy", "confirmed", "1", true)
	maps.Copy(f.Metadata, map[string]string{"run_id": "SENTINEL-RUN", "adapter": "SENTINEL-ADAPTER", "target": "SENTINEL-TARGET", "prompt": "SENTINEL-PROMPT"})
	f = fromWire(f)
	p.AcceptStall(l, Reception{NodeID: "SENTINEL-NODE", ConnectionGeneration: 1}, f, nil)
	p.AcceptStall(l, Reception{NodeID: "SENTINEL-OTHER", ConnectionGeneration: 9}, f, nil)
	p.ApplyProbe(ProbeResult{NodeID: "SENTINEL-NODE", Generation: 1, ProviderID: "SENTINEL-PROVIDER", AdapterKey: "SENTINEL-KEY", Target: "SENTINEL-TARGET", Status: "available", Seq: 2})
	l.Release()
	exp, _ := testutil.CollectAndFormat(o.evidence, expfmt.TypeTextPlain)
	exp2, _ := testutil.CollectAndFormat(o.transitions, expfmt.TypeTextPlain)
	for _, out := range []string{buf.String(), string(exp), string(exp2)} {
		if strings.Contains(out, "SENTINEL") {
			t.Fatalf("sentinel exposed: %s", out)
		}
	}
	if !strings.Contains(buf.String(), "edge_provider_health_observation") {
		t.Fatal("no observation logged")
	}
}

// TestObserverBlockingHoldsNoLock: a blocking observer delays its caller
// but neither holds the pool lock nor changes the finalized transition.
func TestObserverBlockingHoldsNoLock(t *testing.T) {
	bubble.Test(t, testObserverBlockingHoldsNoLock)
}

func testObserverBlockingHoldsNoLock(t *testing.T) {
	p, _, _, _ := overlayPool(t)
	block := make(chan struct{})
	p.observer.hook = func(HealthObservation) { <-block }
	l := leaseFor(t, p, "a")
	done := make(chan struct{})
	go func() {
		p.AcceptStall(l, Reception{NodeID: "n1", ConnectionGeneration: 7}, stall("unavailable", "provider_unhealthy", "confirmed", "1", true), nil)
		close(done)
	}()
	synctest.Wait() // the handler is blocked in its observer
	// Dispatch proceeds while the observer blocks, and sees the transition.
	acquired := make(chan *Lease, 1)
	go func() {
		l2, _ := p.Acquire(context.Background(), ProviderPoolDispatchRequest{Model: "llama3.2"})
		acquired <- l2
	}()
	select {
	case l2 := <-acquired:
		if l2.LocalProviderID != "b" || providerStatus(p, "a") != "unavailable" {
			t.Fatalf("dispatch during a blocked observer got %s", l2.LocalProviderID)
		}
		l2.Release()
	case <-time.After(2 * time.Second): // fake time: only if every goroutine is blocked
		t.Fatal("the blocked observer held the pool lock")
	}
	select {
	case <-done:
		t.Fatal("the handler returned before its observer")
	default:
	}
	close(block)
	<-done
	l.Release()
}
