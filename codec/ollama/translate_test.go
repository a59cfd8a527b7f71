package ollama

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/iopgw/iop/internal/testing/oaispec"
)

func TestToChat(t *testing.T) {
	body := `{"model":"llama3.2","stream":false,"keep_alive":"5m","format":{"type":"object"},"think":false,"tools":[{"type":"function","function":{"name":"f"}}],
		"options":{"temperature":0.2,"num_predict":64,"num_ctx":8192,"repeat_penalty":1.1,"top_k":40},
		"messages":[{"role":"user","content":"look","images":["AAAA"]},{"role":"assistant","content":"","tool_calls":[{"function":{"name":"f","arguments":{"x":1}}}]},{"role":"tool","tool_name":"f","content":"42"}]}`
	out, e := ToChat([]byte(body), false)
	if e != nil {
		t.Fatal(e.Message)
	}
	var got map[string]any
	_ = json.Unmarshal(out, &got)
	want := map[string]any{
		"model": "llama3.2", "stream": false, "temperature": 0.2, "max_tokens": 64.0, "repetition_penalty": 1.1, "top_k": 40.0,
		"response_format":      map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "response", "schema": map[string]any{"type": "object"}}},
		"chat_template_kwargs": map[string]any{"enable_thinking": false},
		"tools":                []any{map[string]any{"type": "function", "function": map[string]any{"name": "f"}}},
		"messages": []any{
			map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": "look"}, map[string]any{"type": "image_url", "image_url": map[string]any{"url": "data:image/png;base64,AAAA"}}}},
			map[string]any{"role": "assistant", "content": "", "tool_calls": []any{map[string]any{"id": "call_0", "type": "function", "function": map[string]any{"name": "f", "arguments": `{"x":1}`}}}},
			map[string]any{"role": "tool", "content": "42", "tool_call_id": "call_0"},
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
	gen, e := ToChat([]byte(`{"model":"m","prompt":"hi","system":"sys","format":"json"}`), true)
	if e != nil || string(gen) != `{"messages":[{"content":"sys","role":"system"},{"content":"hi","role":"user"}],"model":"m","response_format":{"type":"json_object"}}` {
		t.Fatalf("generate: %s %v", gen, e)
	}
	for _, bad := range []string{`{"model":"m","messages":[],"options":{"mirostat":2}}`, `{"model":"m","messages":[],"template":"x"}`} {
		if _, e := ToChat([]byte(bad), false); e == nil || e.Status != 400 {
			t.Errorf("%s: want a 400, got %v", bad, e)
		}
	}
}

func TestChatRefusalAndOptions(t *testing.T) {
	tests := map[string]string{
		`{"model":"m","messages":[],"user":"u","metadata":{},"store":true,"temperature":1}`: "",
		`{"model":"m","messages":[],"logit_bias":{"1":2}}`:                                  "logit_bias",
		`{"model":"m","messages":[],"n":2}`:                                                 "n",
		`{"model":"m","messages":[],"tool_choice":"required"}`:                              "tool_choice",
		`{"model":"m","messages":[],"chat_template_kwargs":{}}`:                             "chat_template_kwargs",
		`{"model":"m","messages":[],"logprobs":false,"modalities":["text"]}`:                "",
	}
	for body, want := range tests {
		if got := ChatRefusal([]byte(body)); got != want {
			t.Errorf("%s: refusal %q, want %q", body, got, want)
		}
	}
	opts, think := ChatOptions([]byte(`{"frequency_penalty":0.5,"repetition_penalty":1.2,"reasoning_effort":"high"}`))
	if string(opts["frequency_penalty"]) != "0.5" || string(opts["repeat_penalty"]) != "1.2" || string(think) != `"high"` {
		t.Fatalf("options %v think %s", opts, think)
	}
}

// TestChatFieldsForOllamaAreClassified walks every field of OpenAI's Chat
// request schema: each is mapped, not applicable, or refused for an
// Ollama-native upstream — none is dropped without a decision.
func TestChatFieldsForOllamaAreClassified(t *testing.T) {
	props, err := oaispec.Properties("CreateChatCompletionRequest")
	if err != nil {
		t.Fatal(err)
	}
	refused := []string{"audio", "function_call", "functions", "logit_bias", "prediction", "top_logprobs", "verbosity", "web_search_options"}
	for _, p := range props {
		mapped, na, ref := slices.Contains(chatMapped, p), slices.Contains(chatNotApplicable, p), slices.Contains(refused, p)
		if !mapped && !na && !ref {
			t.Errorf("Chat field %q is not classified for Ollama", p)
		}
		if ref {
			if got := ChatRefusal([]byte(`{"model":"m","messages":[],"` + p + `":{"x":1}}`)); got != p {
				t.Errorf("%s: refusal %q", p, got)
			}
		}
		if na {
			if got := ChatRefusal([]byte(`{"model":"m","messages":[],"` + p + `":"x"}`)); got != "" {
				t.Errorf("%s is not applicable but refused", p)
			}
		}
	}
}

// TestGenerateFieldsNothingElseCarries: a generate request's suffix,
// template, context and raw have no equivalent in Chat or in the neutral
// form; set, each is refused (ToChat) and named as lost (Decode), and at
// their empty values, which clients send by default, each is nothing.
func TestGenerateFieldsNothingElseCarries(t *testing.T) {
	for field, value := range map[string]string{"suffix": `"return x"`, "template": `"{{ .Prompt }}"`, "context": `[1,2]`, "raw": `true`} {
		body := `{"model":"m","prompt":"def f(","` + field + `":` + value + `}`
		if _, e := ToChat([]byte(body), true); e == nil || !strings.Contains(e.Message, `"`+field+`"`) {
			t.Errorf("%s: ToChat %v", body, e)
		}
		r, e := Decode([]byte(body), true, 64)
		if e != nil || r.Lost != field || r.Refusal() == nil {
			t.Errorf("%s: Decode %+v %v", body, r, e)
		}
	}
	empty := `{"model":"m","prompt":"hi","suffix":"","template":"","context":[],"raw":false}`
	if _, e := ToChat([]byte(empty), true); e != nil {
		t.Errorf("empty values: ToChat %v", e)
	}
	if r, e := Decode([]byte(empty), true, 64); e != nil || r.Lost != "" || r.Refusal() != nil {
		t.Errorf("empty values: Decode %+v %v", r, e)
	}
}
