package openai

import (
	"encoding/json"
	"errors"
	"strings"

	"github.com/iopgw/iop/execution"
)

// upstreamBody is the Chat Completions body sent upstream: the client's
// own (or the edge's lossless translation of it) with the model set to the
// provider's target and the streaming fields set for how the node reads
// the answer — every other field, known to iop or not, passes unchanged.
// A stream asks for usage (stream_options.include_usage) so the node can
// observe it; the edge shows it to the client only if the client asked.
func upstreamBody(req *execution.RunRequest, stream bool, prefill map[string]any) ([]byte, error) {
	src := req.ChatBody
	if len(src) == 0 {
		b, err := json.Marshal(neutralBody(req))
		if err != nil {
			return nil, err
		}
		src = b
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(src, &m); err != nil || m == nil {
		return nil, errors.New("the chat body is not a JSON object")
	}
	model, _ := json.Marshal(req.Model)
	m["model"] = model
	if req.Continuation {
		for k, v := range prefill {
			m[k], _ = json.Marshal(v)
		}
	}
	if !stream {
		m["stream"] = json.RawMessage("false")
		delete(m, "stream_options")
		return json.Marshal(m)
	}
	m["stream"] = json.RawMessage("true")
	opts := map[string]json.RawMessage{}
	if raw, ok := m["stream_options"]; ok && string(raw) != "null" {
		_ = json.Unmarshal(raw, &opts)
	}
	opts["include_usage"] = json.RawMessage("true")
	m["stream_options"], _ = json.Marshal(opts)
	return json.Marshal(m)
}

// neutralBody builds a chat body from the neutral request, for a sender
// that did not include the client's body.
func neutralBody(req *execution.RunRequest) map[string]any {
	msgs := make([]map[string]any, 0, len(req.Messages))
	for _, m := range req.Messages {
		msgs = append(msgs, chatMessage(m))
	}
	body := map[string]any{"model": req.Model, "messages": msgs}
	pr := req.Params
	setIf(body, "temperature", pr.Temperature)
	setIf(body, "top_p", pr.TopP)
	setIf(body, "max_tokens", pr.MaxTokens)
	setIf(body, "seed", pr.Seed)
	if len(pr.Stop) > 0 {
		body["stop"] = pr.Stop
	}
	for k, raw := range map[string]json.RawMessage{"tools": pr.Tools, "tool_choice": pr.ToolChoice, "response_format": pr.ResponseFormat} {
		if len(raw) > 0 {
			body[k] = raw
		}
	}
	return body
}

func setIf[T any](m map[string]any, k string, v *T) {
	if v != nil {
		m[k] = *v
	}
}

func chatMessage(m execution.Message) map[string]any {
	out := map[string]any{"role": m.Role}
	if len(m.Images) > 0 {
		parts := []map[string]any{{"type": "text", "text": m.Content}}
		for _, img := range m.Images {
			if !strings.Contains(img, ":") {
				img = "data:image/png;base64," + img
			}
			parts = append(parts, map[string]any{"type": "image_url", "image_url": map[string]string{"url": img}})
		}
		out["content"] = parts
	} else {
		out["content"] = m.Content
	}
	if m.Name != "" {
		out["name"] = m.Name
	}
	if m.ToolCallID != "" {
		out["tool_call_id"] = m.ToolCallID
	}
	if len(m.ToolCalls) > 0 {
		calls := make([]map[string]any, 0, len(m.ToolCalls))
		for _, tc := range m.ToolCalls {
			calls = append(calls, map[string]any{"id": tc.ID, "type": "function", "function": map[string]string{"name": tc.Name, "arguments": tc.Arguments}})
		}
		out["tool_calls"] = calls
		if m.Content == "" {
			out["content"] = nil
		}
	}
	return out
}
