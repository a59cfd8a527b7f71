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
func chatRequest(req *execution.RunRequest) ollamacodec.ChatRequest {
	body := ollamacodec.ChatRequest{Model: req.Model, Stream: true, Messages: make([]ollamacodec.Message, 0, len(req.Messages))}
	for _, m := range req.Messages {
		body.Messages = append(body.Messages, nativeMessage(m))
	}
	body.Options, body.Think = ollamacodec.ChatOptions(req.ChatBody)
	pr := req.Params
	setOption(&body.Options, "temperature", pr.Temperature)
	setOption(&body.Options, "top_p", pr.TopP)
	setOption(&body.Options, "num_predict", pr.MaxTokens)
	setOption(&body.Options, "seed", pr.Seed)
	if len(pr.Stop) > 0 {
		setOption(&body.Options, "stop", &pr.Stop)
	}
	body.Tools = pr.Tools
	body.Format = nativeFormat(pr.ResponseFormat)
	return body
}

// nativeMessage maps a message: developer becomes system, data URLs become
// bare base64 images, tool-call arguments must be a JSON object.
func nativeMessage(m execution.Message) ollamacodec.Message {
	msg := ollamacodec.Message{Role: m.Role, Content: m.Content}
	if m.Role == "developer" {
		msg.Role = "system"
	}
	for _, img := range m.Images {
		if _, b64, ok := strings.Cut(img, ";base64,"); ok {
			img = b64
		}
		msg.Images = append(msg.Images, img)
	}
	for _, tc := range m.ToolCalls {
		var call ollamacodec.ToolCall
		call.Function.Name, call.Function.Arguments = tc.Name, json.RawMessage(tc.Arguments)
		if !json.Valid(call.Function.Arguments) {
			call.Function.Arguments = json.RawMessage("{}")
		}
		msg.ToolCalls = append(msg.ToolCalls, call)
	}
	return msg
}

// setOption sets options[key] to *v when v is set.
func setOption[T any](opts *map[string]json.RawMessage, key string, v *T) {
	if v == nil {
		return
	}
	if *opts == nil {
		*opts = map[string]json.RawMessage{}
	}
	(*opts)[key], _ = json.Marshal(*v)
}

// nativeFormat maps response_format: json_object → "json", a JSON schema
// → the schema; nil otherwise.
func nativeFormat(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return nil
	}
	var rf struct {
		Type       string `json:"type"`
		JSONSchema *struct {
			Schema json.RawMessage `json:"schema"`
		} `json:"json_schema"`
	}
	if json.Unmarshal(raw, &rf) != nil {
		return nil
	}
	switch {
	case rf.Type == "json_object":
		return json.RawMessage(`"json"`)
	case rf.JSONSchema != nil && len(rf.JSONSchema.Schema) > 0:
		return rf.JSONSchema.Schema
	}
	return nil
}
