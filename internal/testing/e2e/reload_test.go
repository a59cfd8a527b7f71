package e2e

import (
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/iopgw/iop/gateway"
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
