package e2e

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/iopgw/iop/gateway"
	"github.com/iopgw/iop/nodeagent"
)

// TestOllamaShowFromTheProvider: /api/show for a model served by a
// provider speaking Ollama's API natively is that upstream's answer —
// its modelfile, template, details and capabilities, which clients read
// for the context length and for vision or thinking support — reaching
// the upstream as sent and charged nothing; for a model no such provider
// serves (the sim), the edge answers with what it knows, and reaches no
// provider. A model the key may not use is a 404 either way.
func TestOllamaShowFromTheProvider(t *testing.T) {
	c := Start(t, Options{Gateway: func(g *gateway.Config) {
		g.Auth.Keys = []gateway.KeyConfig{{ID: "team-a", SHA256: gateway.HashToken("sk-a"), Models: []string{"llama3.2", "iop-sim"},
			Limits: gateway.KeyLimits{TokensPerDay: 100000}}}
	}}, func(c *Cluster) []NodeSpec {
		return []NodeSpec{{ID: "n", Providers: []nodeagent.ProviderConfig{Sim("sim", nodeagent.SimConfig{}),
			c.WallProvider("ollama", "ollama", "", "llama3.2", "qwen3")}}}
	})
	show := func(model string) (int, map[string]any) {
		t.Helper()
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, c.URL+"/api/show", strings.NewReader(`{"model":"`+model+`","verbose":false}`))
		req.Header.Set("Authorization", "Bearer sk-a")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var v map[string]any
		if err := json.Unmarshal([]byte(readAll(t, resp)), &v); err != nil {
			t.Fatalf("%s: %v", model, err)
		}
		return resp.StatusCode, v
	}

	status, v := show("llama3.2")
	if status != http.StatusOK || v["modelfile"] != "FROM wall" || v["template"] != "{{ .Prompt }}" {
		t.Fatalf("a native Ollama model: %d %v", status, v)
	}
	at := c.Wall.AttemptsFor("llama3.2")
	if len(at) != 1 || at[0].Path != "/api/show" || string(at[0].Body) != `{"model":"llama3.2","verbose":false}` {
		t.Fatalf("the upstream got %d requests: %+v", len(at), at)
	}
	if status, v = show("iop-sim"); status != http.StatusOK || v["modelfile"] != "# served by iop" {
		t.Fatalf("the sim's model: %d %v", status, v)
	}
	if status, v = show("qwen3"); status != http.StatusNotFound || v["error"] != "model 'qwen3' not found" {
		t.Fatalf("a model the key may not use: %d %v", status, v)
	}
	if n := len(c.Wall.Attempts()); n != 1 {
		t.Fatalf("the upstream got %d requests, want the one show", n)
	}
	if u := adminKeys(t, c)["team-a"]; u.Today != 0 {
		t.Errorf("the key was charged %d tokens for showing models", u.Today)
	}
}
