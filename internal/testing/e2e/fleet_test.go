package e2e

import (
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/iopgw/iop/gateway"
	"github.com/iopgw/iop/gateway/fleet"
	"github.com/iopgw/iop/nodeagent"
)

// slowSim streams its answer to "hi" (14 tokens) in about 2.8 s.
var slowSim = nodeagent.SimConfig{TokenLatency: 200 * time.Millisecond}

// classify checks one client outcome: a complete answer with the exact
// text, or a typed error — never a truncated success. It reports which.
func classify(t *testing.T, r sseResult, want string) string {
	t.Helper()
	switch {
	case r.status == 200 && r.done == 1 && len(r.errors) == 0:
		if r.text != want {
			t.Errorf("complete answer with wrong text %q, want %q", r.text, want)
		}
		return "complete"
	case r.status == 200 && r.done == 0 && len(r.errors) == 1:
		return "typed"
	case r.status >= 500:
		return "status"
	}
	t.Errorf("neither complete nor typed: %+v", r)
	return "bad"
}

// TestFrozenNode: a node that stops moving bytes (SIGSTOP, a silent
// partition) is out of service within the heartbeat bound: its streams
// get a typed terminal then, not after the 15 s transport keepalive, and
// requests meanwhile are served by the healthy node — none reaches the
// client as an error.
func TestFrozenNode(t *testing.T) {
	c := Start(t, Options{Nodes: []NodeSpec{{ID: "node-a", Providers: []nodeagent.ProviderConfig{Sim("sim-a", slowSim)}},
		{ID: "node-b", Providers: []nodeagent.ProviderConfig{Sim("sim-b", slowSim)}}}}, nil)
	c.WaitProviders(t, 2)
	want := streamChat(t, c.URL, "iop-sim").text

	// Two streams in flight: the pool puts one on each node.
	results := make([]sseResult, 2)
	ended := make([]time.Time, 2)
	var wg sync.WaitGroup
	for i := range results {
		wg.Go(func() { results[i] = streamChat(t, c.URL, "iop-sim"); ended[i] = time.Now() })
	}
	time.Sleep(300 * time.Millisecond)
	frozeAt := time.Now()
	c.FreezeNodeLink("node-a")
	t.Cleanup(func() { c.ThawNodeLink("node-a") })

	// New requests during the freeze: each is answered, by node-b (a
	// dispatch to the frozen node fails over after the open timeout).
	during := make([]sseResult, 3)
	took := make([]time.Duration, 3)
	for i := range during {
		wg.Go(func() {
			start := time.Now()
			during[i], took[i] = streamChat(t, c.URL, "iop-sim"), time.Since(start)
		})
	}
	wg.Wait()
	for i, r := range during {
		if got := classify(t, r, want); got != "complete" {
			t.Fatalf("a request during the freeze: %s %+v", got, r)
		}
		if took[i] > 3*time.Second+2*time.Second {
			t.Errorf("a request during the freeze took %v", took[i])
		}
	}
	kinds := map[string]int{}
	var detected time.Duration
	for i, r := range results {
		k := classify(t, r, want)
		kinds[k]++
		if k == "typed" {
			detected = ended[i].Sub(frozeAt)
		}
	}
	if kinds["complete"] != 1 || kinds["typed"] != 1 {
		t.Fatalf("in-flight streams: %v", kinds)
	}
	// Heartbeats every 1 s, dropped after 3 s silent: about 4 s.
	if detected > 6*time.Second {
		t.Fatalf("the frozen node's stream ended %v after the freeze", detected)
	}
	if n := c.Metric(t, "iop_edge_node_heartbeat_drops_total", nil); n != 1 {
		t.Fatalf("%v heartbeat drops", n)
	}
	t.Logf("frozen node: its stream typed after %v; 3 requests during the freeze complete in %v", detected.Round(10*time.Millisecond), took)
}

// TestNodeDrain: a node told to stop drains — edges dispatch nothing new
// to it, its in-flight streams finish intact, and it exits.
func TestNodeDrain(t *testing.T) {
	c := Start(t, Options{Nodes: []NodeSpec{{ID: "node-a", Providers: []nodeagent.ProviderConfig{Sim("sim-a", slowSim)}},
		{ID: "node-b", Providers: []nodeagent.ProviderConfig{Sim("sim-b", slowSim)}}}}, nil)
	c.WaitProviders(t, 2)
	want := streamChat(t, c.URL, "iop-sim").text
	results := make([]sseResult, 2)
	var wg sync.WaitGroup
	for i := range results {
		wg.Go(func() { results[i] = streamChat(t, c.URL, "iop-sim") })
	}
	time.Sleep(300 * time.Millisecond)
	stopped := make(chan time.Duration, 1)
	go func() {
		start := time.Now()
		c.StopNode("node-a")
		stopped <- time.Since(start)
	}()
	time.Sleep(100 * time.Millisecond)
	for range 3 {
		if r := streamChat(t, c.URL, "iop-sim"); classify(t, r, want) != "complete" {
			t.Fatalf("a request during the drain: %+v", r)
		}
	}
	wg.Wait()
	for _, r := range results {
		if got := classify(t, r, want); got != "complete" {
			t.Fatalf("an in-flight stream during the drain: %s %+v", got, r)
		}
	}
	d := <-stopped
	if d > 10*time.Second {
		t.Fatalf("the node took %v to drain", d)
	}
	t.Logf("node drain: in-flight streams completed, the node exited after %v", d.Round(10*time.Millisecond))
}

// TestEdgeStartupAnswers503: before its nodes connect, an edge answers
// 503 model_unavailable with Retry-After — which SDKs retry — never 404.
func TestEdgeStartupAnswers503(t *testing.T) {
	c := Start(t, Options{Gateway: func(cfg *gateway.Config) {
		cfg.Nodes = append(cfg.Nodes, fleet.NodeConfig{ID: "late", Token: "token-late"})
		cfg.Models = append(cfg.Models, gateway.ModelConfig{Name: "configured"})
	}}, nil)
	for _, m := range []string{"iop-sim", "configured"} {
		resp := post(t, c.URL+"/v1/chat/completions", `{"model":"`+m+`","messages":[{"role":"user","content":"hi"}]}`)
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
			t.Fatalf("%s before nodes connect: %d Retry-After %q", m, resp.StatusCode, resp.Header.Get("Retry-After"))
		}
	}
	c.StartNode(t, NodeSpec{ID: "late", Providers: []nodeagent.ProviderConfig{Sim("sim", nodeagent.SimConfig{})}})
	c.WaitProviders(t, 1)
	if r := streamChat(t, c.URL, "iop-sim"); r.status != 200 || r.done != 1 {
		t.Fatalf("after the node connected: %+v", r)
	}
	resp := post(t, c.URL+"/v1/chat/completions", `{"model":"nobody-serves-this","messages":[{"role":"user","content":"hi"}]}`)
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("an unknown model once every node connected: %d", resp.StatusCode)
	}
	c.StopNode("late")
	// The node has exited; the edge learns it from its link a moment
	// later (a request in that moment may still be leased to it: see
	// TestVanishedProviderIsNoProvider).
	c.WaitProviders(t, 0)
	resp = post(t, c.URL+"/v1/chat/completions", `{"model":"configured","messages":[{"role":"user","content":"hi"}]}`)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("a configured model with its node gone: %d", resp.StatusCode)
	}
	// Not configured, but served until its node went away (reconnecting):
	// 503 too, never a 404 that SDKs do not retry.
	resp = post(t, c.URL+"/v1/chat/completions", `{"model":"iop-sim","messages":[{"role":"user","content":"hi"}]}`)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("a served model with its node gone: %d", resp.StatusCode)
	}
}

// TestEdgeShutdownIsPrompt: with nothing in flight, an edge stops right
// after HTTP drained — node sessions are closed, not waited on.
func TestEdgeShutdownIsPrompt(t *testing.T) {
	c := Start(t, Options{Nodes: []NodeSpec{{ID: "node-a", Providers: []nodeagent.ProviderConfig{Sim("sim-a", nodeagent.SimConfig{})}}}}, nil)
	c.WaitProviders(t, 1)
	start := time.Now()
	c.StopEdge()
	if d := time.Since(start); d > time.Second {
		t.Fatalf("an idle edge took %v to stop", d)
	}
}
