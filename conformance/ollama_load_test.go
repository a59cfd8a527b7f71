package conformance

import (
	"testing"

	"github.com/iopgw/iop/internal/testing/e2e"
	"github.com/iopgw/iop/nodeagent"
)

// TestOllamaClientLoadsAndUnloads: what `ollama run` sends before its
// first prompt (a generate request without a prompt) and `ollama stop`
// (the same with keep_alive 0), and a chat without messages, get
// Ollama's own answer from the official client — done, with the load or
// unload reason and no text — on a translated provider and on a native
// Ollama one, and reach no upstream: nothing is generated or charged,
// and a client of a shared gateway does not evict a model.
func TestOllamaClientLoadsAndUnloads(t *testing.T) {
	needJS(t, "ollama")
	c := e2e.Start(t, e2e.Options{}, func(c *e2e.Cluster) []e2e.NodeSpec {
		c.Wall.Models = []string{"native"}
		return []e2e.NodeSpec{{ID: "node-1", Providers: []nodeagent.ProviderConfig{
			e2e.Sim("s", nodeagent.SimConfig{}), c.WallProvider("w", "ollama", "", "native")}}}
	})
	oj := jsClient("ollama-js", "node", "ollama")
	for _, tc := range []struct{ scenario, text string }{
		{"load:iop-sim", "true|load||iop-sim"},
		{"unload:iop-sim", "true|unload||iop-sim"},
		{"load-chat:iop-sim", "true|load|assistant||iop-sim"},
		{"load:native", "true|load||native"},
		{"unload:native", "true|unload||native"},
		{"load-chat:native", "true|load|assistant||native"},
	} {
		o, err := oj.run(t.Context(), c.URL, tc.scenario)
		if err != nil {
			t.Fatal(err)
		}
		if o.Terminal != "ok" || o.Chunks != 1 || o.Text != tc.text {
			t.Errorf("%s: %+v, want one answer %q", tc.scenario, o, tc.text)
		}
	}
	if n := len(c.Wall.AttemptsFor("native")); n != 0 {
		t.Errorf("the native Ollama upstream got %d requests, want none", n)
	}
	o, err := oj.run(t.Context(), c.URL, "load:no-such-model")
	if err != nil {
		t.Fatal(err)
	}
	if o.Status != 404 || o.Error == nil || o.Error.Message != "model 'no-such-model' not found" {
		t.Errorf("an unknown model's load: %+v", o)
	}
	// A prompt is generated as before.
	if o, err := oj.run(t.Context(), c.URL, "generate-stream:iop-sim"); err != nil || o.Terminal != "ok" || o.Text == "" {
		t.Errorf("a prompt: %+v %v", o, err)
	}
}
