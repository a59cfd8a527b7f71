package ollama

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// ToChat translates an Ollama /api/chat (generate=false) or /api/generate
// request into the OpenAI Chat Completions body an OpenAI-compatible
// upstream answers. Fields and options with a Chat (or common vendor)
// equivalent are mapped; the model-loading options that do not change the
// answer are not sent (listed in ignoredOptions, documented); anything
// else is refused with a 400 naming it — never dropped:
//
//   - messages (images → image_url parts, tool_calls, tool results),
//     prompt/system/images (generate) → messages
//   - format "json" → response_format json_object; a schema → json_schema
//   - options temperature, top_p, top_k, min_p, seed, stop, num_predict
//     (→ max_tokens), presence_penalty, frequency_penalty, repeat_penalty
//     (→ repetition_penalty, the vLLM/llama.cpp name)
//   - think: a level → reasoning_effort; true/false →
//     chat_template_kwargs.enable_thinking
//   - tools → tools (the same function shape)
func ToChat(body []byte, generate bool) ([]byte, *Error) {
	var in map[string]json.RawMessage
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, BadRequest("invalid JSON: %v", err)
	}
	out := map[string]any{}
	var msgs []map[string]any
	for k, v := range in {
		if string(v) == "null" {
			continue
		}
		var e *Error
		switch k {
		case "model", "stream", "keep_alive":
			if k != "keep_alive" {
				out[k] = v
			}
		case "messages":
			if generate {
				return nil, refusedField(k)
			}
			msgs, e = chatMessages(v)
		case "prompt", "system", "images":
			if !generate {
				return nil, refusedField(k)
			}
		case "format":
			e = formatToChat(v, out)
		case "options":
			e = optionsToChat(v, out)
		case "think":
			e = thinkToChat(v, out)
		case "tools":
			out["tools"] = v
		case "suffix", "template", "context", "raw":
			if s := string(v); s != `""` && s != "[]" && s != "false" {
				return nil, refusedField(k) // nothing in Chat does what they do
			}
		default:
			return nil, refusedField(k)
		}
		if e != nil {
			return nil, e
		}
	}
	if generate {
		msgs = generateMessages(in)
	}
	out["messages"] = msgs
	b, err := json.Marshal(out)
	if err != nil {
		return nil, BadRequest("the request could not be translated: %v", err)
	}
	return b, nil
}

func refusedField(k string) *Error {
	return BadRequest("%q cannot be used with this model: its provider has no equivalent", k)
}

// ignoredOptions load or run the model and do not change its answer; an
// OpenAI-compatible server sets them itself, so they are not sent.
var ignoredOptions = []string{"num_ctx", "num_batch", "num_gpu", "main_gpu", "low_vram", "f16_kv", "vocab_only", "use_mmap",
	"use_mlock", "num_thread", "numa", "num_keep"}

// optionNames maps Ollama options to their Chat (or vendor) names.
var optionNames = map[string]string{
	"temperature": "temperature", "top_p": "top_p", "top_k": "top_k", "min_p": "min_p", "seed": "seed", "stop": "stop",
	"num_predict": "max_tokens", "presence_penalty": "presence_penalty", "frequency_penalty": "frequency_penalty",
	"repeat_penalty": "repetition_penalty",
}

func optionsToChat(v json.RawMessage, out map[string]any) *Error {
	var opts map[string]json.RawMessage
	if json.Unmarshal(v, &opts) != nil {
		return BadRequest("options must be an object")
	}
	for k, x := range opts {
		switch name, ok := optionNames[k]; {
		case slices.Contains(ignoredOptions, k):
		case k == "num_predict" && strings.HasPrefix(string(x), "-"):
			// -1 (no limit) and -2 (fill the context): the server's default.
		case ok:
			out[name] = x
		default:
			return BadRequest("option %q cannot be used with this model: its provider is OpenAI-compatible and has no equivalent", k)
		}
	}
	return nil
}

func formatToChat(v json.RawMessage, out map[string]any) *Error {
	if string(v) == `""` {
		return nil
	}
	if string(v) == `"json"` {
		out["response_format"] = map[string]string{"type": "json_object"}
		return nil
	}
	if len(v) == 0 || v[0] != '{' {
		return BadRequest(`format must be "json" or a JSON schema`)
	}
	out["response_format"] = map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "response", "schema": v}}
	return nil
}

func thinkToChat(v json.RawMessage, out map[string]any) *Error {
	switch s := string(v); s {
	case "true", "false":
		out["chat_template_kwargs"] = map[string]bool{"enable_thinking": s == "true"}
	case `"low"`, `"medium"`, `"high"`:
		out["reasoning_effort"] = v
	default:
		return BadRequest(`think must be true, false, "low", "medium" or "high"`)
	}
	return nil
}

// chatMessages translates Ollama messages. Ollama's tool calls carry no
// id: each gets call_<n>, and a tool result answers the latest unanswered
// call of its tool_name. An assistant message's "thinking" is not sent: a
// Chat upstream takes no reasoning input.
func chatMessages(v json.RawMessage) ([]map[string]any, *Error) {
	var in []Message
	if json.Unmarshal(v, &in) != nil {
		return nil, BadRequest("messages must be an array of messages")
	}
	var out []map[string]any
	open := map[string][]string{} // tool name → unanswered call ids
	n := 0
	for _, m := range in {
		msg := map[string]any{"role": m.Role, "content": content(m.Content, m.Images)}
		if len(m.ToolCalls) > 0 {
			var calls []map[string]any
			for _, tc := range m.ToolCalls {
				id := fmt.Sprintf("call_%d", n)
				n++
				open[tc.Function.Name] = append(open[tc.Function.Name], id)
				args := string(tc.Function.Arguments)
				if args == "" {
					args = "{}"
				}
				calls = append(calls, map[string]any{"id": id, "type": "function", "function": map[string]string{"name": tc.Function.Name, "arguments": args}})
			}
			msg["tool_calls"] = calls
		}
		if m.Role == "tool" {
			ids := open[m.ToolName]
			id := "call_0"
			if len(ids) > 0 {
				id, open[m.ToolName] = ids[0], ids[1:]
			}
			msg["tool_call_id"] = id
		}
		out = append(out, msg)
	}
	return out, nil
}

// content is text, or text and image parts when there are images (Ollama
// sends raw base64).
func content(text string, images []string) any {
	if len(images) == 0 {
		return text
	}
	parts := []map[string]any{{"type": "text", "text": text}}
	for _, img := range images {
		if !strings.HasPrefix(img, "data:") && !strings.Contains(img, "://") {
			img = "data:image/png;base64," + img
		}
		parts = append(parts, map[string]any{"type": "image_url", "image_url": map[string]string{"url": img}})
	}
	return parts
}

// generateMessages builds the messages of a generate request.
func generateMessages(in map[string]json.RawMessage) []map[string]any {
	var system, prompt string
	var images []string
	_ = json.Unmarshal(in["system"], &system)
	_ = json.Unmarshal(in["prompt"], &prompt)
	_ = json.Unmarshal(in["images"], &images)
	var out []map[string]any
	if system != "" {
		out = append(out, map[string]any{"role": "system", "content": system})
	}
	return append(out, map[string]any{"role": "user", "content": content(prompt, images)})
}
