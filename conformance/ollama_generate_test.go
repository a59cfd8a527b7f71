package conformance

import (
	"bytes"
	"testing"

	"github.com/iopgw/iop/internal/testing/e2e"
	"github.com/iopgw/iop/nodeagent"
)

// TestOllamaClientFillInTheMiddle: a generate request with a suffix (a
// code editor's fill-in-the-middle, through ollama-js) goes to a native
// Ollama upstream as sent, and is refused with a 400 naming the suffix by
// a provider that cannot place an answer before it — the sim, an
// OpenAI-compatible upstream on the translated path — rather than
// answered as an ordinary prompt.
func TestOllamaClientFillInTheMiddle(t *testing.T) {
	needJS(t, "ollama")
	c := e2e.Start(t, e2e.Options{}, func(c *e2e.Cluster) []e2e.NodeSpec {
		c.Wall.Models = []string{"native", "chat-upstream"}
		return []e2e.NodeSpec{{ID: "node-1", Providers: []nodeagent.ProviderConfig{e2e.Sim("s", nodeagent.SimConfig{}),
			c.WallProvider("w", "ollama", "", "native"), c.WallProvider("o", "openai", nodeagent.PathNormalized, "chat-upstream")}}}
	})
	oj := jsClient("ollama-js", "node", "ollama")
	for _, model := range []string{"iop-sim", "chat-upstream"} {
		o, err := oj.run(t.Context(), c.URL, "generate-suffix:"+model)
		if err != nil {
			t.Fatal(err)
		}
		if o.Status != 400 || o.Error == nil || o.Error.Message != `"suffix" cannot be used with this model: its provider has no equivalent` {
			t.Errorf("%s: %+v %+v", model, o, o.Error)
		}
	}
	if n := len(c.Wall.AttemptsFor("chat-upstream")); n != 0 {
		t.Errorf("the Chat upstream got %d requests", n)
	}
	o, err := oj.run(t.Context(), c.URL, "generate-suffix:native")
	if err != nil || o.Terminal != "ok" {
		t.Fatalf("native: %+v %v", o, err)
	}
	if at := c.Wall.AttemptsFor("native"); len(at) != 1 || !bytes.Contains(at[0].Body, []byte(`"suffix":"    return x"`)) {
		t.Errorf("the native upstream did not get the suffix")
	}
}

// TestOllamaClientThinkOnTheSim: think asked of the sim, which does not
// think, is refused as Ollama refuses it for a model that does not think
// (through ollama-js), never answered without the thinking asked for.
func TestOllamaClientThinkOnTheSim(t *testing.T) {
	needJS(t, "ollama")
	c := e2e.Start(t, e2e.Options{}, func(c *e2e.Cluster) []e2e.NodeSpec {
		return []e2e.NodeSpec{{ID: "node-1", Providers: []nodeagent.ProviderConfig{e2e.Sim("s", nodeagent.SimConfig{})}}}
	})
	o, err := jsClient("ollama-js", "node", "ollama").run(t.Context(), c.URL, "chat-think:iop-sim")
	if err != nil {
		t.Fatal(err)
	}
	if o.Status != 400 || o.Error == nil || o.Error.Message != "iop-sim does not think: leave enable_thinking (an Ollama client's think) unset." {
		t.Errorf("think: %+v %+v", o, o.Error)
	}
}
