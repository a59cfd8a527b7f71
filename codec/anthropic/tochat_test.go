package anthropic

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/iopgw/iop/execution"
)

// TestToChat: every field a Messages request can carry that Chat can
// express arrives in its Chat form.
func TestToChat(t *testing.T) {
	in := `{"model":"m","max_tokens":64,"stream":true,"temperature":0.5,"top_p":0.9,"top_k":40,"stop_sequences":["END"],
	"metadata":{"user_id":"u-1"},
	"system":[{"type":"text","text":"be brief","cache_control":{"type":"ephemeral"}}],
	"tools":[{"name":"weather","description":"the weather","input_schema":{"type":"object","properties":{"city":{"type":"string"}}}}],
	"tool_choice":{"type":"any","disable_parallel_tool_use":true},
	"messages":[
	 {"role":"user","content":[{"type":"text","text":"look"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AAAA"}}]},
	 {"role":"assistant","content":[{"type":"text","text":"calling"},{"type":"tool_use","id":"toolu_1","name":"weather","input":{"city":"Paris"}}]},
	 {"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"sunny"},{"type":"text","text":"and?"}]}]}`
	out, e := ToChat([]byte(in))
	if e != nil {
		t.Fatal(e)
	}
	var got map[string]any
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"model": "m", "max_tokens": 64.0, "stream": true, "stream_options": map[string]any{"include_usage": true},
		"temperature": 0.5, "top_p": 0.9, "top_k": 40.0, "stop": []any{"END"}, "user": "u-1",
		"tools": []any{map[string]any{"type": "function", "function": map[string]any{"name": "weather", "description": "the weather",
			"parameters": map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}}}}},
		"tool_choice": "required", "parallel_tool_calls": false,
		"messages": []any{
			map[string]any{"role": "system", "content": []any{map[string]any{"type": "text", "text": "be brief"}}},
			map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": "look"},
				map[string]any{"type": "image_url", "image_url": map[string]any{"url": "data:image/png;base64,AAAA"}}}},
			map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "text", "text": "calling"}},
				"tool_calls": []any{map[string]any{"id": "toolu_1", "type": "function", "function": map[string]any{"name": "weather", "arguments": `{"city":"Paris"}`}}}},
			map[string]any{"role": "tool", "tool_call_id": "toolu_1", "content": "sunny"},
			map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": "and?"}}},
		},
	}
	if !reflect.DeepEqual(got, want) {
		g, _ := json.MarshalIndent(got, "", " ")
		t.Fatalf("got\n%s", g)
	}
	for choice, want := range map[string]any{`{"type":"auto"}`: "auto", `{"type":"none"}`: "none",
		`{"type":"tool","name":"weather"}`: map[string]any{"type": "function", "function": map[string]any{"name": "weather"}}} {
		out, e := ToChat([]byte(`{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"hi"}],"tool_choice":` + choice + `}`))
		if e != nil {
			t.Fatal(e)
		}
		var got map[string]any
		_ = json.Unmarshal(out, &got)
		if !reflect.DeepEqual(got["tool_choice"], want) {
			t.Errorf("tool_choice %s became %v", choice, got["tool_choice"])
		}
	}
}

// TestToChatRefuses: what Chat cannot express is a 400 naming the field,
// never dropped.
func TestToChatRefuses(t *testing.T) {
	msg := func(content string) string {
		return `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":` + content + `}]}`
	}
	for body, field := range map[string]string{
		`{"model":"m","max_tokens":1,"thinking":{"type":"enabled","budget_tokens":1024},"messages":[{"role":"user","content":"hi"}]}`:                  "thinking",
		`{"model":"m","max_tokens":1,"service_tier":"auto","messages":[{"role":"user","content":"hi"}]}`:                                               "service_tier",
		`{"model":"m","max_tokens":1,"metadata":{"tenant":"x"},"messages":[{"role":"user","content":"hi"}]}`:                                           "metadata.tenant",
		`{"model":"m","max_tokens":1,"tools":[{"type":"web_search_20250305","name":"web_search"}],"messages":[{"role":"user","content":"hi"}]}`:        "tools.0.type",
		`{"model":"m","max_tokens":1,"messages":[{"role":"user","content":[{"type":"document","source":{}}]}]}`:                                        "messages.0.content.0.type",
		`{"model":"m","max_tokens":1,"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"x","is_error":true}]}]}`: "messages.0.content.0.is_error",
		`{"model":"m","max_tokens":1,"messages":[{"role":"user","content":[{"type":"text","text":"x","citations":[]}]}]}`:                              "messages.0.content.0.citations",
		msg(`[{"type":"document","source":{}}]`): "messages.1.content.0.type",
	} {
		_, e := ToChat([]byte(body))
		if e == nil || e.Status != 400 || !strings.HasPrefix(e.Message, field+":") {
			t.Errorf("%s: %v, want a 400 naming %s", body, e, field)
		}
	}
}

// TestStreamRendersEveryKind: thinking, text and a streamed tool call
// render as Anthropic's block sequence, the tool input as
// input_json_delta fragments, the stop reason and usage at the end.
func TestStreamRendersEveryKind(t *testing.T) {
	s := NewStream("msg_1", "m")
	var out []byte
	for _, ev := range []execution.RunEvent{
		{Type: execution.EventTypeStart, Usage: &execution.TokenUsage{PromptTokens: 9}},
		{Type: execution.EventTypeDelta, Reasoning: "hmm"},
		{Type: execution.EventTypeDelta, Delta: "Let me check."},
		{Type: execution.EventTypeDelta, ToolCalls: []execution.ToolCallDelta{{Index: 0, ID: "call_1", Name: "weather", Arguments: `{"ci`}}},
		{Type: execution.EventTypeDelta, ToolCalls: []execution.ToolCallDelta{{Index: 0, Arguments: `ty":"Paris"}`}}},
		{Type: execution.EventTypeComplete, FinishReason: "tool_calls", Usage: &execution.TokenUsage{PromptTokens: 9, CompletionTokens: 5}},
	} {
		out = s.Append(out, ev)
	}
	var names []string
	for _, line := range strings.Split(string(out), "\n") {
		if n, ok := strings.CutPrefix(line, "event: "); ok {
			names = append(names, n)
		}
	}
	want := "message_start content_block_start ping content_block_delta content_block_stop content_block_start content_block_delta content_block_stop " +
		"content_block_start content_block_delta content_block_delta content_block_stop message_delta message_stop"
	if strings.Join(names, " ") != want {
		t.Fatalf("events %v", names)
	}
	for _, frag := range []string{`{"thinking":"hmm","type":"thinking_delta"}`, `"content_block":{"id":"call_1","input":{},"name":"weather","type":"tool_use"}`,
		`"partial_json":"{\"ci"`, `"stop_reason":"tool_use"`, `"usage":{"input_tokens":9,"output_tokens":5}`} {
		if !strings.Contains(string(out), frag) {
			t.Errorf("stream lacks %s:\n%s", frag, out)
		}
	}
	a := NewAccumulator("msg_1", "m")
	for _, ev := range []execution.RunEvent{
		{Type: execution.EventTypeDelta, Delta: "ok"},
		{Type: execution.EventTypeDelta, ToolCalls: []execution.ToolCallDelta{{Index: 0, ID: "call_1", Name: "weather", Arguments: `{"city":`}}},
		{Type: execution.EventTypeDelta, ToolCalls: []execution.ToolCallDelta{{Index: 0, Arguments: `"Paris"}`}}},
		{Type: execution.EventTypeComplete, FinishReason: "tool_calls"},
	} {
		a.Add(ev)
	}
	if b := string(a.Body()); !strings.Contains(b, `{"id":"call_1","input":{"city":"Paris"},"name":"weather","type":"tool_use"}`) || !strings.Contains(b, `"stop_reason":"tool_use"`) {
		t.Fatalf("body %s", b)
	}
}

// TestToChatLeavesEarlierThinking: an earlier turn's thinking blocks (as
// iop renders an upstream's reasoning) stay out of the Chat history, as
// the Messages API leaves them out of the context; the turn's text and
// tool calls go on.
func TestToChatLeavesEarlierThinking(t *testing.T) {
	out, e := ToChat([]byte(`{"model":"m","max_tokens":9,"messages":[{"role":"user","content":"hi"},
	 {"role":"assistant","content":[{"type":"thinking","thinking":"hm","signature":""},{"type":"redacted_thinking","data":"x"},{"type":"text","text":"hello"}]},
	 {"role":"user","content":"again"}]}`))
	if e != nil {
		t.Fatal(e)
	}
	if s := string(out); strings.Contains(s, "hm") || !strings.Contains(s, `{"content":[{"text":"hello","type":"text"}],"role":"assistant"}`) {
		t.Fatalf("chat %s", s)
	}
}
