package openai

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/iopgw/iop/internal/testing/oaispec"
)

// responsesFidelity says, for every field of OpenAI's CreateResponse
// schema (and a vendor extra), what the Chat translation does with it: kept
// under the same name, renamed (to, with the Chat value), or refused.
var responsesFidelity = []struct {
	field, value string
	to, want     string // to "" with want "" means refused
}{
	{"model", `"m"`, "model", `"m"`},
	{"input", `"hi"`, "messages", `[{"content":"hi","role":"user"}]`},
	{"instructions", `"be brief"`, "messages", `[{"content":"be brief","role":"system"},{"content":"hi","role":"user"}]`},
	{"stream", `true`, "stream", `true`},
	{"stream_options", `{"include_obfuscation":false}`, "stream_options", `{"include_obfuscation":false}`},
	{"temperature", `0.5`, "temperature", `0.5`},
	{"top_p", `0.9`, "top_p", `0.9`},
	{"top_logprobs", `3`, "logprobs", `true`},
	{"metadata", `{"k":"v"}`, "metadata", `{"k":"v"}`},
	{"user", `"u1"`, "user", `"u1"`},
	{"safety_identifier", `"s1"`, "safety_identifier", `"s1"`},
	{"prompt_cache_key", `"p1"`, "prompt_cache_key", `"p1"`},
	{"prompt_cache_options", `{"x":1}`, "prompt_cache_options", `{"x":1}`},
	{"prompt_cache_retention", `"24h"`, "prompt_cache_retention", `"24h"`},
	{"moderation", `{"x":1}`, "moderation", `{"x":1}`},
	{"service_tier", `"flex"`, "service_tier", `"flex"`},
	{"parallel_tool_calls", `false`, "parallel_tool_calls", `false`},
	{"max_output_tokens", `64`, "max_completion_tokens", `64`},
	{"text", `{"format":{"type":"json_schema","name":"out","schema":{"type":"object"},"strict":true},"verbosity":"low"}`,
		"response_format", `{"json_schema":{"name":"out","schema":{"type":"object"},"strict":true},"type":"json_schema"}`},
	{"reasoning", `{"effort":"high","summary":"auto"}`, "reasoning_effort", `"high"`},
	{"tools", `[{"type":"function","name":"f","description":"d","parameters":{"type":"object"},"strict":true}]`,
		"tools", `[{"type":"function","function":{"name":"f","description":"d","parameters":{"type":"object"},"strict":true}}]`},
	{"tool_choice", `{"type":"function","name":"f"}`, "tool_choice", `{"function":{"name":"f"},"type":"function"}`},
	{"truncation", `"disabled"`, "", "kept-out"},
	{"store", `false`, "", "kept-out"},
	{"include", `[]`, "", "kept-out"},
	{"top_k", `40`, "top_k", `40`}, // a vendor extra
	{"previous_response_id", `"resp_1"`, "", ""},
	{"conversation", `"conv_1"`, "", ""},
	{"background", `true`, "", ""},
	{"prompt", `{"id":"pmpt_1"}`, "", ""},
	{"max_tool_calls", `3`, "", ""},
	{"context_management", `[{"type":"compaction"}]`, "", ""},
}

func TestResponsesToChatFidelity(t *testing.T) {
	props, err := oaispec.Properties("CreateResponse")
	if err != nil {
		t.Fatal(err)
	}
	covered := map[string]bool{}
	for _, f := range responsesFidelity {
		covered[f.field] = true
	}
	for _, p := range props {
		if !covered[p] {
			t.Errorf("CreateResponse field %q has no row: decide keep, rename or refuse", p)
		}
	}
	for _, f := range responsesFidelity {
		t.Run(f.field, func(t *testing.T) {
			body := map[string]json.RawMessage{"model": json.RawMessage(`"m"`), "input": json.RawMessage(`"hi"`)}
			body[f.field] = json.RawMessage(f.value)
			b, _ := json.Marshal(body)
			out, e := ResponsesToChat(b)
			if f.to == "" && f.want == "" {
				if e == nil || e.Status != 400 || e.Param != f.field {
					t.Fatalf("want a 400 naming %s, got %v %s", f.field, e, out)
				}
				return
			}
			if e != nil {
				t.Fatalf("refused: %s", e.Message)
			}
			var got map[string]any
			_ = json.Unmarshal(out, &got)
			if f.to == "" {
				if _, ok := got[f.field]; ok {
					t.Fatalf("%s sent to a Chat upstream: %s", f.field, out)
				}
				return
			}
			var want any
			_ = json.Unmarshal([]byte(f.want), &want)
			if diff := cmp.Diff(want, got[f.to]); diff != "" {
				t.Fatalf("%s (-want +got):\n%s\nbody %s", f.to, diff, out)
			}
		})
	}
}

func TestResponsesToChatInputItems(t *testing.T) {
	body := `{"model":"m","input":[
		{"role":"user","content":[{"type":"input_text","text":"look"},{"type":"input_image","image_url":"data:image/png;base64,AA==","detail":"high"},{"type":"input_file","file_data":"data:application/pdf;base64,AA==","filename":"a.pdf"}]},
		{"type":"reasoning","id":"rs_1","summary":[]},
		{"type":"function_call","call_id":"c1","name":"f","arguments":"{}"},
		{"type":"function_call","call_id":"c2","name":"g","arguments":"{}"},
		{"type":"function_call_output","call_id":"c1","output":"42"},
		{"role":"assistant","content":[{"type":"output_text","text":"ok"}]}]}`
	out, e := ResponsesToChat([]byte(body))
	if e != nil {
		t.Fatal(e.Message)
	}
	var got struct {
		Messages []map[string]any `json:"messages"`
	}
	_ = json.Unmarshal(out, &got)
	want := `[{"role":"user","content":[{"type":"text","text":"look"},{"type":"image_url","image_url":{"url":"data:image/png;base64,AA==","detail":"high"}},{"type":"file","file":{"file_data":"data:application/pdf;base64,AA==","filename":"a.pdf"}}]},
		{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}},{"id":"c2","type":"function","function":{"name":"g","arguments":"{}"}}]},
		{"role":"tool","tool_call_id":"c1","content":"42"},
		{"role":"assistant","content":[{"type":"text","text":"ok"}]}]`
	var w []map[string]any
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(w, got.Messages); diff != "" {
		t.Fatalf("messages (-want +got):\n%s", diff)
	}
	if _, e := ResponsesToChat([]byte(`{"model":"m","input":[{"type":"computer_call_output","call_id":"x"}]}`)); e == nil || e.Param != "input[0].type" {
		t.Fatalf("computer_call_output: %v", e)
	}
	if _, e := ResponsesToChat([]byte(`{"model":"m","input":"hi","tools":[{"type":"web_search"}]}`)); e == nil || e.Param != "tools" {
		t.Fatalf("server tools: %v", e)
	}
}
