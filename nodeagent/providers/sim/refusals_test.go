package sim

import (
	"bytes"
	"net/http"
	"testing"
	"time"

	"github.com/iopgw/iop/execution"
)

// TestSimRefusesLogprobs: the sim makes no log probabilities, so a
// request for them is refused naming the field — on the tunnel (Chat and
// Responses) and on the normalized path — never answered with logprobs
// null.
func TestSimRefusesLogprobs(t *testing.T) {
	p := New(Config{TokenLatency: time.Microsecond})
	for _, tc := range []struct{ path, body, param string }{
		{"/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}],"logprobs":true}`, "logprobs"},
		{"/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}],"logprobs":false,"top_logprobs":0}`, ""},
		{"/v1/responses", `{"model":"m","input":"hi","top_logprobs":2}`, "top_logprobs"},
		{"/v1/responses", `{"model":"m","input":"hi","include":["message.output_text.logprobs"]}`, "include"},
		{"/v1/responses", `{"model":"m","input":"hi","include":["reasoning.encrypted_content"]}`, ""},
	} {
		status, body := tunnel(t, p, tc.path, tc.body)
		if v := decodeAnswer(t, body); v.Error.Param != tc.param || (tc.param != "") != (status == http.StatusBadRequest) {
			t.Errorf("%s %s: %d %s", tc.path, tc.body, status, body)
		}
	}
	r := req("hi")
	r.ChatBody = []byte(`{"model":"m","messages":[{"role":"user","content":"hi"}],"top_logprobs":3}`)
	evs, _ := execute(t, p, r, time.Second)
	if len(evs) != 1 || evs[0].Type != execution.EventTypeError || evs[0].Failure.Upstream == nil ||
		evs[0].Failure.Upstream.Status != http.StatusBadRequest || evs[0].Failure.Upstream.Param != "logprobs" {
		t.Fatalf("normalized: %+v", evs)
	}
}

// TestSimRefusesReasoning: the sim does not reason, so a request asking
// it to — a reasoning effort, a template's enable_thinking (what an
// Ollama client's think becomes), a reasoning summary — is refused naming
// the field, as OpenAI refuses it for a model that does not reason, on
// the tunnel and on the normalized path; effort none is no request.
func TestSimRefusesReasoning(t *testing.T) {
	p := New(Config{TokenLatency: time.Microsecond})
	for _, tc := range []struct{ path, body, param string }{
		{"/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}],"reasoning_effort":"high"}`, "reasoning_effort"},
		{"/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}],"reasoning_effort":"none"}`, ""},
		{"/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}],"chat_template_kwargs":{"enable_thinking":true}}`, "chat_template_kwargs"},
		{"/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}],"chat_template_kwargs":{"enable_thinking":false}}`, ""},
		{"/v1/responses", `{"model":"m","input":"hi","reasoning":{"effort":"low"}}`, "reasoning.effort"},
		{"/v1/responses", `{"model":"m","input":"hi","reasoning":{"summary":"auto"}}`, "reasoning.summary"},
		{"/v1/responses", `{"model":"m","input":"hi","reasoning":{"effort":"none"}}`, ""},
	} {
		status, body := tunnel(t, p, tc.path, tc.body)
		if v := decodeAnswer(t, body); v.Error.Param != tc.param || (tc.param != "") != (status == http.StatusBadRequest) {
			t.Errorf("%s %s: %d %s", tc.path, tc.body, status, body)
		}
	}
	r := req("hi")
	r.ChatBody = []byte(`{"model":"m","messages":[{"role":"user","content":"hi"}],"reasoning_effort":"medium"}`)
	evs, _ := execute(t, p, r, time.Second)
	if len(evs) != 1 || evs[0].Type != execution.EventTypeError || evs[0].Failure.Upstream == nil || evs[0].Failure.Upstream.Param != "reasoning_effort" {
		t.Fatalf("normalized: %+v", evs)
	}
}

// TestSimRefusesOutputItCannotMake: audio output, web search (Chat's
// options, or the Responses API's server tools) are refused naming the
// field, as OpenAI refuses them for a model without them, on the tunnel
// and the normalized path — never a text answer without what was asked.
func TestSimRefusesOutputItCannotMake(t *testing.T) {
	p := New(Config{TokenLatency: time.Microsecond})
	for _, tc := range []struct{ path, body, param string }{
		{"/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}],"modalities":["text","audio"],"audio":{"voice":"alloy","format":"wav"}}`, "modalities"},
		{"/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}],"modalities":["text"]}`, ""},
		{"/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}],"web_search_options":{}}`, "web_search_options"},
		{"/v1/responses", `{"model":"m","input":"news","tools":[{"type":"web_search"}]}`, "tools"},
		{"/v1/responses", `{"model":"m","input":"hi","tools":[{"type":"function","name":"f","parameters":{"type":"object"}}]}`, ""},
	} {
		status, body := tunnel(t, p, tc.path, tc.body)
		if v := decodeAnswer(t, body); v.Error.Param != tc.param || (tc.param != "") != (status == http.StatusBadRequest) {
			t.Errorf("%s %s: %d %s", tc.path, tc.body, status, body)
		}
	}
	r := req("hi")
	r.ChatBody = []byte(`{"model":"m","messages":[{"role":"user","content":"hi"}],"audio":{"voice":"alloy","format":"wav"}}`)
	evs, _ := execute(t, p, r, time.Second)
	if len(evs) != 1 || evs[0].Type != execution.EventTypeError || evs[0].Failure.Upstream == nil || evs[0].Failure.Upstream.Param != "modalities" {
		t.Fatalf("normalized: %+v", evs)
	}
}

// TestTunnelToolChoiceNamesAnUnknownTool: a tool_choice naming a tool the
// request does not define, or requiring a call of none, is refused (as
// OpenAI and Anthropic refuse it) on every API and on the normalized
// path, never answered with a call of another tool or with text; one it
// defines is the tool called.
func TestTunnelToolChoiceNamesAnUnknownTool(t *testing.T) {
	p := New(Config{TokenLatency: time.Microsecond})
	chatTools := `"tools":[{"type":"function","function":{"name":"a","parameters":{"type":"object"}}},{"type":"function","function":{"name":"b","parameters":{"type":"object"}}}]`
	for _, tc := range []struct{ path, body, called string }{
		{"/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}],` + chatTools + `,"tool_choice":{"type":"function","function":{"name":"zzz"}}}`, ""},
		{"/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}],` + chatTools + `,"tool_choice":{"type":"function","function":{"name":"b"}}}`, `"name":"b"`},
		{"/v1/responses", `{"model":"m","input":"hi","tools":[{"type":"function","name":"a","parameters":{"type":"object"}}],"tool_choice":{"type":"function","name":"zzz"}}`, ""},
		{"/v1/messages", `{"model":"m","max_tokens":9,"messages":[{"role":"user","content":"hi"}],"tools":[{"name":"a","input_schema":{"type":"object"}}],"tool_choice":{"type":"tool","name":"zzz"}}`, ""},
		{"/v1/messages", `{"model":"m","max_tokens":9,"messages":[{"role":"user","content":"hi"}],"tools":[{"name":"a","input_schema":{"type":"object"}}],"tool_choice":{"type":"tool","name":"a"}}`, `"name":"a"`},
	} {
		status, body := tunnel(t, p, tc.path, tc.body)
		if tc.called == "" && (status != http.StatusBadRequest || !bytes.Contains(body, []byte(`zzz`))) ||
			tc.called != "" && (status != http.StatusOK || !bytes.Contains(body, []byte(tc.called))) {
			t.Errorf("%s %s: %d %s", tc.path, tc.body, status, body)
		}
	}
	for _, body := range []string{
		`{"model":"m","messages":[{"role":"user","content":"hi"}],"tool_choice":"required"}`,
		`{"model":"m","messages":[{"role":"user","content":"hi"}],"tool_choice":{"type":"function","function":{"name":"zzz"}}}`,
	} {
		if status, b := tunnel(t, p, "/v1/chat/completions", body); status != http.StatusBadRequest || !bytes.Contains(b, []byte(`"param":"tool_choice"`)) {
			t.Errorf("no tools, %s: %d %s", body, status, b)
		}
	}
	if status, b := tunnel(t, p, "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}],"tool_choice":"auto"}`); status != http.StatusOK {
		t.Errorf("no tools, auto: %d %s", status, b)
	}
	r := req("hi")
	r.Params.Tools = []byte(`[{"type":"function","function":{"name":"a"}}]`)
	r.Params.ToolChoice = []byte(`{"type":"function","function":{"name":"zzz"}}`)
	evs, _ := execute(t, p, r, time.Second)
	if len(evs) != 1 || evs[0].Type != execution.EventTypeError || evs[0].Failure.Upstream == nil || evs[0].Failure.Upstream.Param != "tool_choice" {
		t.Fatalf("normalized: %+v", evs)
	}
}
