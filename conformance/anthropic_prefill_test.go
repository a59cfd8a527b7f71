package conformance

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/iopgw/iop/internal/testing/e2e"
	"github.com/iopgw/iop/nodeagent"
)

// TestAnthropicPrefill: an Anthropic client's prefill (a trailing
// assistant message) is continued, as the Messages API continues it —
// by an upstream serving Messages natively, and on the Chat translation
// as a continuation on a provider that declares prefill (with its
// prefill fields) — and refused with a 400 naming messages, reaching no
// upstream, where no provider of the model continues one (Chat has no
// prefill: the answer would be a new turn, not the continuation asked
// for).
func TestAnthropicPrefill(t *testing.T) {
	c := e2e.Start(t, e2e.Options{}, func(c *e2e.Cluster) []e2e.NodeSpec {
		native := e2e.Sim("native", nodeagent.SimConfig{})
		native.Models = []string{"native"}
		chatSim := e2e.Sim("chat-sim", nodeagent.SimConfig{})
		chatSim.Models, chatSim.Surfaces = []string{"chat-sim"}, []string{"chat"}
		cont := c.WallProvider("cont", "openai", "", "cont")
		cont.Prefill, cont.PrefillFields = new(true), map[string]any{"continue_final_message": true, "add_generation_prompt": false}
		c.Wall.Models = []string{"plain", "cont"}
		return []e2e.NodeSpec{{ID: "n", Providers: []nodeagent.ProviderConfig{native, chatSim, c.WallProvider("plain", "openai", "", "plain"), cont}}}
	})
	const continued = ": hi. This answer comes from iop-sim, the built-in simulated model."
	for _, sc := range []string{"prefill:native", "prefill-stream:native", "prefill:chat-sim", "prefill-stream:chat-sim"} {
		if o := runAnthropic(t, c.URL, "unused", sc); o.Terminal != "ok" || o.Text != continued || o.Stop != "end_turn" {
			t.Errorf("%s: %+v, want the prefill continued: %q", sc, o, continued)
		}
	}

	o := runAnthropic(t, c.URL, "unused", "prefill:plain")
	if o.Status != 400 || o.Error == nil || o.Error.Class != "BadRequestError" || o.Error.Type != "invalid_request_error" || !strings.Contains(o.Error.Message, "prefill") {
		t.Errorf("a prefill no provider continues: %+v %+v", o, o.Error)
	}
	if n := len(c.Wall.AttemptsFor("plain")); n != 0 {
		t.Errorf("the Chat upstream without prefill got %d requests, want none", n)
	}
	if o := runAnthropic(t, c.URL, "unused", "text:plain"); o.Terminal != "ok" {
		t.Errorf("the same model without a prefill: %+v", o)
	}

	if o := runAnthropic(t, c.URL, "unused", "prefill:cont"); o.Terminal != "ok" {
		t.Fatalf("a prefill on a provider that continues one: %+v", o)
	}
	as := c.Wall.AttemptsFor("cont")
	if len(as) != 1 {
		t.Fatalf("the continuing upstream got %d requests", len(as))
	}
	var body struct {
		Messages []struct {
			Role    string `json:"role"`
			Content any    `json:"content"`
		} `json:"messages"`
		ContinueFinalMessage bool  `json:"continue_final_message"`
		AddGenerationPrompt  *bool `json:"add_generation_prompt"`
	}
	if err := json.Unmarshal(as[0].Body, &body); err != nil {
		t.Fatal(err)
	}
	last := body.Messages[len(body.Messages)-1]
	if last.Role != "assistant" || last.Content != "You said" || !body.ContinueFinalMessage || body.AddGenerationPrompt == nil || *body.AddGenerationPrompt {
		t.Errorf("the continuing upstream got %s", as[0].Body)
	}
}
