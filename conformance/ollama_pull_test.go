package conformance

import (
	"testing"

	"github.com/iopgw/iop/gateway"
	"github.com/iopgw/iop/internal/testing/e2e"
	"github.com/iopgw/iop/nodeagent"
)

// TestOllamaClientPulls: `ollama pull` of a model the gateway serves (and
// the key may use) gets Ollama's answer for a model it has — "success",
// streamed or not — from the official client, and reaches no upstream;
// a model the gateway does not serve, or the key may not use, is a 404
// saying that iop does not pull models.
func TestOllamaClientPulls(t *testing.T) {
	needJS(t, "ollama")
	c := e2e.Start(t, e2e.Options{Gateway: func(g *gateway.Config) {
		g.Auth.Keys = []gateway.KeyConfig{{ID: "k", SHA256: gateway.HashToken("sk-k"), Models: []string{"iop-sim"}}}
	}},
		func(c *e2e.Cluster) []e2e.NodeSpec {
			c.Wall.Models = []string{"native"}
			return []e2e.NodeSpec{{ID: "node-1", Providers: []nodeagent.ProviderConfig{
				e2e.Sim("s", nodeagent.SimConfig{}), c.WallProvider("w", "ollama", "", "native")}}}
		})
	oj := jsClient("ollama-js", "node", "ollama")
	t.Setenv("IOP_KEY", "sk-k") // client.mjs sends it as the bearer token
	for _, tc := range []struct{ scenario, text string }{
		{"pull:iop-sim", "success"},
		{"pull-json:iop-sim", "success"},
	} {
		o, err := oj.run(t.Context(), c.URL, tc.scenario)
		if err != nil {
			t.Fatal(err)
		}
		if o.Terminal != "ok" || o.Chunks != 1 || o.Text != tc.text {
			t.Errorf("%s: %+v, want %q", tc.scenario, o, tc.text)
		}
	}
	for _, model := range []string{"native", "no-such-model"} { // the key may not use native
		o, err := oj.run(t.Context(), c.URL, "pull:"+model)
		if err != nil {
			t.Fatal(err)
		}
		want := "model '" + model + "' is not served by this gateway, and iop does not pull models: pull it with the Ollama next to a node, or add it to a provider's models"
		if o.Status != 404 || o.Error == nil || o.Error.Message != want[:80] { // client.mjs keeps 80 characters
			t.Errorf("pull of %s: %+v %+v", model, o, o.Error)
		}
	}
	if n := len(c.Wall.AttemptsFor("native")); n != 0 {
		t.Errorf("the native Ollama upstream got %d requests, want none", n)
	}
}

// TestOllamaClientCannotManageModels: deleting or copying a model through
// the official client is a 403 saying that iop does not manage models
// (where that is done), not a 404 that reads as a wrong address.
func TestOllamaClientCannotManageModels(t *testing.T) {
	needJS(t, "ollama")
	c := e2e.Start(t, e2e.Options{}, func(c *e2e.Cluster) []e2e.NodeSpec {
		return []e2e.NodeSpec{{ID: "node-1", Providers: []nodeagent.ProviderConfig{e2e.Sim("s", nodeagent.SimConfig{})}}}
	})
	oj := jsClient("ollama-js", "node", "ollama")
	want := "iop serves the models of its nodes' providers and does not manage them: create, copy, push and delete models with the Ollama next to a node"
	for _, scenario := range []string{"delete:iop-sim", "copy:iop-sim"} {
		o, err := oj.run(t.Context(), c.URL, scenario)
		if err != nil {
			t.Fatal(err)
		}
		if o.Status != 403 || o.Error == nil || o.Error.Message != want[:80] {
			t.Errorf("%s: %+v %+v", scenario, o, o.Error)
		}
	}
}
