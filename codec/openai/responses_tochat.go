package openai

import (
	"bytes"
	"encoding/json"
	"strings"
)

// ResponsesToChat translates a Responses API request body into the Chat
// Completions body an OpenAI-compatible upstream without /v1/responses
// answers. Every field is kept (renamed where Chat names it differently),
// fields Chat does not model pass through as extensions, and a field that
// cannot be expressed is refused with a 400 naming it — never dropped:
//
//   - kept: model, stream, temperature, top_p, metadata, user,
//     safety_identifier, prompt_cache_key, prompt_cache_options,
//     prompt_cache_retention, moderation, service_tier, parallel_tool_calls,
//     top_logprobs (with logprobs: true), stream_options, unknown fields
//   - renamed: instructions → a system message; input → messages;
//     max_output_tokens → max_completion_tokens; text.format →
//     response_format (json_schema nested under json_schema);
//     text.verbosity → verbosity; reasoning.effort → reasoning_effort;
//     function tools and tool_choice → Chat's nested function shape
//   - refused: previous_response_id, conversation, background, prompt,
//     context_management, include, truncation "auto", store true,
//     max_tool_calls, non-function
//     tools, tool_choice allowed_tools, input items other than messages,
//     function calls and their outputs and reasoning, image file ids
//
// reasoning.summary is a hint a Chat upstream has no field for; it is
// accepted and no summary is produced. Reasoning items passed back as
// input are accepted and not sent (Chat takes no reasoning input).
func ResponsesToChat(body []byte) ([]byte, *Error) {
	var in map[string]json.RawMessage
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, InvalidRequest("", "We could not parse the JSON body of your request: %v.", err)
	}
	out := map[string]json.RawMessage{}
	var msgs []json.RawMessage
	for k, v := range in {
		if len(nonNull(v)) == 0 {
			continue
		}
		if e := responsesField(k, v, out, &msgs); e != nil {
			return nil, e
		}
	}
	if raw, ok := in["input"]; ok {
		items, e := inputToMessages(raw)
		if e != nil {
			return nil, e
		}
		msgs = append(msgs, items...)
	}
	if len(msgs) == 0 {
		return nil, InvalidRequest("input", "Missing required parameter: 'input'.")
	}
	out["messages"], _ = json.Marshal(msgs)
	b, err := json.Marshal(out)
	if err != nil {
		return nil, InvalidRequest("", "The request could not be translated: %v.", err)
	}
	return b, nil
}

// responsesRefused are fields a Chat upstream cannot honour.
var responsesRefused = map[string]string{
	"previous_response_id": "needs a provider that serves the Responses API natively (state lives there)",
	"conversation":         "needs a provider that serves the Responses API natively (state lives there)",
	"background":           "background responses are not supported on this model's provider",
	"prompt":               "prompt templates need a provider that serves the Responses API natively",
	"max_tool_calls":       "has no equivalent on this model's provider",
	"context_management":   "needs a provider that serves the Responses API natively",
}

// responsesField translates one top-level field into out (the system
// message of instructions goes first in msgs).
func responsesField(k string, v json.RawMessage, out map[string]json.RawMessage, msgs *[]json.RawMessage) *Error {
	if why, ok := responsesRefused[k]; ok {
		if k == "background" && string(v) == "false" {
			return nil
		}
		return refuse(k, why)
	}
	switch k {
	case "input":
		// translated after the loop, behind the instructions
	case "instructions":
		var s string
		if json.Unmarshal(v, &s) != nil {
			return refuse(k, "must be a string to be sent to this model's provider")
		}
		m, _ := json.Marshal(map[string]string{"role": "system", "content": s})
		*msgs = append([]json.RawMessage{m}, *msgs...)
	case "max_output_tokens":
		out["max_completion_tokens"] = v
	case "top_logprobs":
		out["top_logprobs"], out["logprobs"] = v, json.RawMessage("true")
	case "include":
		if string(bytes.TrimSpace(v)) != "[]" {
			return refuse(k, "has no equivalent on this model's provider")
		}
	case "truncation":
		if string(v) != `"disabled"` {
			return refuse(k, `only "disabled" can be honoured on this model's provider`)
		}
	case "store":
		if string(v) != "false" {
			return refuse(k, "responses are not stored on this model's provider; send store: false")
		}
	case "text":
		return textToChat(v, out)
	case "reasoning":
		return reasoningToChat(v, out)
	case "tools":
		tools, server, e := convertTools(v, Limits{}.withDefaults())
		if e != nil {
			return e
		}
		if server {
			return refuse(k, "server-executed tools need a provider that serves the Responses API natively")
		}
		if tools != nil {
			out["tools"] = tools
		}
	case "tool_choice":
		var tc struct {
			Type string `json:"type"`
		}
		if json.Unmarshal(v, &tc) == nil && tc.Type == "allowed_tools" {
			return refuse(k, "allowed_tools has no equivalent on this model's provider")
		}
		out["tool_choice"] = convertToolChoice(v)
	default:
		out[k] = v // same name in Chat, or an extension the upstream may know
	}
	return nil
}

func refuse(param, why string) *Error {
	return InvalidRequest(param, "'%s' cannot be used with this model: it %s.", param, why)
}

// textToChat maps text.format and text.verbosity.
func textToChat(v json.RawMessage, out map[string]json.RawMessage) *Error {
	var t struct {
		Format    json.RawMessage `json:"format"`
		Verbosity json.RawMessage `json:"verbosity"`
	}
	if json.Unmarshal(v, &t) != nil {
		return InvalidRequest("text", "Invalid type for 'text': expected an object.")
	}
	if len(nonNull(t.Verbosity)) > 0 {
		out["verbosity"] = t.Verbosity
	}
	if len(nonNull(t.Format)) == 0 {
		return nil
	}
	var f map[string]json.RawMessage
	if json.Unmarshal(t.Format, &f) != nil {
		return InvalidRequest("text.format", "Invalid type for 'text.format': expected an object.")
	}
	var typ string
	_ = json.Unmarshal(f["type"], &typ)
	switch typ {
	case "text":
	case "json_object":
		out["response_format"] = json.RawMessage(`{"type":"json_object"}`)
	case "json_schema":
		schema := map[string]json.RawMessage{}
		for k, x := range f {
			if k != "type" {
				schema[k] = x
			}
		}
		rf, _ := json.Marshal(map[string]any{"type": "json_schema", "json_schema": schema})
		out["response_format"] = rf
	default:
		return refuse("text.format", "has a format type this model's provider does not know")
	}
	return nil
}

// reasoningToChat maps reasoning.effort; summary is a hint (see
// ResponsesToChat).
func reasoningToChat(v json.RawMessage, out map[string]json.RawMessage) *Error {
	var r map[string]json.RawMessage
	if json.Unmarshal(v, &r) != nil {
		return InvalidRequest("reasoning", "Invalid type for 'reasoning': expected an object.")
	}
	for k, x := range r {
		switch k {
		case "effort":
			if len(nonNull(x)) > 0 {
				out["reasoning_effort"] = x
			}
		case "summary", "generate_summary":
		default:
			return refuse("reasoning."+k, "has no equivalent on this model's provider")
		}
	}
	return nil
}

// inputToMessages translates input (a string or a list of items) into
// Chat messages.
func inputToMessages(raw json.RawMessage) ([]json.RawMessage, *Error) {
	raw = nonNull(raw)
	if len(raw) > 0 && raw[0] == '"' {
		var s string
		_ = json.Unmarshal(raw, &s)
		m, _ := json.Marshal(map[string]string{"role": "user", "content": s})
		return []json.RawMessage{m}, nil
	}
	var items []map[string]json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, InvalidRequest("input", "Invalid type for 'input': expected a string or an array of input items.")
	}
	var out []json.RawMessage
	for i, it := range items {
		m, e := itemToMessage(it, "input["+itoa(i)+"]")
		if e != nil {
			return nil, e
		}
		if m != nil {
			out = append(out, m)
		}
	}
	return mergeToolCalls(out), nil
}

func str(raw json.RawMessage) string {
	var s string
	_ = json.Unmarshal(raw, &s)
	return s
}

// itemToMessage translates one input item (nil for a reasoning item).
func itemToMessage(it map[string]json.RawMessage, param string) (json.RawMessage, *Error) {
	switch typ := str(it["type"]); typ {
	case "", "message":
		return messageItem(it, param)
	case "function_call":
		call := map[string]any{"id": str(it["call_id"]), "type": "function",
			"function": map[string]string{"name": str(it["name"]), "arguments": str(it["arguments"])}}
		m, _ := json.Marshal(map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{call}})
		return m, nil
	case "function_call_output":
		out := it["output"]
		content := json.RawMessage(out)
		if len(out) > 0 && out[0] != '"' && out[0] != '[' {
			content, _ = json.Marshal(string(out))
		}
		m, _ := json.Marshal(map[string]any{"role": "tool", "tool_call_id": str(it["call_id"]), "content": content})
		return m, nil
	case "reasoning":
		return nil, nil
	default:
		return nil, refuse(param+".type", "is an input item ("+clip(typ, 64)+") that needs a provider serving the Responses API natively")
	}
}

// messageItem translates a message item and its content parts.
func messageItem(it map[string]json.RawMessage, param string) (json.RawMessage, *Error) {
	role := str(it["role"])
	if !roles[role] {
		return nil, InvalidRequest(param+".role", "Invalid value for 'role'.")
	}
	content := nonNull(it["content"])
	if len(content) == 0 {
		return nil, InvalidRequest(param+".content", "Missing required parameter: '%s.content'.", param)
	}
	if content[0] != '"' {
		parts, e := partsToChat(content, param+".content")
		if e != nil {
			return nil, e
		}
		content = parts
	}
	m, _ := json.Marshal(map[string]json.RawMessage{"role": json.RawMessage(`"` + role + `"`), "content": content})
	return m, nil
}

// partsToChat translates Responses content parts into Chat's.
func partsToChat(raw json.RawMessage, param string) (json.RawMessage, *Error) {
	var parts []map[string]json.RawMessage
	if err := json.Unmarshal(raw, &parts); err != nil {
		return nil, InvalidRequest(param, "Invalid type for '%s'.", param)
	}
	out := make([]any, 0, len(parts))
	for j, p := range parts {
		pp := param + "[" + itoa(j) + "]"
		switch typ := str(p["type"]); typ {
		case "input_text", "output_text", "text":
			out = append(out, map[string]any{"type": "text", "text": str(p["text"])})
		case "refusal":
			out = append(out, map[string]any{"type": "text", "text": str(p["refusal"])})
		case "input_image":
			if len(nonNull(p["file_id"])) > 0 {
				return nil, refuse(pp+".file_id", "is a file id only a provider serving the Responses API natively can resolve")
			}
			img := map[string]json.RawMessage{"url": p["image_url"]}
			if d := nonNull(p["detail"]); len(d) > 0 {
				img["detail"] = d
			}
			out = append(out, map[string]any{"type": "image_url", "image_url": img})
		case "input_file":
			if len(nonNull(p["file_url"])) > 0 {
				return nil, refuse(pp+".file_url", "has no equivalent on this model's provider (send file_data)")
			}
			file := map[string]json.RawMessage{}
			for _, k := range []string{"file_data", "file_id", "filename"} {
				if v := nonNull(p[k]); len(v) > 0 {
					file[k] = v
				}
			}
			out = append(out, map[string]any{"type": "file", "file": file})
		case "input_audio":
			out = append(out, map[string]any{"type": "input_audio", "input_audio": p["input_audio"]})
		default:
			return nil, refuse(pp+".type", "is a content part type ("+clip(typ, 64)+") this model's provider does not know")
		}
	}
	b, _ := json.Marshal(out)
	return b, nil
}

// mergeToolCalls joins consecutive assistant tool-call messages (one per
// function_call item in Responses) into one, as Chat expects.
func mergeToolCalls(msgs []json.RawMessage) []json.RawMessage {
	type call struct {
		Role      string            `json:"role"`
		Content   json.RawMessage   `json:"content"`
		ToolCalls []json.RawMessage `json:"tool_calls"`
	}
	var out []json.RawMessage
	var pending *call
	flush := func() {
		if pending != nil {
			b, _ := json.Marshal(map[string]any{"role": "assistant", "content": nil, "tool_calls": pending.ToolCalls})
			out = append(out, b)
			pending = nil
		}
	}
	for _, m := range msgs {
		var c call
		_ = json.Unmarshal(m, &c)
		if c.Role == "assistant" && len(c.ToolCalls) > 0 && strings.TrimSpace(string(c.Content)) == "null" {
			if pending == nil {
				pending = &call{}
			}
			pending.ToolCalls = append(pending.ToolCalls, c.ToolCalls...)
			continue
		}
		flush()
		out = append(out, m)
	}
	flush()
	return out
}
