package conformance

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/iopgw/iop/internal/testing/e2e"
	"github.com/iopgw/iop/nodeagent"
)

// frameworkOutcome is what frameworks.mjs printed.
type frameworkOutcome struct {
	OK        bool           `json:"ok"`
	Error     string         `json:"error"`
	Object    map[string]any `json:"object"`
	Text      string         `json:"text"`
	ToolCalls []struct {
		Name    string         `json:"name"`
		Input   map[string]any `json:"input"`
		Invalid bool           `json:"invalid"`
	} `json:"toolCalls"`
}

func runFramework(t *testing.T, base, scenario string) frameworkOutcome {
	t.Helper()
	var o frameworkOutcome
	runScript(t, 90*time.Second, "frameworks.mjs", &o, base, "sk-none", scenario)
	return o
}

// TestFrameworksAgainstTheSim runs the frameworks teams build on — the
// Vercel AI SDK (generateObject on Chat and on Responses, a zod-typed
// tool, streamText), LangChain JS (withStructuredOutput, bindTools),
// LlamaIndex (responseFormat, a FunctionTool) and the OpenAI Agents SDK
// (an agent that calls a tool and answers from its result, on Responses),
// and ollama-js's embed and embeddings —
// against the built-in sim, tunnelled (the sim serves the surfaces
// natively) and translated (path: normalized): structured answers and
// tool arguments follow the zod schema, so the frameworks' own validation
// accepts them.
func TestFrameworksAgainstTheSim(t *testing.T) {
	if !fileExists(jsDir + "/node_modules/ai/package.json") {
		t.Fatal("the framework packages are not installed: run `npm ci --prefix conformance/testdata/js` (make test does)")
	}
	c := e2e.Start(t, e2e.Options{}, func(*e2e.Cluster) []e2e.NodeSpec {
		tunnel := e2e.Sim("tunnel", nodeagent.SimConfig{})
		translated := e2e.Sim("translated", nodeagent.SimConfig{})
		translated.Models, translated.Path = []string{"sim-translated"}, nodeagent.PathNormalized
		return []e2e.NodeSpec{{ID: "n", Providers: []nodeagent.ProviderConfig{tunnel, translated}}}
	})
	want := map[string]any{"city": "weather in Paris", "unit": "celsius", "days": 1.0, "tags": []any{"weather in Paris"}}
	for _, model := range []string{"iop-sim", "sim-translated"} {
		for _, s := range []string{"ai-object", "ai-object-responses", "lc-structured", "li-structured"} {
			o := runFramework(t, c.URL, s+":"+model)
			if !o.OK || !equalJSON(o.Object, want) {
				t.Errorf("%s on %s: %+v", s, model, o)
			}
		}
		for _, s := range []string{"ai-tool", "lc-tool", "li-tool"} {
			o := runFramework(t, c.URL, s+":"+model)
			if !o.OK || len(o.ToolCalls) != 1 || o.ToolCalls[0].Name != "getWeather" || o.ToolCalls[0].Invalid || !equalJSON(o.ToolCalls[0].Input, want) {
				t.Errorf("%s on %s: %+v", s, model, o)
			}
		}
		if o := runFramework(t, c.URL, "agents:"+model); !o.OK || len(o.ToolCalls) != 1 || o.ToolCalls[0].Input["city"] != "weather in Paris" ||
			o.Text != "The tool returned: sunny in weather in Paris." {
			t.Errorf("agents on %s: %+v", model, o)
		}
		if o := runFramework(t, c.URL, "ollama-embed:"+model); !o.OK || !equalJSON(o.Object["batch"], []any{8.0, 8.0}) || o.Object["legacy"] == 0.0 {
			t.Errorf("ollama-js embed on %s: %+v", model, o)
		}
		if o := runFramework(t, c.URL, "ai-stream:"+model); !o.OK || o.Text != "You said: hi. This answer comes from iop-sim, the built-in simulated model." {
			t.Errorf("ai-stream on %s: %+v", model, o)
		}
	}
}

func equalJSON(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}
