package ollama

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"

	ollamacodec "github.com/iopgw/iop/codec/ollama"
	"github.com/iopgw/iop/execution"
	"github.com/iopgw/iop/nodeagent/providers/httpx"
)

// maxLine bounds one NDJSON line from Ollama.
const maxLine = 16 << 20

// Execute implements [execution.Provider] with a streaming /api/chat.
func (p *Provider) Execute(ctx context.Context, req *execution.RunRequest, emit *execution.Emitter) error {
	body, err := json.Marshal(chatRequest(req))
	if err != nil {
		return execution.NewFailure(execution.FailureCodeInvalidRequest, err.Error())
	}
	return httpx.Run(ctx, p.cfg.Client, p.base+"/api/chat", "application/x-ndjson", req.Header, body, p.cfg.Credentials, req.Model, emit,
		func(resp *http.Response) error { return readNDJSON(ctx, resp.Body, emit) })
}

type chatLine struct {
	Error   *string `json:"error"`
	Message struct {
		Content   string `json:"content"`
		Thinking  string `json:"thinking"`
		ToolCalls []struct {
			Function struct {
				Name      string          `json:"name"`
				Arguments json.RawMessage `json:"arguments"`
			} `json:"function"`
		} `json:"tool_calls"`
	} `json:"message"`
	Done            bool   `json:"done"`
	DoneReason      string `json:"done_reason"`
	PromptEvalCount int64  `json:"prompt_eval_count"`
	EvalCount       int64  `json:"eval_count"`
}

// readNDJSON turns /api/chat lines into events. A stream that ends without
// a done:true line is an error, never a success.
func readNDJSON(ctx context.Context, r io.Reader, emit *execution.Emitter) error {
	br := bufio.NewReaderSize(r, 64<<10)
	tools := 0
	for {
		line, err := readLine(br)
		if len(line) > 0 {
			var l chatLine
			if jerr := json.Unmarshal(line, &l); jerr != nil {
				return execution.UpstreamFailure(&execution.UpstreamError{Status: http.StatusOK, Message: "malformed line from upstream"})
			}
			if l.Error != nil {
				return execution.UpstreamFailure(&execution.UpstreamError{Status: http.StatusOK, Message: *l.Error})
			}
			ev := execution.RunEvent{Type: execution.EventTypeDelta, Delta: l.Message.Content, Reasoning: l.Message.Thinking}
			for _, tc := range l.Message.ToolCalls {
				ev.ToolCalls = append(ev.ToolCalls, execution.ToolCallDelta{Index: tools, ID: callID(tools), Name: tc.Function.Name, Arguments: string(tc.Function.Arguments)})
				tools++
			}
			if ev.HasContent() {
				emit.Emit(ev)
			}
			if l.Done {
				emit.Emit(execution.RunEvent{Type: execution.EventTypeComplete, FinishReason: finishReason(l.DoneReason, tools),
					Usage: &execution.TokenUsage{PromptTokens: l.PromptEvalCount, CompletionTokens: l.EvalCount, TotalTokens: l.PromptEvalCount + l.EvalCount}})
				return nil
			}
		}
		if errors.Is(err, io.EOF) {
			return execution.UpstreamFailure(&execution.UpstreamError{Status: http.StatusOK, Message: "upstream stream ended without done"})
		}
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return execution.UpstreamFailure(&execution.UpstreamError{Status: http.StatusOK, Message: "reading upstream stream: " + err.Error()})
		}
	}
}

func readLine(br *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		frag, err := br.ReadSlice('\n')
		line = append(line, frag...)
		if len(line) > maxLine {
			return nil, errors.New("line exceeds 16 MiB")
		}
		if err != bufio.ErrBufferFull {
			return []byte(strings.TrimSpace(string(line))), err
		}
	}
}

func callID(i int) string { return "call_" + strconv.Itoa(i) }

func finishReason(done string, tools int) string {
	switch {
	case tools > 0:
		return "tool_calls"
	case done == "length":
		return "length"
	}
	return "stop"
}

// chatRequest builds the native /api/chat body for req.
func chatRequest(req *execution.RunRequest) map[string]any {
	msgs := make([]map[string]any, 0, len(req.Messages))
	for _, m := range req.Messages {
		msg := map[string]any{"role": m.Role, "content": m.Content}
		if m.Role == "developer" {
			msg["role"] = "system"
		}
		if len(m.Images) > 0 {
			imgs := make([]string, 0, len(m.Images))
			for _, img := range m.Images {
				if _, b64, ok := strings.Cut(img, ";base64,"); ok {
					img = b64
				}
				imgs = append(imgs, img)
			}
			msg["images"] = imgs
		}
		if len(m.ToolCalls) > 0 {
			calls := make([]map[string]any, 0, len(m.ToolCalls))
			for _, tc := range m.ToolCalls {
				args := json.RawMessage(tc.Arguments)
				if !json.Valid(args) {
					args = json.RawMessage("{}")
				}
				calls = append(calls, map[string]any{"function": map[string]any{"name": tc.Name, "arguments": args}})
			}
			msg["tool_calls"] = calls
		}
		msgs = append(msgs, msg)
	}
	body := map[string]any{"model": req.Model, "messages": msgs, "stream": true}
	opts := map[string]any{}
	pr := req.Params
	if pr.Temperature != nil {
		opts["temperature"] = *pr.Temperature
	}
	if pr.TopP != nil {
		opts["top_p"] = *pr.TopP
	}
	if pr.MaxTokens != nil {
		opts["num_predict"] = *pr.MaxTokens
	}
	if pr.Seed != nil {
		opts["seed"] = *pr.Seed
	}
	if len(pr.Stop) > 0 {
		opts["stop"] = pr.Stop
	}
	extra, think := ollamacodec.ChatOptions(req.ChatBody)
	for k, v := range extra {
		opts[k] = v
	}
	if think != nil {
		body["think"] = think
	}
	if len(opts) > 0 {
		body["options"] = opts
	}
	if len(pr.Tools) > 0 {
		body["tools"] = pr.Tools
	}
	if len(pr.ResponseFormat) > 0 {
		var rf struct {
			Type       string `json:"type"`
			JSONSchema *struct {
				Schema json.RawMessage `json:"schema"`
			} `json:"json_schema"`
		}
		if json.Unmarshal(pr.ResponseFormat, &rf) == nil {
			switch {
			case rf.Type == "json_object":
				body["format"] = "json"
			case rf.JSONSchema != nil && len(rf.JSONSchema.Schema) > 0:
				body["format"] = rf.JSONSchema.Schema
			}
		}
	}
	return body
}
