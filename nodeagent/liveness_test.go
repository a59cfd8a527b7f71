package nodeagent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/expfmt"

	"github.com/iopgw/iop/execution"
	"github.com/iopgw/iop/internal/clock"
	"github.com/iopgw/iop/internal/testing/bubble"
	"github.com/iopgw/iop/internal/testing/clocktest"
	"github.com/iopgw/iop/wire"
)

// funcProvider is a provider built from function fields.
type funcProvider struct {
	exec   func(ctx context.Context, req *execution.RunRequest, emit *execution.Emitter) error
	tunnel func(ctx context.Context, req *execution.ProviderTunnelRequest, emit *execution.FrameEmitter) error
}

func (p *funcProvider) Execute(ctx context.Context, req *execution.RunRequest, emit *execution.Emitter) error {
	return p.exec(ctx, req, emit)
}

func (p *funcProvider) Tunnel(ctx context.Context, req *execution.ProviderTunnelRequest, emit *execution.FrameEmitter) error {
	return p.tunnel(ctx, req, emit)
}

// probingProvider adds a probe.
type probingProvider struct {
	*funcProvider
	probe func(ctx context.Context, req execution.ProbeRequest) (execution.ProbeResult, error)
}

func (p *probingProvider) ProbeTarget(ctx context.Context, req execution.ProbeRequest) (execution.ProbeResult, error) {
	return p.probe(ctx, req)
}

var (
	_ execution.Provider       = (*funcProvider)(nil)
	_ execution.ProviderProber = (*probingProvider)(nil)
)

const testInstance = "http://gpu:11434"

// availableProbe answers for the exact target it was asked about.
func availableProbe(status execution.HealthStatus) func(context.Context, execution.ProbeRequest) (execution.ProbeResult, error) {
	return func(_ context.Context, req execution.ProbeRequest) (execution.ProbeResult, error) {
		return execution.ProbeResult{Adapter: "ollama", InstanceKey: testInstance, Target: req.Target, Status: status}, nil
	}
}

// tokensThenStall emits n deltas (one per step) and then blocks until
// cancelled, returning promptly (a confirmed fence).
func tokensThenStall(clk clock.Clock, n int, step time.Duration) func(context.Context, *execution.RunRequest, *execution.Emitter) error {
	return func(ctx context.Context, _ *execution.RunRequest, emit *execution.Emitter) error {
		emit.Emit(execution.RunEvent{Type: execution.EventTypeStart})
		for range n {
			pause(clk, step)
			emit.Emit(execution.RunEvent{Type: execution.EventTypeDelta, Delta: "tok"})
		}
		<-ctx.Done()
		return ctx.Err()
	}
}

// pause waits d on clk (nil: the wall clock): a fake provider's pacing,
// on the clock its bridge runs on.
func pause(clk clock.Clock, d time.Duration) {
	ch, _ := clock.After(clock.Or(clk), d)
	<-ch
}

type recorder struct {
	clock  clock.Clock // stamps the messages (nil: the wall clock)
	mu     sync.Mutex
	events []*wire.RunEvent
	frames []*wire.ProviderTunnelFrame
	at     []time.Time
	// messages counts the messages sent (a batch is one)
	messages int
}

// send records what one message carries: an event, a frame, or a
// batch's items (each stamped with the message's time).
func (r *recorder) send(m *wire.AttemptUp) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := clock.Or(r.clock).Now()
	var evs []*wire.RunEvent
	var fs []*wire.ProviderTunnelFrame
	switch msg := m.Msg.(type) {
	case *wire.AttemptUp_Event:
		evs = []*wire.RunEvent{msg.Event}
	case *wire.AttemptUp_Frame:
		fs = []*wire.ProviderTunnelFrame{msg.Frame}
	case *wire.AttemptUp_Batch:
		evs, fs = msg.Batch.GetEvents(), msg.Batch.GetFrames()
	}
	r.messages++
	for _, ev := range evs {
		r.events = append(r.events, ev)
		r.at = append(r.at, now)
	}
	for _, f := range fs {
		r.frames = append(r.frames, f)
		r.at = append(r.at, now)
	}
	return nil
}

func (r *recorder) last() *wire.RunEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.events[len(r.events)-1]
}

func (r *recorder) terminals() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, ev := range r.events {
		if ev.GetType() == "complete" || ev.GetType() == "error" || ev.GetType() == "cancelled" {
			n++
		}
	}
	return n
}

type bridgeEnv struct {
	bridge *Bridge
	reg    *prometheus.Registry
	logBuf *bytes.Buffer
}

// newBridgeEnv is a bridge serving p, its timers on clk (nil: the wall
// clock).
func newBridgeEnv(t testing.TB, p execution.Provider, grace time.Duration, clk clock.Clock) *bridgeEnv {
	t.Helper()
	r := execution.NewRegistry()
	if err := r.Register(execution.ProviderDescriptor{ProviderID: "p1", Adapter: "ollama", InstanceKey: testInstance, Target: "llama3.2", Models: []string{"llama3.2"}}, p); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	buf := &bytes.Buffer{}
	log := slog.New(slog.NewJSONHandler(&lockedWriter{w: buf}, nil))
	b := NewBridge(BridgeConfig{Registry: r, Observer: newLivenessObservability(reg, log), Log: log, CloseGrace: grace, Clock: clk})
	return &bridgeEnv{bridge: b, reg: reg, logBuf: buf}
}

type lockedWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func runReq(timeoutMS int64) *wire.RunRequest {
	return &wire.RunRequest{RunId: "run-1", AttemptId: "att-1", ProviderId: "p1", Model: "llama3.2", ResponseStallTimeoutMs: timeoutMS,
		Messages: []*wire.Message{{Role: "user", Content: "SENTINEL-PROMPT-TEXT"}}}
}

func stallMeta(t *testing.T, ev *wire.RunEvent) map[string]string {
	t.Helper()
	if ev.GetType() != "error" || ev.GetFailure().GetCode() != "response_stalled" {
		t.Fatalf("not a stall terminal: %v", ev)
	}
	return ev.GetFailure().GetMetadata()
}

// TestWatchdogDefaultsExact: with the production defaults the stall is
// claimed exactly 300 s after the last progress and, with a prompt fence
// and probe, the terminal follows at that same instant.
func TestWatchdogDefaultsExact(t *testing.T) {
	bubble.Test(t, func(t *testing.T) {
		clk := clocktest.New()
		p := &probingProvider{funcProvider: &funcProvider{exec: tokensThenStall(clk, 3, 10*time.Second)}, probe: availableProbe(execution.HealthAvailable)}
		env := newBridgeEnv(t, p, DefaultCloseGrace, clk)
		rec := &recorder{clock: clk}
		start := clk.Now()
		clk.Drive(t, func() { env.bridge.Run(context.Background(), nil, runReq(0), rec.send) })
		lastProgress := start.Add(30 * time.Second)
		if got := rec.at[len(rec.at)-1].Sub(lastProgress); got != 300*time.Second {
			t.Fatalf("terminal %v after the last progress, want exactly 300s", got)
		}
		md := stallMeta(t, rec.last())
		if md["idle_duration_ms"] != "300000" || md["attempt_fence"] != "confirmed" || md["provider_health"] != "available" ||
			md["liveness_classification"] != "request_stalled" || !rec.last().GetFailure().GetRetryable() {
			t.Fatalf("metadata %v", md)
		}
		if _, ok := md["health_observation_seq"]; ok {
			t.Fatal("unbound path carries health_observation_seq")
		}
		if got := len(rec.events); got != 5 { // start, 3 deltas, terminal
			t.Fatalf("%d events", got)
		}
	})
}

// TestWatchdogProbeBoundedAtFiveSeconds: a probe that never answers is cut
// at exactly 5 s and the terminal is health_unknown/unknown.
func TestWatchdogProbeBoundedAtFiveSeconds(t *testing.T) {
	bubble.Test(t, func(t *testing.T) {
		clk := clocktest.New()
		hang := make(chan struct{})
		defer close(hang)
		p := &probingProvider{funcProvider: &funcProvider{exec: tokensThenStall(clk, 0, 0)},
			probe: func(context.Context, execution.ProbeRequest) (execution.ProbeResult, error) {
				<-hang // ignores its context
				return execution.ProbeResult{}, nil
			}}
		env := newBridgeEnv(t, p, DefaultCloseGrace, clk)
		rec := &recorder{clock: clk}
		start := clk.Now()
		clk.Drive(t, func() { env.bridge.Run(context.Background(), nil, runReq(0), rec.send) })
		if got := rec.at[len(rec.at)-1].Sub(start); got != 305*time.Second {
			t.Fatalf("terminal at %v, want exactly 300s + 5s", got)
		}
		md := stallMeta(t, rec.last())
		if md["provider_health"] != "unknown" || md["liveness_classification"] != "health_unknown" {
			t.Fatalf("metadata %v", md)
		}
	})
}

// TestWatchdogDripNeverTrips: progress every 299 s never trips a 300 s
// watchdog.
func TestWatchdogDripNeverTrips(t *testing.T) {
	bubble.Test(t, func(t *testing.T) {
		clk := clocktest.New()
		p := &funcProvider{exec: func(ctx context.Context, _ *execution.RunRequest, emit *execution.Emitter) error {
			for range 5 {
				pause(clk, 299*time.Second)
				emit.Emit(execution.RunEvent{Type: execution.EventTypeDelta, Delta: "x"})
			}
			emit.Emit(execution.RunEvent{Type: execution.EventTypeComplete})
			return nil
		}}
		env := newBridgeEnv(t, p, DefaultCloseGrace, clk)
		rec := &recorder{clock: clk}
		clk.Drive(t, func() { env.bridge.Run(context.Background(), nil, runReq(0), rec.send) })
		if rec.last().GetType() != "complete" || len(rec.events) != 6 {
			t.Fatalf("events %v", rec.events)
		}
	})
}

// TestWatchdogStartIsNotProgress: a provider silent before its first byte
// — accepted, started, but nothing after — stalls 300 s after admission.
func TestWatchdogStartIsNotProgress(t *testing.T) {
	bubble.Test(t, func(t *testing.T) {
		clk := clocktest.New()
		p := &funcProvider{exec: func(ctx context.Context, _ *execution.RunRequest, emit *execution.Emitter) error {
			pause(clk, 100*time.Second)
			emit.Emit(execution.RunEvent{Type: execution.EventTypeStart})
			emit.Emit(execution.RunEvent{Type: execution.EventTypeDelta}) // empty: not progress
			<-ctx.Done()
			return ctx.Err()
		}}
		env := newBridgeEnv(t, p, DefaultCloseGrace, clk)
		rec := &recorder{clock: clk}
		start := clk.Now()
		clk.Drive(t, func() { env.bridge.Run(context.Background(), nil, runReq(0), rec.send) })
		if got := rec.at[len(rec.at)-1].Sub(start); got != 300*time.Second {
			t.Fatalf("terminal at %v, want 300s after admission", got)
		}
		md := stallMeta(t, rec.last())
		// No probe: unsupported fails closed.
		if md["provider_health"] != "unknown" || md["liveness_classification"] != "health_unknown" || md["idle_duration_ms"] != "300000" {
			t.Fatalf("metadata %v", md)
		}
	})
}

// TestWatchdogTunnelHeadersThenSilence: response_start is progress; a
// tunnel silent after it stalls 300 s later.
func TestWatchdogTunnelHeadersThenSilence(t *testing.T) {
	bubble.Test(t, func(t *testing.T) {
		clk := clocktest.New()
		p := &funcProvider{tunnel: func(ctx context.Context, _ *execution.ProviderTunnelRequest, emit *execution.FrameEmitter) error {
			pause(clk, 7*time.Second)
			emit.Emit(execution.ProviderTunnelFrame{Type: execution.FrameTypeResponseStart, Status: 200})
			<-ctx.Done()
			return ctx.Err()
		}}
		env := newBridgeEnv(t, p, DefaultCloseGrace, clk)
		rec := &recorder{clock: clk}
		start := clk.Now()
		clk.Drive(t, func() {
			env.bridge.Tunnel(context.Background(), nil, &wire.ProviderTunnelRequest{RunId: "r", AttemptId: "a", ProviderId: "p1", Model: "llama3.2"}, rec.send)
		})
		if got := rec.at[len(rec.at)-1].Sub(start); got != 307*time.Second {
			t.Fatalf("terminal at %v, want 7s + 300s", got)
		}
		last := rec.frames[len(rec.frames)-1]
		if last.GetType() != "error" || last.GetFailure().GetCode() != "response_stalled" || last.GetFailure().GetMetadata()["target"] != "llama3.2" {
			t.Fatalf("terminal frame %v", last)
		}
		if got := testutil.ToFloat64(counterFor(env, "provider_tunnel", "unknown", "health_unknown", "confirmed")); got != 1 {
			t.Fatalf("tunnel stall counter %v", got)
		}
	})
}

func counterFor(env *bridgeEnv, path, health, class, fence string) prometheus.Collector {
	o := env.bridge.observer.(*livenessObservability)
	return o.stalls.WithLabelValues(path, health, class, fence)
}

// TestWatchdogProbeOutcomes: every probe outcome maps to exactly one of
// the three joined pairs.
func TestWatchdogProbeOutcomes(t *testing.T) {
	type probeFn = func(context.Context, execution.ProbeRequest) (execution.ProbeResult, error)
	tests := []struct {
		name        string
		probe       probeFn // nil: the provider has no probe
		wantHealth  string
		wantLiveCls string
	}{
		{"available", availableProbe(execution.HealthAvailable), "available", "request_stalled"},
		{"unavailable", availableProbe(execution.HealthUnavailable), "unavailable", "provider_unhealthy"},
		{"unknown status", availableProbe(execution.HealthUnknown), "unknown", "health_unknown"},
		{"error", func(context.Context, execution.ProbeRequest) (execution.ProbeResult, error) {
			return execution.ProbeResult{Adapter: "ollama", InstanceKey: testInstance, Target: "llama3.2", Status: execution.HealthUnavailable}, errors.New("HTTP 500")
		}, "unknown", "health_unknown"},
		{"timeout", func(ctx context.Context, _ execution.ProbeRequest) (execution.ProbeResult, error) {
			<-ctx.Done()
			return execution.ProbeResult{}, ctx.Err()
		}, "unknown", "health_unknown"},
		{"identity mismatch", func(context.Context, execution.ProbeRequest) (execution.ProbeResult, error) {
			return execution.ProbeResult{Adapter: "ollama", InstanceKey: testInstance, Target: "llama3.1", Status: execution.HealthUnavailable}, nil
		}, "unknown", "health_unknown"},
		{"instance mismatch", func(context.Context, execution.ProbeRequest) (execution.ProbeResult, error) {
			return execution.ProbeResult{Adapter: "ollama", InstanceKey: "http://other:11434", Target: "llama3.2", Status: execution.HealthAvailable}, nil
		}, "unknown", "health_unknown"},
		{"nil probe", nil, "unknown", "health_unknown"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bubble.Test(t, func(t *testing.T) {
				clk := clocktest.New()
				fp := &funcProvider{exec: tokensThenStall(clk, 1, time.Second)}
				var p execution.Provider = fp
				if tt.probe != nil {
					p = &probingProvider{funcProvider: fp, probe: tt.probe}
				}
				env := newBridgeEnv(t, p, DefaultCloseGrace, clk)
				rec := &recorder{clock: clk}
				clk.Drive(t, func() { env.bridge.Run(context.Background(), nil, runReq(1000), rec.send) })
				md := stallMeta(t, rec.last())
				if md["provider_health"] != tt.wantHealth || md["liveness_classification"] != tt.wantLiveCls {
					t.Fatalf("pair %s/%s, want %s/%s", md["liveness_classification"], md["provider_health"], tt.wantLiveCls, tt.wantHealth)
				}
			})
		})
	}
}

// TestWatchdogFenceUnconfirmed: a provider that ignores cancellation beyond
// the grace leaves the fence unconfirmed and Retryable false, and its late
// output never reaches the edge.
func TestWatchdogFenceUnconfirmed(t *testing.T) {
	bubble.Test(t, func(t *testing.T) {
		clk := clocktest.New()
		var late atomic.Int32
		returned := make(chan struct{})
		p := &probingProvider{probe: availableProbe(execution.HealthAvailable), funcProvider: &funcProvider{
			exec: func(ctx context.Context, _ *execution.RunRequest, emit *execution.Emitter) error {
				defer close(returned)
				emit.Emit(execution.RunEvent{Type: execution.EventTypeDelta, Delta: "a"})
				<-ctx.Done()
				pause(clk, time.Minute) // ignores the cancel
				for range 3 {
					if emit.Emit(execution.RunEvent{Type: execution.EventTypeDelta, Delta: "LATE"}) {
						late.Add(1)
					}
				}
				emit.Emit(execution.RunEvent{Type: execution.EventTypeComplete})
				return nil
			}}}
		env := newBridgeEnv(t, p, DefaultCloseGrace, clk)
		rec := &recorder{clock: clk}
		start := clk.Now()
		clk.Drive(t, func() { env.bridge.Run(context.Background(), nil, runReq(0), rec.send) })
		// max(grace 2s, probe ~0) after the claim: 300s + 2s.
		if got := rec.at[len(rec.at)-1].Sub(start); got != 302*time.Second {
			t.Fatalf("terminal at %v, want 302s", got)
		}
		md := stallMeta(t, rec.last())
		if md["attempt_fence"] != "unconfirmed" || rec.last().GetFailure().GetRetryable() {
			t.Fatalf("fence %v retryable %v", md["attempt_fence"], rec.last().GetFailure().GetRetryable())
		}
		clk.Drive(t, func() { <-returned }) // the provider emits its late output and returns
		if late.Load() != 0 || len(rec.events) != 2 || rec.terminals() != 1 {
			t.Fatalf("late output reached the edge: %d late, events %v", late.Load(), rec.events)
		}
		if got := testutil.ToFloat64(counterFor(env, "normalized", "available", "request_stalled", "unconfirmed")); got != 1 {
			t.Fatalf("counter %v", got)
		}
	})
}

// TestWatchdogTerminalRace: a provider terminal racing the stall claim at
// the same instant yields exactly one terminal, 10,000 times.
func TestWatchdogTerminalRace(t *testing.T) {
	bubble.Test(t, func(t *testing.T) {
		p := &funcProvider{exec: func(ctx context.Context, _ *execution.RunRequest, emit *execution.Emitter) error {
			pause(nil, time.Millisecond) // exactly the stall timeout: two timers of the bubble race
			emit.Emit(execution.RunEvent{Type: execution.EventTypeComplete})
			return nil
		}}
		env := newBridgeEnv(t, p, time.Millisecond, nil)
		stalls, completes := 0, 0
		for i := range 10000 {
			rec := &recorder{}
			env.bridge.Run(context.Background(), nil, runReq(1), rec.send)
			if n := rec.terminals(); n != 1 || len(rec.events) != 1 {
				t.Fatalf("iteration %d: %d terminals in %v", i, n, rec.events)
			}
			if rec.last().GetType() == "complete" {
				completes++
			} else {
				stalls++
			}
		}
		t.Logf("race outcomes: %d completes, %d stalls", completes, stalls)
	})
}

// TestNodeLivenessObservability: one claimed stall increments exactly one
// series of each collector and writes one log record with exactly the
// documented fields; no prompt text or credential appears.
func TestNodeLivenessObservability(t *testing.T) {
	bubble.Test(t, func(t *testing.T) {
		clk := clocktest.New()
		p := &probingProvider{funcProvider: &funcProvider{exec: tokensThenStall(clk, 2, time.Second)}, probe: availableProbe(execution.HealthUnavailable)}
		env := newBridgeEnv(t, p, DefaultCloseGrace, clk)
		rec := &recorder{clock: clk}
		req := runReq(1500)
		req.SessionId = "SENTINEL-SESSION"
		clk.Drive(t, func() { env.bridge.Run(context.Background(), nil, req, rec.send) })

		want := `
# HELP iop_node_response_stalls_total Stalls claimed by the node watchdog; every claimed stall increments exactly one series.
# TYPE iop_node_response_stalls_total counter
iop_node_response_stalls_total{attempt_fence="confirmed",execution_path="normalized",liveness_classification="provider_unhealthy",provider_health="unavailable"} 1
`
		if err := testutil.GatherAndCompare(env.reg, strings.NewReader(want), "iop_node_response_stalls_total"); err != nil {
			t.Fatal(err)
		}
		if n := testutil.CollectAndCount(env.bridge.observer.(*livenessObservability).duration); n != 1 {
			t.Fatalf("%d duration series", n)
		}
		o := env.bridge.observer.(*livenessObservability)
		if c := testutil.ToFloat64(o.stalls.WithLabelValues("normalized", "unavailable", "provider_unhealthy", "confirmed")); c != 1 {
			t.Fatalf("counter %v", c)
		}
		var rec2 map[string]any
		lines := strings.Split(strings.TrimSpace(env.logBuf.String()), "\n")
		if len(lines) != 1 || json.Unmarshal([]byte(lines[0]), &rec2) != nil {
			t.Fatalf("log %q", env.logBuf.String())
		}
		wantFields := map[string]any{"msg": "node_response_stall_observation", "execution_path": "normalized", "provider_health": "unavailable",
			"liveness_classification": "provider_unhealthy", "attempt_fence": "confirmed", "idle_duration_ms": float64(1500)}
		for k, v := range wantFields {
			if rec2[k] != v {
				t.Fatalf("log field %s = %v, want %v (%v)", k, rec2[k], v, rec2)
			}
		}
		if len(rec2) != len(wantFields)+2 { // + time, level
			t.Fatalf("log record has extra fields: %v", rec2)
		}
		exposition, _ := testutil.CollectAndFormat(o.stalls, expfmt.TypeTextPlain)
		for _, out := range []string{env.logBuf.String(), string(exposition)} {
			if strings.Contains(out, "SENTINEL") || strings.Contains(out, "run-1") || strings.Contains(out, "llama3.2") {
				t.Fatalf("identifier or sentinel leaked: %s", out)
			}
		}
	})
}

type panicObserver struct{}

func (panicObserver) ObserveStall(StallObservation) { panic("observer down") }

func TestObserverFailureNeverSuppressesTerminal(t *testing.T) {
	bubble.Test(t, func(t *testing.T) {
		r := execution.NewRegistry()
		_ = r.Register(execution.ProviderDescriptor{ProviderID: "p1", Adapter: "sim", Target: "llama3.2"}, &funcProvider{exec: tokensThenStall(nil, 0, 0)})
		b := NewBridge(BridgeConfig{Registry: r, Observer: panicObserver{}})
		rec := &recorder{}
		b.Run(context.Background(), nil, runReq(100), rec.send)
		stallMeta(t, rec.last())
	})
}

func TestNormalizeStallLabels(t *testing.T) {
	p, h, c, f := normalizeStallLabels(StallObservation{ExecutionPath: "weird", ProviderHealth: "healthy", LivenessClassification: "x", AttemptFence: "maybe"})
	if p != "unknown" || h != "unknown" || c != "health_unknown" || f != "unknown" {
		t.Fatalf("labels %s %s %s %s", p, h, c, f)
	}
}

// TestStallTerminalOverGRPC: a sim provider that stalls after 3 tokens with
// a 300 ms stall timeout; the edge receives one RunEvent carrying
// ExecutionFailure{response_stalled} with every allowlisted key.
func TestStallTerminalOverGRPC(t *testing.T) {
	pc := simProvider("sim-s", SimConfig{StallAfter: 3})
	pc.ResponseStallTimeoutMS = 300
	cfg := baseConfig(pc)
	cfg.Liveness.CloseGrace = 500 * time.Millisecond
	l := startLink(t, cfg, Options{ProbeTimeout: time.Second})
	s := l.session(t)
	start := time.Now()
	evs := l.edge.dispatch(t, s, runDown("sim-s", "iop-sim", 300)).events(t)
	elapsed := time.Since(start)
	deltas := 0
	for _, ev := range evs {
		if ev.GetType() == "delta" {
			deltas++
		}
	}
	last := evs[len(evs)-1]
	md := stallMeta(t, last)
	for _, k := range execution.StallMetadataKeys {
		if md[k] == "" {
			t.Fatalf("metadata lacks %s: %v", k, md)
		}
	}
	if len(md) != len(execution.StallMetadataKeys) || deltas != 3 || md["run_id"] != "run-1" || md["health_observation_seq"] != "1" ||
		md["adapter"] != "sim" || md["target"] != "iop-sim" || md["attempt_fence"] != "confirmed" || md["provider_health"] != "available" {
		t.Fatalf("deltas %d metadata %v", deltas, md)
	}
	t.Logf("stall terminal %v after dispatch (timeout 300ms), idle %sms", elapsed, md["idle_duration_ms"])
	if elapsed > 3*time.Second {
		t.Fatalf("terminal took %v", elapsed)
	}
}
