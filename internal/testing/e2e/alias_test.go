package e2e

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/iopgw/iop/gateway"
	"github.com/iopgw/iop/gateway/pool"
	"github.com/iopgw/iop/internal/testing/wall"
	"github.com/iopgw/iop/nodeagent"
)

// TestAliasRoutingAndWeights: a client-facing alias over two provider
// models weighted 3:1. Each upstream receives its own model name; the
// client sees the alias in answers (streamed and not), /v1/models and
// /api/tags; the requests split 30:10.
func TestAliasRoutingAndWeights(t *testing.T) {
	var wa, wb *wall.Wall
	c := Start(t, Options{Gateway: func(g *gateway.Config) {
		g.Models = []gateway.ModelConfig{{Name: "team-llama", Targets: []pool.ModelTarget{
			{Provider: "n/a", Model: "llama-a", Weight: 3}, {Provider: "n/b", Model: "llama-b", Weight: 1}}}}
	}}, func(c *Cluster) []NodeSpec {
		var ua, ub string
		wa, ua = c.AddWall(t, "")
		wb, ub = c.AddWall(t, "")
		wa.Models, wb.Models = []string{"llama-a"}, []string{"llama-b"}
		mk := func(id, url, model string) nodeagent.ProviderConfig {
			return nodeagent.ProviderConfig{ID: id, Adapter: "openai", BaseURL: url + "/v1", Models: []string{model}, Capacity: 4}
		}
		return []NodeSpec{{ID: "n", Providers: []nodeagent.ProviderConfig{mk("a", ua, "llama-a"), mk("b", ub, "llama-b")}}}
	})
	for i := range 40 {
		if i%2 == 0 {
			r := streamChat(t, c.URL, "team-llama")
			if r.status != 200 || r.done != 1 || !strings.Contains(strings.Join(r.events, "\n"), `"model":"team-llama"`) {
				t.Fatalf("stream %d: %+v", i, r)
			}
			continue
		}
		resp := post(t, c.URL+"/v1/chat/completions", `{"model":"team-llama","messages":[{"role":"user","content":"hi"}]}`)
		var got struct{ Model string }
		if err := json.Unmarshal([]byte(readAll(t, resp)), &got); err != nil || resp.StatusCode != 200 || got.Model != "team-llama" {
			t.Fatalf("request %d: %d %+v %v", i, resp.StatusCode, got, err)
		}
	}
	na, nb := len(wa.Attempts()), len(wb.Attempts())
	if na != 30 || nb != 10 {
		t.Fatalf("split %d:%d, want 30:10", na, nb)
	}
	for _, a := range append(wa.Attempts(), wb.Attempts()...) {
		if a.Model != "llama-a" && a.Model != "llama-b" {
			t.Fatalf("an upstream received the model %q", a.Model)
		}
	}
	for path, want := range map[string]string{"/v1/models": `"id":"team-llama"`, "/api/tags": `"name":"team-llama"`} {
		resp, err := http.Get(c.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		if b := readAll(t, resp); !strings.Contains(b, want) {
			t.Fatalf("%s lacks the alias: %s", path, b)
		}
	}
}

// TestAliasExposingItsTargetOnOllama: an alias that exposes its target
// keeps native passthrough, and its native Ollama requests (/api/chat,
// /api/generate, streamed or not) reach Ollama naming the target, as its
// tunnelled and translated ones do — never the alias, a name Ollama does
// not know.
func TestAliasExposingItsTargetOnOllama(t *testing.T) {
	c := Start(t, Options{Gateway: func(g *gateway.Config) {
		g.Models = []gateway.ModelConfig{{Name: "team", Targets: []pool.ModelTarget{{Model: "llama3.2"}}, ExposeTarget: true}}
	}}, func(c *Cluster) []NodeSpec {
		return []NodeSpec{{ID: "n", Providers: []nodeagent.ProviderConfig{c.WallProvider("ollama-1", "ollama", "", "llama3.2")}}}
	})
	for _, r := range []struct{ path, body string }{
		{"/api/chat", `{"model":"team","stream":false,"messages":[{"role":"user","content":"hi"}]}`},
		{"/api/chat", `{"model":"team","messages":[{"role":"user","content":"hi"}]}`},
		{"/api/generate", `{"model":"team","stream":false,"prompt":"hi"}`},
		{"/v1/chat/completions", `{"model":"team","messages":[{"role":"user","content":"hi"}]}`},
	} {
		resp := post(t, c.URL+r.path, r.body)
		body := readAll(t, resp)
		as := c.Wall.Attempts()
		if resp.StatusCode != 200 || len(as) == 0 || as[len(as)-1].Model != "llama3.2" {
			t.Fatalf("%s %s: %d %.300s; the upstream got %+v", r.path, r.body, resp.StatusCode, body, as)
		}
		if !strings.Contains(body, `"model":"llama3.2"`) || strings.Contains(body, `"team"`) {
			t.Errorf("%s: the answer does not name the exposed target: %.300s", r.path, body)
		}
	}
}
