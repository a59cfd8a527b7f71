package openai

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"

	sse "github.com/tmaxmax/go-sse"

	"github.com/iopgw/iop/execution"
	"github.com/iopgw/iop/nodeagent/providers/httpx"
)

// maxEventSize bounds one upstream SSE event (lines above 64 KiB are
// normal for tool arguments; 16 MiB is generous).
const maxEventSize = 16 << 20

// Execute implements [execution.Provider]: a streaming Chat Completions
// request upstream, its chunks turned into events in order.
func (p *Provider) Execute(ctx context.Context, req *execution.RunRequest, emit *execution.Emitter) error {
	body, err := json.Marshal(chatRequest(req))
	if err != nil {
		return execution.NewFailure(execution.FailureCodeInvalidRequest, err.Error())
	}
	return httpx.Run(ctx, p.cfg.Client, p.base+"/chat/completions", "text/event-stream", body, p.cfg.Credentials, req.Model, emit,
		func(resp *http.Response) error { return p.readStream(ctx, resp, emit) })
}

// readStream turns upstream SSE chunks into events until [DONE]. A stream
// that ends cleanly after a finish_reason without [DONE] is complete; one
// that ends before any finish_reason, or with a read error, is an error.
func (p *Provider) readStream(ctx context.Context, resp *http.Response, emit *execution.Emitter) error {
	st := &streamState{}
	for ev, err := range sse.Read(httpx.LineReader(resp.Body), &sse.ReadConfig{MaxEventSize: maxEventSize}) {
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return execution.UpstreamFailure(&execution.UpstreamError{Status: http.StatusOK, Message: "reading upstream stream: " + err.Error()})
		}
		done, ferr := st.handle(ev.Data, emit)
		if ferr != nil {
			return ferr
		}
		if done {
			break
		}
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if !st.finished {
		return execution.UpstreamFailure(&execution.UpstreamError{Status: http.StatusOK, Message: "upstream stream ended without a finish_reason or [DONE]"})
	}
	emit.Emit(execution.RunEvent{Type: execution.EventTypeComplete, FinishReason: st.finish, Usage: st.usage})
	return nil
}

type streamState struct {
	finished bool
	finish   string
	usage    *execution.TokenUsage
}

type chunk struct {
	Error   json.RawMessage `json:"error"`
	Model   string          `json:"model"`
	Choices []struct {
		Index int `json:"index"`
		Delta struct {
			Content          *string `json:"content"`
			ReasoningContent *string `json:"reasoning_content"`
			Reasoning        *string `json:"reasoning"`
			ToolCalls        []struct {
				Index    int    `json:"index"`
				ID       string `json:"id"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *httpx.Usage `json:"usage"`
}

// handle processes one SSE data payload. It reports done on [DONE].
func (st *streamState) handle(data string, emit *execution.Emitter) (bool, error) {
	data = strings.TrimSpace(data)
	if data == "" {
		return false, nil
	}
	if strings.HasPrefix(data, "[DONE]") {
		st.finished = true
		return true, nil
	}
	var c chunk
	if err := json.Unmarshal([]byte(data), &c); err != nil {
		return false, execution.UpstreamFailure(&execution.UpstreamError{Status: http.StatusOK, Message: "malformed chunk from upstream"})
	}
	if len(c.Error) > 0 && string(c.Error) != "null" {
		ue := httpx.ParseUpstreamError(http.StatusOK, http.Header{}, []byte(`{"error":`+string(c.Error)+`}`))
		return false, execution.UpstreamFailure(ue)
	}
	if c.Usage != nil {
		st.usage = c.Usage.TokenUsage()
	}
	for _, ch := range c.Choices {
		if ch.Index != 0 {
			continue // n > 1 is not supported on the normalized path
		}
		ev := execution.RunEvent{Type: execution.EventTypeDelta}
		if ch.Delta.Content != nil {
			ev.Delta = *ch.Delta.Content
		}
		if ch.Delta.ReasoningContent != nil {
			ev.Reasoning = *ch.Delta.ReasoningContent
		} else if ch.Delta.Reasoning != nil {
			ev.Reasoning = *ch.Delta.Reasoning
		}
		for _, tc := range ch.Delta.ToolCalls {
			ev.ToolCalls = append(ev.ToolCalls, execution.ToolCallDelta{Index: tc.Index, ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
		}
		if ev.HasContent() {
			emit.Emit(ev)
		}
		if ch.FinishReason != nil && *ch.FinishReason != "" {
			st.finished, st.finish = true, *ch.FinishReason
		}
	}
	return false, nil
}

// chatRequest builds the upstream Chat Completions body for req.
func chatRequest(req *execution.RunRequest) map[string]any {
	msgs := make([]map[string]any, 0, len(req.Messages))
	for _, m := range req.Messages {
		msgs = append(msgs, chatMessage(m))
	}
	body := map[string]any{
		"model": req.Model, "messages": msgs, "stream": true,
		"stream_options": map[string]any{"include_usage": true},
	}
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
