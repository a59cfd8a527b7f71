package anthropic

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
)

// ToChat translates a Messages request into an OpenAI Chat Completions
// request, losslessly, for a model whose providers serve Chat only: the
// system prompt, text, images, tool use and tool results, tools and
// tool_choice, stop sequences, max_tokens, temperature, top_p, top_k
// (passed for the upstreams that take it: vLLM, llama.cpp) and
// metadata.user_id. A field or block Chat cannot express (thinking,
// documents, server tools, a tool result's is_error, …) is a 400 naming
// it — never dropped. Left behind: cache_control, a caching hint that
// does not change the answer, and earlier turns' thinking blocks, which
// the Messages API itself removes from the model's context.
func ToChat(body []byte) ([]byte, *Error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil {
		return nil, New(http.StatusBadRequest, fmt.Sprintf("The request body is not a valid Messages request: %v.", err))
	}
	t := &translation{out: map[string]any{}}
	if sys := top["system"]; !isNull(sys) { // before the messages it precedes
		if err := t.systemPrompt(bytes.TrimSpace(sys)); err != nil {
			return nil, err
		}
	}
	delete(top, "system")
	for _, k := range sortedKeys(top) {
		if err := t.field(k, top[k]); err != nil {
			return nil, err
		}
	}
	if t.stream {
		t.out["stream_options"] = map[string]bool{"include_usage": true} // usage reaches message_delta
	}
	out, err := json.Marshal(t.out)
	if err != nil {
		return nil, New(http.StatusBadRequest, err.Error())
	}
	return out, nil
}

type translation struct {
	out    map[string]any
	stream bool
	system []any
}

// passed are the fields that mean the same in both APIs.
var passed = map[string]string{"model": "model", "max_tokens": "max_tokens", "temperature": "temperature", "top_p": "top_p",
	"top_k": "top_k", "stop_sequences": "stop", "stream": "stream"}

func (t *translation) field(k string, v json.RawMessage) *Error {
	if isNull(v) {
		return nil
	}
	if to, ok := passed[k]; ok {
		t.out[to] = v
		if k == "stream" {
			_ = json.Unmarshal(v, &t.stream)
		}
		return nil
	}
	switch k {
	case "messages":
		return t.messages(v)
	case "metadata":
		return t.metadata(v)
	case "tools":
		return t.tools(v)
	case "tool_choice":
		return t.toolChoice(v)
	case "thinking":
		var th struct {
			Type string `json:"type"`
		}
		if json.Unmarshal(v, &th) == nil && th.Type == "disabled" {
			return nil
		}
	}
	return inexpressible(k)
}

// inexpressible is the 400 for a field Chat has no equivalent of.
func inexpressible(field string) *Error {
	return New(http.StatusBadRequest, fmt.Sprintf("%s: cannot be used with this model: its providers serve the OpenAI Chat API only, which has no equivalent (iop translates Messages requests losslessly or not at all). Use a model whose provider serves the messages surface.", field))
}

func (t *translation) systemPrompt(v json.RawMessage) *Error {
	if v[0] == '"' {
		t.system = []any{map[string]any{"role": "system", "content": v}}
		return nil
	}
	parts, err := textParts(v, "system")
	if err != nil {
		return err
	}
	t.system = []any{map[string]any{"role": "system", "content": parts}}
	return nil
}

func (t *translation) metadata(v json.RawMessage) *Error {
	var md map[string]json.RawMessage
	if json.Unmarshal(v, &md) != nil {
		return New(http.StatusBadRequest, "metadata: Input should be a valid dictionary")
	}
	for k, val := range md {
		if k != "user_id" {
			return inexpressible("metadata." + k)
		}
		if !isNull(val) {
			t.out["user"] = val
		}
	}
	return nil
}

func (t *translation) tools(v json.RawMessage) *Error {
	var tools []map[string]json.RawMessage
	if json.Unmarshal(v, &tools) != nil {
		return New(http.StatusBadRequest, "tools: Input should be a valid list")
	}
	out := make([]any, 0, len(tools))
	for i, tool := range tools {
		field := fmt.Sprintf("tools.%d", i)
		fn := map[string]json.RawMessage{}
		for _, k := range sortedKeys(tool) {
			switch val := tool[k]; k {
			case "name", "description":
				fn[k] = val
			case "input_schema":
				fn["parameters"] = val
			case "cache_control":
			case "type":
				var typ string
				if json.Unmarshal(val, &typ) != nil || typ != "custom" {
					return inexpressible(field + ".type") // a server tool runs at Anthropic
				}
			default:
				return inexpressible(field + "." + k)
			}
		}
		out = append(out, map[string]any{"type": "function", "function": fn})
	}
	t.out["tools"] = out
	return nil
}

func (t *translation) toolChoice(v json.RawMessage) *Error {
	var tc struct {
		Type                   string `json:"type"`
		Name                   string `json:"name"`
		DisableParallelToolUse *bool  `json:"disable_parallel_tool_use"`
	}
	if json.Unmarshal(v, &tc) != nil {
		return New(http.StatusBadRequest, "tool_choice: Input should be a valid dictionary")
	}
	switch tc.Type {
	case "auto":
		t.out["tool_choice"] = "auto"
	case "any":
		t.out["tool_choice"] = "required"
	case "none":
		t.out["tool_choice"] = "none"
	case "tool":
		t.out["tool_choice"] = map[string]any{"type": "function", "function": map[string]string{"name": tc.Name}}
	default:
		return inexpressible("tool_choice.type")
	}
	if tc.DisableParallelToolUse != nil && *tc.DisableParallelToolUse {
		t.out["parallel_tool_calls"] = false
	}
	return nil
}

func (t *translation) messages(v json.RawMessage) *Error {
	var msgs []messageWire
	if json.Unmarshal(v, &msgs) != nil {
		return New(http.StatusBadRequest, "messages: Input should be a valid list")
	}
	out := slices.Clone(t.system)
	for i, m := range msgs {
		field := fmt.Sprintf("messages.%d", i)
		if m.Role != "user" && m.Role != "assistant" {
			return New(http.StatusBadRequest, field+".role: Input should be 'user' or 'assistant'")
		}
		raw := bytes.TrimSpace(m.Content)
		if len(raw) > 0 && raw[0] == '"' {
			out = append(out, map[string]any{"role": m.Role, "content": json.RawMessage(raw)})
			continue
		}
		var blocks []map[string]json.RawMessage
		if json.Unmarshal(raw, &blocks) != nil {
			return New(http.StatusBadRequest, field+".content: Input should be a valid string or a list of content blocks")
		}
		var err *Error
		if m.Role == "assistant" {
			out, err = assistant(out, blocks, field)
		} else {
			out, err = user(out, blocks, field)
		}
		if err != nil {
			return err
		}
	}
	t.out["messages"] = out
	return nil
}

// user maps a user message: its tool results become tool messages (which
// Chat puts before the rest of the turn, as the Messages API requires
// them first), its text and images one user message.
func user(out []any, blocks []map[string]json.RawMessage, field string) ([]any, *Error) {
	var parts []any
	for j, b := range blocks {
		bf := fmt.Sprintf("%s.content.%d", field, j)
		var err *Error
		switch blockType(b) {
		case "text", "image":
			parts, err = appendPart(parts, b, bf)
		case "tool_result":
			var m any
			if m, err = toolResult(b, bf); err == nil {
				out = append(out, m)
			}
		default:
			err = inexpressible(bf + ".type")
		}
		if err != nil {
			return nil, err
		}
	}
	if len(parts) > 0 {
		out = append(out, map[string]any{"role": "user", "content": parts})
	}
	return out, nil
}

// appendPart appends the Chat part of a text or image block.
func appendPart(parts []any, b map[string]json.RawMessage, field string) ([]any, *Error) {
	part := textPart
	if blockType(b) == "image" {
		part = imagePart
	}
	p, err := part(b, field)
	if err != nil {
		return nil, err
	}
	return append(parts, p), nil
}

// assistant maps an assistant turn: its text as content, its tool_use
// blocks as tool calls (the input's bytes as the arguments); its
// thinking blocks stay behind, as the Messages API drops them from the
// context of later turns.
func assistant(out []any, blocks []map[string]json.RawMessage, field string) ([]any, *Error) {
	var parts, calls []any
	for j, b := range blocks {
		bf := fmt.Sprintf("%s.content.%d", field, j)
		var err *Error
		switch blockType(b) {
		case "text":
			parts, err = appendPart(parts, b, bf)
		case "tool_use":
			var call any
			if call, err = toolCall(b, bf); err == nil {
				calls = append(calls, call)
			}
		case "thinking", "redacted_thinking":
			// An earlier turn's thinking, as iop rendered it from the
			// upstream's reasoning (or Anthropic did): the Messages API
			// itself leaves it out of the model's context, and Chat has no
			// field for it.
		default:
			err = inexpressible(bf + ".type")
		}
		if err != nil {
			return nil, err
		}
	}
	m := map[string]any{"role": "assistant", "content": nil}
	if len(parts) > 0 {
		m["content"] = parts
	}
	if len(calls) > 0 {
		m["tool_calls"] = calls
	}
	return append(out, m), nil
}

// toolCall is the Chat tool call of a tool_use block.
func toolCall(b map[string]json.RawMessage, field string) (any, *Error) {
	var tu struct {
		ID    string          `json:"id"`
		Name  string          `json:"name"`
		Input json.RawMessage `json:"input"`
	}
	for k := range b {
		if k != "type" && k != "id" && k != "name" && k != "input" && k != "cache_control" {
			return nil, inexpressible(field + "." + k)
		}
	}
	if err := remarshal(b, &tu); err != nil || tu.Name == "" {
		return nil, New(http.StatusBadRequest, field+": a tool_use block needs an id, a name and an input")
	}
	args := tu.Input
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	return map[string]any{"id": tu.ID, "type": "function", "function": map[string]any{"name": tu.Name, "arguments": string(args)}}, nil
}

func toolResult(b map[string]json.RawMessage, field string) (any, *Error) {
	var tr struct {
		ToolUseID string          `json:"tool_use_id"`
		Content   json.RawMessage `json:"content"`
		IsError   *bool           `json:"is_error"`
	}
	for k := range b {
		if k != "type" && k != "tool_use_id" && k != "content" && k != "is_error" && k != "cache_control" {
			return nil, inexpressible(field + "." + k)
		}
	}
	if err := remarshal(b, &tr); err != nil || tr.ToolUseID == "" {
		return nil, New(http.StatusBadRequest, field+".tool_use_id: Field required")
	}
	if tr.IsError != nil && *tr.IsError {
		return nil, inexpressible(field + ".is_error")
	}
	m := map[string]any{"role": "tool", "tool_call_id": tr.ToolUseID, "content": ""}
	switch c := bytes.TrimSpace(tr.Content); {
	case len(c) == 0 || isNull(c):
	case c[0] == '"':
		m["content"] = json.RawMessage(c)
	default:
		parts, err := textParts(c, field+".content")
		if err != nil {
			return nil, err
		}
		m["content"] = parts
	}
	return m, nil
}

// textParts maps a list of text blocks to Chat text parts.
func textParts(v json.RawMessage, field string) ([]any, *Error) {
	var blocks []map[string]json.RawMessage
	if json.Unmarshal(v, &blocks) != nil {
		return nil, New(http.StatusBadRequest, field+": Input should be a valid string or a list of text blocks")
	}
	parts := make([]any, 0, len(blocks))
	for j, b := range blocks {
		bf := fmt.Sprintf("%s.%d", field, j)
		if blockType(b) != "text" {
			return nil, inexpressible(bf + ".type")
		}
		p, err := textPart(b, bf)
		if err != nil {
			return nil, err
		}
		parts = append(parts, p)
	}
	return parts, nil
}

func textPart(b map[string]json.RawMessage, field string) (any, *Error) {
	for k := range b {
		if k != "type" && k != "text" && k != "cache_control" {
			return nil, inexpressible(field + "." + k) // citations and the like
		}
	}
	return map[string]any{"type": "text", "text": b["text"]}, nil
}

func imagePart(b map[string]json.RawMessage, field string) (any, *Error) {
	var img struct {
		Source struct {
			Type      string `json:"type"`
			MediaType string `json:"media_type"`
			Data      string `json:"data"`
			URL       string `json:"url"`
		} `json:"source"`
	}
	for k := range b {
		if k != "type" && k != "source" && k != "cache_control" {
			return nil, inexpressible(field + "." + k)
		}
	}
	if remarshal(b, &img) != nil {
		return nil, New(http.StatusBadRequest, field+".source: Field required")
	}
	var url string
	switch img.Source.Type {
	case "base64":
		url = "data:" + img.Source.MediaType + ";base64," + img.Source.Data
	case "url":
		url = img.Source.URL
	default:
		return nil, inexpressible(field + ".source.type")
	}
	return map[string]any{"type": "image_url", "image_url": map[string]string{"url": url}}, nil
}

func blockType(b map[string]json.RawMessage) string {
	var s string
	_ = json.Unmarshal(b["type"], &s)
	return s
}

func remarshal(b map[string]json.RawMessage, v any) error {
	raw, err := json.Marshal(b)
	if err != nil {
		return err
	}
	return json.Unmarshal(raw, v)
}

func isNull(v json.RawMessage) bool {
	v = bytes.TrimSpace(v)
	return len(v) == 0 || string(v) == "null"
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
