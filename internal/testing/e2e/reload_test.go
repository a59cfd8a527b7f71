package e2e

import (
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/iopgw/iop/gateway"
	"github.com/iopgw/iop/gateway/fleet"
	"github.com/iopgw/iop/gateway/pool"
	"github.com/iopgw/iop/internal/testing/wait"
	"github.com/iopgw/iop/nodeagent"
)

// TestReloadUnderLoad: 200 streams in flight while the edge reloads (a
// client key added, one removed) and the node reloads (a provider
// added): every stream completes, the new key passes, the removed one is
// refused, the new provider serves; an invalid reload changes nothing.
func TestReloadUnderLoad(t *testing.T) {
	keys := func(ids ...string) []gateway.KeyConfig {
		var out []gateway.KeyConfig
		for _, id := range ids {
			out = append(out, gateway.KeyConfig{ID: id, SHA256: gateway.HashToken("sk-" + id)})
		}
		return out
	}
	c := Start(t, Options{Gateway: func(g *gateway.Config) { g.Auth.Keys = keys("old", "stays") },
		Nodes: []NodeSpec{{ID: "n", Providers: []nodeagent.ProviderConfig{
			Sim("sim-a", nodeagent.SimConfig{TokenLatency: 40 * time.Millisecond, MaxTokens: 20}),
		}}}}, nil)
	send := func(key, model string, stream bool) (int, string) {
		body := `{"model":"` + model + `","stream":` + map[bool]string{true: "true", false: "false"}[stream] + `,"messages":[{"role":"user","content":"hello there"}]}`
		req, _ := http.NewRequest(http.MethodPost, c.URL+"/v1/chat/completions", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer sk-"+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		return resp.StatusCode, readAll(t, resp)
	}
	const n = 200
	var wg sync.WaitGroup
	results := make(chan string, n)
	for range n {
		wg.Go(func() {
			code, body := send("stays", "iop-sim", true)
			if code != 200 || !strings.Contains(body, "data: [DONE]") || strings.Contains(body, `"error"`) {
				results <- body
			}
		})
	}
	time.Sleep(150 * time.Millisecond) // streams are mid-answer (20 tokens × 40 ms)
	gw := c.Gateway.Config()
	gw.Auth.Keys = keys("stays", "new")
	if err := c.Gateway.Reload(gw); err != nil {
		t.Fatal(err)
	}
	node := c.Nodes["n"].Config()
	node.Providers = append(node.Providers, Sim("sim-b", nodeagent.SimConfig{}))
	node.Providers[1].Models = []string{"added-model"}
	if err := node.Resolve(); err != nil {
		t.Fatal(err)
	}
	if err := c.Nodes["n"].Reload(t.Context(), node); err != nil {
		t.Fatal(err)
	}
	if code, _ := send("new", "iop-sim", false); code != 200 {
		t.Fatalf("the added key: %d", code)
	}
	if code, _ := send("old", "iop-sim", false); code != http.StatusUnauthorized {
		t.Fatalf("the removed key: %d", code)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		code, body := send("new", "added-model", false)
		if code == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the added provider never served: %d %s", code, body)
		}
		time.Sleep(20 * time.Millisecond)
	}
	wg.Wait()
	close(results)
	for bad := range results {
		t.Fatalf("a stream in flight during the reloads did not complete cleanly: %.300s", bad)
	}
	gen := c.Gateway.ConfigGeneration()
	bad := c.Gateway.Config()
	bad.Models = []gateway.ModelConfig{{Name: "x", Fallbacks: []string{"x"}}}
	if err := c.Gateway.Reload(bad); err == nil || c.Gateway.ConfigGeneration() != gen {
		t.Fatalf("an invalid reload: %v, generation %d → %d", err, gen, c.Gateway.ConfigGeneration())
	}
	if code, _ := send("new", "iop-sim", false); code != 200 {
		t.Fatalf("after the invalid reload: %d", code)
	}
	c.WaitIdle(t)
}

// TestRemovedNodeRetiresByItsDrainTimeout (issue 27): a node removed by a
// reload takes no new work; its session ends when its last stream ends
// (woken by that end, not a poll), or when the configured drain_timeout
// passes (it used to be the default 30 s whatever was configured).
func TestRemovedNodeRetiresByItsDrainTimeout(t *testing.T) {
	for _, tt := range []struct {
		name     string
		tokens   int
		drain    time.Duration
		maxAfter time.Duration // from the reload to the session's end
	}{
		{"its stream ends first", 5, 10 * time.Second, 2 * time.Second},
		{"drain_timeout first", 200, 400 * time.Millisecond, 2 * time.Second},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := Start(t, Options{Gateway: func(g *gateway.Config) { g.DrainTimeout = tt.drain },
				Nodes: []NodeSpec{
					{ID: "gone", Providers: []nodeagent.ProviderConfig{Sim("slow", nodeagent.SimConfig{TokenLatency: 50 * time.Millisecond, MaxTokens: tt.tokens})}},
					{ID: "stays", Providers: []nodeagent.ProviderConfig{Sim("other", nodeagent.SimConfig{})}},
				}}, nil)
			cfg := c.Gateway.Config()
			cfg.Providers = []pool.ProviderPolicy{{ID: "gone/slow", Priority: 10}}
			if err := c.Gateway.Reload(cfg); err != nil {
				t.Fatal(err)
			}
			done := make(chan sseResult, 1)
			go func() { done <- streamChat(t, c.URL, "iop-sim") }()
			wait.Until(t, func() bool { return c.Gateway.Pool().InUse() == 1 })
			cfg.Nodes = []fleet.NodeConfig{{ID: "stays", Token: "token-stays"}}
			cfg.Providers = nil
			reloaded := time.Now()
			if err := c.Gateway.Reload(cfg); err != nil {
				t.Fatal(err)
			}
			connected := func(id string) bool {
				for _, n := range c.Gateway.Hub().Nodes() {
					if n.NodeID == id {
						return true
					}
				}
				return false
			}
			wait.Until(t, func() bool { return !connected("gone") })
			if d := time.Since(reloaded); d > tt.maxAfter {
				t.Fatalf("the removed node's session ended %v after the reload; want within %v", d, tt.maxAfter)
			}
			<-done
			if !connected("stays") {
				t.Fatal("the node that stays was disconnected")
			}
		})
	}
}
