package nodeagent

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/iopgw/iop/internal/testing/wait"
	"github.com/iopgw/iop/internal/testing/wall"
	"github.com/iopgw/iop/wire"
)

func runDown(providerID, model string, timeoutMS int64) *wire.AttemptDown {
	return &wire.AttemptDown{Msg: &wire.AttemptDown_Run{Run: &wire.RunRequest{
		RunId: "run-1", AttemptId: "att-1", ProviderId: providerID, Model: model, ResponseStallTimeoutMs: timeoutMS,
		Messages: []*wire.Message{{Role: "user", Content: "tell me a story"}},
	}}}
}

func tunnelDown(providerID, model, path string, body string) *wire.AttemptDown {
	return &wire.AttemptDown{Msg: &wire.AttemptDown_Tunnel{Tunnel: &wire.ProviderTunnelRequest{
		RunId: "run-t", AttemptId: "att-t", ProviderId: providerID, Model: model, Method: http.MethodPost, Path: path,
		Headers: []*wire.Header{{Name: "Content-Type", Values: []string{"application/json"}}, {Name: "Authorization", Values: []string{"Bearer sk-client-SENTINEL"}}},
		Body:    []byte(body),
	}}}
}

func TestSessionWelcomeAndAdvertisement(t *testing.T) {
	l := startLink(t, baseConfig(simProvider("sim-a", SimConfig{}), ProviderConfig{ID: "sim-t", Adapter: "sim", Path: PathTunnel, Models: []string{"m2"}, Capacity: 2, ResponseStallTimeoutMS: 1500}), Options{})
	s := l.session(t)
	if s.hello.GetNodeId() != "node-1" {
		t.Fatalf("hello node id %q", s.hello.GetNodeId())
	}
	ads := s.hello.GetAdvertisement().GetProviders()
	if len(ads) != 2 {
		t.Fatalf("advertised %d providers", len(ads))
	}
	a, b := ads[0], ads[1]
	if a.GetProviderId() != "sim-a" || a.GetAdapter() != "sim" || a.GetTarget() != "iop-sim" || a.GetInstanceKey() != "sim/sim-a" ||
		a.GetCapacity() != 4 || a.GetResponseStallTimeoutMs() != 300000 || a.GetExecutionPath() != "auto" || !a.GetSupportsTunnel() ||
		strings.Join(a.GetSurfaces(), ",") != "chat,responses,completions,embeddings,moderations,images,rerank,messages,audio" {
		t.Fatalf("advertisement a %v", a)
	}
	if b.GetExecutionPath() != "provider_tunnel" || b.GetCapacity() != 2 || b.GetResponseStallTimeoutMs() != 1500 {
		t.Fatalf("advertisement b %v", b)
	}
	wait.UntilWithin(t, defaultTestTimeout, func() bool {
		infos := l.agent.Sessions()
		return len(infos) == 1 && infos[0].Generation == s.gen && infos[0].State == StateConnected
	})
}

func TestNormalizedRunSim(t *testing.T) {
	l := startLink(t, baseConfig(simProvider("sim-a", SimConfig{})), Options{})
	s := l.session(t)
	evs := l.edge.dispatch(t, s, runDown("sim-a", "iop-sim", 0)).events(t)
	if evs[0].GetType() != "start" {
		t.Fatalf("first event %v", evs[0])
	}
	var text strings.Builder
	for _, ev := range evs[1 : len(evs)-1] {
		if ev.GetType() != "delta" {
			t.Fatalf("event %v", ev)
		}
		text.WriteString(ev.GetDelta())
	}
	last := evs[len(evs)-1]
	if last.GetType() != "complete" || last.GetUsage().GetCompletionTokens() != int64(len(evs)-2) || last.GetFinishReason() != "stop" {
		t.Fatalf("terminal %v", last)
	}
	if !strings.HasPrefix(text.String(), "You said: tell me a story.") {
		t.Fatalf("text %q", text.String())
	}
}

func TestTunnelSim(t *testing.T) {
	l := startLink(t, baseConfig(simProvider("sim-a", SimConfig{})), Options{})
	s := l.session(t)
	frames := l.edge.dispatch(t, s, tunnelDown("sim-a", "iop-sim", "/v1/chat/completions", `{"model":"iop-sim","stream":true,"messages":[{"role":"user","content":"hi"}]}`)).frames(t)
	if frames[0].GetType() != "response_start" || frames[0].GetStatus() != 200 {
		t.Fatalf("first frame %v", frames[0])
	}
	var body bytes.Buffer
	sawUsage := false
	for _, f := range frames[1:] {
		body.Write(f.GetBody())
		sawUsage = sawUsage || f.GetType() == "usage"
	}
	if !bytes.HasSuffix(body.Bytes(), []byte("data: [DONE]\n\n")) || !sawUsage || frames[len(frames)-1].GetType() != "end" {
		t.Fatalf("tunnel body %q usage %v", body.String(), sawUsage)
	}
}

func startWall(t *testing.T) (*wall.Wall, *httptest.Server) {
	t.Helper()
	w := wall.New()
	w.TokenDelay = time.Millisecond
	w.Models = []string{"ok", "llama3.2:latest"}
	srv := httptest.NewServer(w)
	t.Cleanup(srv.Close)
	return w, srv
}

func TestOpenAIProviderOverLink(t *testing.T) {
	w, srv := startWall(t)
	l := startLink(t, baseConfig(ProviderConfig{ID: "vllm", Adapter: "openai", BaseURL: srv.URL + "/v1", APIKey: "sk-node", Models: []string{"ok"}}), Options{})
	s := l.session(t)

	evs := l.edge.dispatch(t, s, runDown("vllm", "ok", 0)).events(t)
	var text string
	for _, ev := range evs {
		text += ev.GetDelta()
	}
	if text != w.Text() || evs[len(evs)-1].GetType() != "complete" || evs[len(evs)-1].GetUsage().GetTotalTokens() != 15 {
		t.Fatalf("events %v", evs)
	}
	frames := l.edge.dispatch(t, s, tunnelDown("vllm", "ok", "/v1/chat/completions", `{"model":"ok","stream":true,"messages":[{"role":"user","content":"hi"}]}`)).frames(t)
	if frames[0].GetStatus() != 200 || headerValue(frames[0], "X-Request-Id") == "" || headerValue(frames[0], "Content-Type") != "text/event-stream; charset=utf-8" {
		t.Fatalf("response_start %v", frames[0])
	}
	// The provider sees exactly one Authorization: the node's.
	for _, a := range w.Attempts() {
		if got := a.Header.Values("Authorization"); len(got) != 1 || got[0] != "Bearer sk-node" {
			t.Fatalf("upstream Authorization %q", got)
		}
	}
}

func headerValue(f *wire.ProviderTunnelFrame, name string) string {
	for _, h := range f.GetHeaders() {
		if http.CanonicalHeaderKey(h.GetName()) == name && len(h.GetValues()) > 0 {
			return h.GetValues()[0]
		}
	}
	return ""
}

func TestOpenAIProviderUpstreamFailures(t *testing.T) {
	_, srv := startWall(t)
	l := startLink(t, baseConfig(ProviderConfig{ID: "vllm", Adapter: "openai", BaseURL: srv.URL + "/v1", Models: []string{"ok"}}), Options{})
	s := l.session(t)
	tests := []struct {
		model      string
		wantStatus int32
		wantCode   string
	}{
		{"ctx-length-400", 400, "context_length_exceeded"},
		{"429-retry-after", 429, "rate_limit_exceeded"},
		{"503-persist", 503, "server_is_overloaded"},
		{"html-502", 502, ""},
		{"midstream-error", 500, "server_error"}, // an error event in a 200 stream: its type's status class
		{"truncate-clean", 200, ""},
		{"cut-after-2", 200, ""},
	}
	for _, tt := range tests {
		t.Run(tt.model, func(t *testing.T) {
			evs := l.edge.dispatch(t, s, runDown("vllm", tt.model, 0)).events(t)
			last := evs[len(evs)-1]
			d := last.GetDetail()
			if last.GetType() != "error" || last.GetFailure() != nil || d.GetFailureCode() != "upstream_error" || d.GetUpstreamStatus() != tt.wantStatus || d.GetCode() != tt.wantCode {
				t.Fatalf("terminal %v", last)
			}
		})
	}
}

// TestOpenAIProviderSkipsMalformedEvent: one event that is not JSON is
// skipped (as the official clients skip it) and the rest is delivered.
func TestOpenAIProviderSkipsMalformedEvent(t *testing.T) {
	_, srv := startWall(t)
	l := startLink(t, baseConfig(ProviderConfig{ID: "vllm", Adapter: "openai", BaseURL: srv.URL + "/v1", Models: []string{"ok"}}), Options{})
	evs := l.edge.dispatch(t, l.session(t), runDown("vllm", "malformed-at-2", 0)).events(t)
	if last := evs[len(evs)-1]; last.GetType() != "complete" {
		t.Fatalf("terminal %v", last)
	}
}

func TestOllamaProviderOverLink(t *testing.T) {
	w, srv := startWall(t)
	l := startLink(t, baseConfig(ProviderConfig{ID: "ol", Adapter: "ollama", BaseURL: srv.URL, Models: []string{"llama3.2"}}), Options{})
	s := l.session(t)
	if ad := s.hello.GetAdvertisement().GetProviders()[0]; !ad.GetSupportsOllamaApi() {
		t.Fatalf("ollama provider does not advertise ollama_api: %v", ad)
	}
	evs := l.edge.dispatch(t, s, runDown("ol", "llama3.2", 0)).events(t)
	var text string
	for _, ev := range evs {
		text += ev.GetDelta()
	}
	last := evs[len(evs)-1]
	if text != w.Text() || last.GetType() != "complete" || last.GetUsage().GetPromptTokens() != 9 || last.GetUsage().GetCompletionTokens() != 6 {
		t.Fatalf("events %v", evs)
	}
	for _, model := range []string{"midstream-error", "truncate-clean", "missing"} {
		evs := l.edge.dispatch(t, s, runDown("ol", model, 0)).events(t)
		if last := evs[len(evs)-1]; last.GetType() != "error" {
			t.Fatalf("%s: terminal %v", model, last)
		}
	}
	// ollama_api passes native requests through.
	down := &wire.AttemptDown{Msg: &wire.AttemptDown_Command{Command: &wire.Command{Command: "ollama_api", ProviderId: "ol", RunId: "r", AttemptId: "a",
		Method: http.MethodPost, Path: "/api/chat", Body: []byte(`{"model":"llama3.2","messages":[{"role":"user","content":"hi"}]}`)}}}
	frames := l.edge.dispatch(t, s, down).frames(t)
	var body bytes.Buffer
	for _, f := range frames {
		body.Write(f.GetBody())
	}
	lines := strings.Split(strings.TrimSpace(body.String()), "\n")
	if frames[0].GetStatus() != 200 || len(lines) != len(w.Tokens)+1 || !strings.Contains(lines[len(lines)-1], `"done":true`) {
		t.Fatalf("native stream %q", body.String())
	}
	// A native path outside the allowlist is refused.
	down = &wire.AttemptDown{Msg: &wire.AttemptDown_Command{Command: &wire.Command{Command: "ollama_api", ProviderId: "ol", RunId: "r", Method: http.MethodDelete, Path: "/api/delete"}}}
	frames = l.edge.dispatch(t, s, down).frames(t)
	if f := frames[len(frames)-1]; f.GetType() != "error" || f.GetDetail().GetFailureCode() != "command_not_allowed" {
		t.Fatalf("delete allowed: %v", frames)
	}
}

func TestBoundaryNormalizesStallTimeout(t *testing.T) {
	l := startLink(t, baseConfig(simProvider("sim-a", SimConfig{})), Options{})
	s := l.session(t)
	for _, ms := range []int64{-1, 9223372036855, 1<<63 - 1} {
		evs := l.edge.dispatch(t, s, runDown("sim-a", "iop-sim", ms)).events(t)
		if len(evs) != 1 || evs[0].GetType() != "error" || evs[0].GetDetail().GetFailureCode() != "invalid_request" ||
			!strings.Contains(evs[0].GetError(), "response_stall_timeout_ms") {
			t.Fatalf("timeout %d: events %v", ms, evs)
		}
	}
	// An unknown provider is a typed failure too.
	evs := l.edge.dispatch(t, s, runDown("nope", "iop-sim", 0)).events(t)
	if evs[0].GetDetail().GetFailureCode() != "provider_not_found" {
		t.Fatalf("unknown provider: %v", evs)
	}
	// Zero and a valid value run normally.
	for _, ms := range []int64{0, 60000} {
		evs := l.edge.dispatch(t, s, runDown("sim-a", "iop-sim", ms)).events(t)
		if evs[len(evs)-1].GetType() != "complete" {
			t.Fatalf("timeout %d: %v", ms, evs)
		}
	}
}

func TestBoundaryRejectsBeforeProviderInvocation(t *testing.T) {
	w, srv := startWall(t)
	l := startLink(t, baseConfig(ProviderConfig{ID: "vllm", Adapter: "openai", BaseURL: srv.URL + "/v1", Models: []string{"ok"}}), Options{})
	s := l.session(t)
	evs := l.edge.dispatch(t, s, runDown("vllm", "ok", -5)).events(t)
	if evs[0].GetType() != "error" || len(w.Attempts()) != 0 {
		t.Fatalf("provider invoked for an invalid timeout: %v, %d attempts", evs, len(w.Attempts()))
	}
	f := l.edge.dispatch(t, s, &wire.AttemptDown{Msg: &wire.AttemptDown_Tunnel{Tunnel: &wire.ProviderTunnelRequest{RunId: "r", ProviderId: "vllm", ResponseStallTimeoutMs: -1}}}).frames(t)
	if f[0].GetType() != "error" || len(w.Attempts()) != 0 {
		t.Fatalf("tunnel invoked for an invalid timeout: %v", f)
	}
}

// TestCancelReachesUpstream: the edge ending the attempt stream cancels
// the provider's upstream request within 500 ms.
func TestCancelReachesUpstream(t *testing.T) {
	w, srv := startWall(t)
	l := startLink(t, baseConfig(ProviderConfig{ID: "vllm", Adapter: "openai", BaseURL: srv.URL + "/v1", Models: []string{"ok"}}), Options{})
	s := l.session(t)
	for _, down := range []*wire.AttemptDown{
		runDown("vllm", "slow", 0),
		tunnelDown("vllm", "slow", "/v1/chat/completions", `{"model":"slow","stream":true,"messages":[{"role":"user","content":"hi"}]}`),
	} {
		before := len(w.AttemptsFor("slow"))
		a := l.edge.dispatch(t, s, down)
		if _, err := a.stream.Recv(); err != nil { // the first event proves the upstream is streaming
			t.Fatal(err)
		}
		cancelled := time.Now()
		a.end()
		attempts := w.AttemptsFor("slow")
		if len(attempts) != before+1 {
			t.Fatalf("%d attempts", len(attempts))
		}
		up := attempts[before]
		select {
		case <-up.Done():
		case <-time.After(2 * time.Second):
			t.Fatal("upstream never saw the cancel")
		}
		if !up.Cancelled() {
			t.Fatal("upstream finished instead of being cancelled")
		}
		if d := up.EndedAt().Sub(cancelled); d > 500*time.Millisecond {
			t.Fatalf("upstream saw the cancel after %v, want ≤ 500ms", d)
		}
	}
}

func TestCancelRunByRunID(t *testing.T) {
	w, srv := startWall(t)
	l := startLink(t, baseConfig(ProviderConfig{ID: "vllm", Adapter: "openai", BaseURL: srv.URL + "/v1", Models: []string{"ok"}}), Options{})
	s := l.session(t)
	a := l.edge.dispatch(t, s, runDown("vllm", "stall-after-1", 0))
	if _, err := a.stream.Recv(); err != nil {
		t.Fatal(err)
	}
	s.cancelRun(t, "") // empty run_id targets nothing
	s.cancelRun(t, "run-1")
	evs := a.events(t)
	if last := evs[len(evs)-1]; last.GetType() != "cancelled" {
		t.Fatalf("terminal after CancelRun %v", last)
	}
	up := w.AttemptsFor("stall-after-1")[0]
	select {
	case <-up.Done():
	case <-time.After(2 * time.Second):
		t.Fatal("upstream not cancelled")
	}
}

// TestNoHeadOfLineBlocking: an attempt whose edge side stops reading does
// not delay another attempt on the same connection.
func TestNoHeadOfLineBlocking(t *testing.T) {
	w, srv := startWall(t)
	big := make([]string, 32000)
	for i := range big {
		big[i] = strings.Repeat("x", 512)
	}
	w.Tokens = big // 16 MiB: far beyond the edge's 1 MiB stream window and loopback socket buffers
	w.TokenDelay = 0
	l := startLink(t, baseConfig(ProviderConfig{ID: "vllm", Adapter: "openai", BaseURL: srv.URL + "/v1", Models: []string{"ok"}}, simProvider("sim-a", SimConfig{})), Options{})
	s := l.session(t)
	stuck := l.edge.dispatch(t, s, runDown("vllm", "ok", 0))
	if _, err := stuck.stream.Recv(); err != nil { // then never read again
		t.Fatal(err)
	}
	// The stuck stream has filled the edge's window (1 MiB) and more.
	wait.Until(t, func() bool { a := w.Attempts(); return len(a) == 1 && a[0].SentBytes() > 2<<20 })
	start := time.Now()
	evs := l.edge.dispatch(t, s, runDown("sim-a", "iop-sim", 0)).events(t)
	if evs[len(evs)-1].GetType() != "complete" {
		t.Fatalf("second attempt %v", evs[len(evs)-1])
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("second attempt took %v behind a stuck one", d)
	}
	if sent := w.AttemptsFor("ok")[0].SentBytes(); sent >= int64(len(big)*512) {
		t.Fatalf("stuck attempt was not actually blocked (upstream sent %d bytes)", sent)
	}
}

func capabilitiesDown(providerID, adapterKey, target string) *wire.AttemptDown {
	return &wire.AttemptDown{Msg: &wire.AttemptDown_Command{Command: &wire.Command{Command: "capabilities", ProviderId: providerID, AdapterKey: adapterKey, Target: target}}}
}

func commandResult(t *testing.T, a *edgeAttempt) *wire.CommandResult {
	t.Helper()
	m, err := a.stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	r := m.GetCommandResult()
	if r == nil {
		t.Fatalf("not a command result: %v", m)
	}
	return r
}

func TestCapabilitiesAndObservationSeq(t *testing.T) {
	l := startLink(t, baseConfig(simProvider("sim-a", SimConfig{}), simProvider("sim-down", SimConfig{Probe: "unavailable"})), Options{})
	s := l.session(t)
	tests := []struct {
		name, provider, key, target, want string
	}{
		{"available", "sim-a", "sim/sim-a", "iop-sim", "available"},
		{"unavailable", "sim-down", "sim/sim-down", "iop-sim", "unavailable"},
		{"target not served", "sim-a", "sim/sim-a", "other", "unavailable"},
		{"instance mismatch", "sim-a", "sim/other", "iop-sim", "unknown"},
		{"unpinned instance", "sim-a", "", "iop-sim", "unknown"},
		{"unknown provider", "nope", "sim/nope", "iop-sim", "unknown"},
	}
	var seqs []uint64
	for _, tt := range tests {
		r := commandResult(t, l.edge.dispatch(t, s, capabilitiesDown(tt.provider, tt.key, tt.target)))
		c := r.GetCapabilities()
		if c.GetProviderStatus() != tt.want || c.GetAdapterKey() != tt.key || c.GetTarget() != tt.target {
			t.Errorf("%s: %v", tt.name, c)
		}
		seqs = append(seqs, c.GetHealthObservationSeq())
	}
	for i, seq := range seqs {
		if seq != uint64(i+1) {
			t.Fatalf("sequences %v, want 1..%d", seqs, len(seqs))
		}
	}
	// Concurrent observations on one session get unique, increasing values.
	const n = 50
	var mu sync.Mutex
	got := map[uint64]bool{}
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			r := commandResult(t, l.edge.dispatch(t, s, capabilitiesDown("sim-a", "sim/sim-a", "iop-sim")))
			mu.Lock()
			got[r.GetCapabilities().GetHealthObservationSeq()] = true
			mu.Unlock()
		})
	}
	wg.Wait()
	for i := uint64(len(seqs) + 1); i <= uint64(len(seqs)+n); i++ {
		if !got[i] {
			t.Fatalf("sequence %d missing from %v", i, got)
		}
	}
}

func TestTransportStatusAndRejectedCommand(t *testing.T) {
	l := startLink(t, baseConfig(simProvider("sim-a", SimConfig{StallBeforeFirst: true})), Options{})
	s := l.session(t)
	stalled := l.edge.dispatch(t, s, runDown("sim-a", "iop-sim", 0))
	_ = stalled
	var r *wire.CommandResult
	deadline := time.Now().Add(defaultTestTimeout)
	for {
		r = commandResult(t, l.edge.dispatch(t, s, &wire.AttemptDown{Msg: &wire.AttemptDown_Command{Command: &wire.Command{Command: "transport_status"}}}))
		ts := r.GetTransportStatus()
		if len(ts.GetProviders()) == 1 && ts.GetProviders()[0].GetInFlight() == 1 {
			if ts.GetState() != "connected" || ts.GetConnectionGeneration() != s.gen {
				t.Fatalf("transport status %v", ts)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("transport status %v", ts)
		}
	}
	for _, name := range []string{"shell", "", "Capabilities"} {
		r = commandResult(t, l.edge.dispatch(t, s, &wire.AttemptDown{Msg: &wire.AttemptDown_Command{Command: &wire.Command{Command: name, ProviderId: "sim-a"}}}))
		if r.GetErrorCode() != "command_not_allowed" {
			t.Fatalf("command %q: %v", name, r)
		}
	}
}

func TestReconnectGetsNewGenerationAndFreshSequence(t *testing.T) {
	l := startLink(t, baseConfig(simProvider("sim-a", SimConfig{})), Options{})
	s1 := l.session(t)
	commandResult(t, l.edge.dispatch(t, s1, capabilitiesDown("sim-a", "sim/sim-a", "iop-sim")))
	r := commandResult(t, l.edge.dispatch(t, s1, capabilitiesDown("sim-a", "sim/sim-a", "iop-sim")))
	if r.GetCapabilities().GetHealthObservationSeq() != 2 {
		t.Fatalf("seq %d", r.GetCapabilities().GetHealthObservationSeq())
	}
	s1.once.Do(func() { close(s1.close) }) // the edge drops the session
	s2 := l.session(t)
	if s2.gen <= s1.gen {
		t.Fatalf("generation %d after %d", s2.gen, s1.gen)
	}
	r = commandResult(t, l.edge.dispatch(t, s2, capabilitiesDown("sim-a", "sim/sim-a", "iop-sim")))
	if seq := r.GetCapabilities().GetHealthObservationSeq(); seq != 1 {
		t.Fatalf("first observation on a new connection has seq %d, want 1", seq)
	}
}

func TestMultipleEdgesOneSessionEach(t *testing.T) {
	l := startLink(t, func() Config {
		c := baseConfig(simProvider("sim-a", SimConfig{}))
		c.Edges = []EdgeConfig{{Address: "edge-a"}, {Address: "edge-b"}}
		return c
	}(), Options{})
	a, b := l.session(t), l.session(t)
	if a.gen == b.gen {
		t.Fatal("both sessions share a generation")
	}
	infos := l.agent.Sessions()
	wait.UntilWithin(t, defaultTestTimeout, func() bool { infos = l.agent.Sessions(); return len(infos) == 2 })
	if len(infos) != 2 || infos[0].Edge != "edge-a" || infos[1].Edge != "edge-b" {
		t.Fatalf("sessions %+v", infos)
	}
	for _, s := range []*edgeSession{a, b} {
		evs := l.edge.dispatch(t, s, runDown("sim-a", "iop-sim", 0)).events(t)
		if evs[len(evs)-1].GetType() != "complete" {
			t.Fatal(fmt.Sprint(evs))
		}
	}
}
