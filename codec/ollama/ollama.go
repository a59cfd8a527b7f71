// Package ollama decodes Ollama's native /api/chat and /api/generate
// requests into provider-neutral execution requests and renders execution
// events as Ollama's NDJSON stream or single JSON answer, plus Ollama's
// {"error":"..."} shape. It imports execution and the standard library
// only.
package ollama

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/iopgw/iop/codec/jsonstrict"
	"github.com/iopgw/iop/execution"
)

// Error is an Ollama error: a status and {"error":"message"}.
type Error struct {
	Status  int
	Message string
}

func (e *Error) Error() string { return e.Message }

// Body renders {"error":"..."}.
func (e *Error) Body() []byte {
	b, _ := jsonstrict.Marshal(map[string]string{"error": e.Message})
	return b
}

// Line renders the error as one NDJSON line, for after a stream began.
func (e *Error) Line() []byte { return append(e.Body(), '\n') }

// BadRequest returns a 400.
func BadRequest(format string, args ...any) *Error {
	return &Error{Status: http.StatusBadRequest, Message: fmt.Sprintf(format, args...)}
}

// ModelNotFound returns Ollama's 404 for an unknown model.
func ModelNotFound(model string) *Error {
	if len(model) > 256 {
		model = model[:256]
	}
	return &Error{Status: http.StatusNotFound, Message: fmt.Sprintf("model '%s' not found", model)}
}

// Request is a decoded /api/chat or /api/generate request.
type Request struct {
	Model    string
	Stream   bool // Ollama's default is true
	Generate bool // /api/generate rather than /api/chat
	Messages []execution.Message
	Params   execution.GenerationParams
	// Load is set when the request asks for no generation (a generate
	// request without a prompt, a chat request without messages): the
	// done reason of Ollama's answer, load or unload (LoadAnswer).
	Load string
	// Lost names the first field of the request that Messages and Params
	// cannot carry (a generate request's suffix, template, context or
	// raw): a provider that runs from them refuses it (Refusal).
	Lost string
}

// Refusal is the error of a request that lost a field (Lost) for a
// provider that runs from Messages and Params; nil when nothing was lost.
func (r *Request) Refusal() *Error {
	if r.Lost == "" {
		return nil
	}
	return refusedField(r.Lost)
}

type options struct {
	Temperature *float64 `json:"temperature"`
	TopP        *float64 `json:"top_p"`
	NumPredict  *int64   `json:"num_predict"`
	Seed        *int64   `json:"seed"`
	Stop        []string `json:"stop"`
}

type wireRequest struct {
	Model     *string         `json:"model"`
	Messages  []Message       `json:"messages"`
	Prompt    *string         `json:"prompt"`
	System    *string         `json:"system"`
	Images    []string        `json:"images"`
	Stream    *bool           `json:"stream"`
	Format    json.RawMessage `json:"format"`
	Options   *options        `json:"options"`
	Tools     json.RawMessage `json:"tools"`
	KeepAlive json.RawMessage `json:"keep_alive"`
	// Read only to say they were lost.
	Suffix   *string         `json:"suffix"`
	Template *string         `json:"template"`
	Context  json.RawMessage `json:"context"`
	Raw      *bool           `json:"raw"`
}

// lost is the first field of w that Messages and Params cannot carry.
func (w *wireRequest) lost() string {
	switch {
	case w.Suffix != nil && *w.Suffix != "":
		return "suffix"
	case w.Template != nil && *w.Template != "":
		return "template"
	case len(w.Context) > 0 && string(w.Context) != "null" && string(w.Context) != "[]":
		return "context"
	case w.Raw != nil && *w.Raw:
		return "raw"
	}
	return ""
}

// Decode decodes a chat (generate=false) or generate request body.
func Decode(body []byte, generate bool, maxDepth int) (*Request, *Error) {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, BadRequest("missing request body")
	}
	w, err := jsonstrict.Decode[wireRequest](body, maxDepth)
	if err != nil {
		if jsonstrict.IsCheckError(err) {
			return nil, BadRequest("invalid JSON: %v", err)
		}
		return nil, BadRequest("%v", err)
	}
	if w.Model == nil || *w.Model == "" {
		return nil, BadRequest("model is required")
	}
	r := &Request{Model: *w.Model, Stream: w.Stream == nil || *w.Stream, Generate: generate}
	load, e := loadReason(generate, w.Prompt, len(w.Messages), w.KeepAlive)
	if e != nil {
		return nil, e
	}
	if r.Load = load; load != "" {
		return r, nil
	}
	if generate {
		if w.System != nil && *w.System != "" {
			r.Messages = append(r.Messages, execution.Message{Role: "system", Content: *w.System})
		}
		prompt := ""
		if w.Prompt != nil {
			prompt = *w.Prompt
		}
		r.Messages = append(r.Messages, execution.Message{Role: "user", Content: prompt, Images: w.Images})
	} else {
		for _, m := range w.Messages {
			em := execution.Message{Role: m.Role, Content: m.Content, Images: m.Images, Name: m.ToolName}
			for i, tc := range m.ToolCalls {
				em.ToolCalls = append(em.ToolCalls, execution.ToolCall{ID: fmt.Sprintf("call_%d", i), Name: tc.Function.Name, Arguments: string(tc.Function.Arguments)})
			}
			r.Messages = append(r.Messages, em)
		}
	}
	if o := w.Options; o != nil {
		r.Params = execution.GenerationParams{Temperature: o.Temperature, TopP: o.TopP, MaxTokens: o.NumPredict, Seed: o.Seed, Stop: o.Stop}
	}
	if len(w.Tools) > 0 && string(w.Tools) != "null" {
		r.Params.Tools = w.Tools
	}
	if len(w.Format) > 0 && string(w.Format) != "null" {
		r.Params.ResponseFormat = w.Format
	}
	r.Lost = w.lost()
	return r, nil
}

// Stream renders one execution as Ollama output: NDJSON lines when
// streaming, or one JSON object (Final) otherwise. One per request; not
// safe for concurrent use.
type Stream struct {
	model    string
	generate bool
	start    time.Time
	text     strings.Builder
	thinking strings.Builder
	tools    map[int]*toolAcc
	usage    *execution.TokenUsage
	started  bool
}

type toolAcc struct {
	name string
	args strings.Builder
}

// NewStream returns a renderer.
func NewStream(model string, generate bool, start time.Time) *Stream {
	return &Stream{model: model, generate: generate, start: start, tools: map[int]*toolAcc{}}
}

// Started reports whether any line was rendered.
func (s *Stream) Started() bool { return s.started }

func (s *Stream) line(dst []byte, content, thinking string, done bool, extra map[string]any) []byte {
	m := map[string]any{"model": s.model, "created_at": time.Now().UTC().Format(time.RFC3339Nano), "done": done}
	if s.generate {
		m["response"] = content
		if thinking != "" {
			m["thinking"] = thinking
		}
	} else {
		msg := map[string]any{"role": "assistant", "content": content}
		if thinking != "" {
			msg["thinking"] = thinking
		}
		if tc, ok := extra["tool_calls"]; ok {
			msg["tool_calls"] = tc
			delete(extra, "tool_calls")
		}
		m["message"] = msg
	}
	for k, v := range extra {
		m[k] = v
	}
	b, _ := jsonstrict.Marshal(m)
	s.started = true
	dst = append(dst, b...)
	return append(dst, '\n')
}

// Append appends the NDJSON lines ev produces.
func (s *Stream) Append(dst []byte, ev execution.RunEvent) []byte {
	if ev.Usage != nil {
		s.usage = ev.Usage
	}
	switch ev.Type {
	case execution.EventTypeStart:
		if ev.Model != "" && !s.started {
			s.model = ev.Model
		}
	case execution.EventTypeDelta, execution.EventTypeMessage:
		s.collectTools(ev)
		text := ev.Delta + ev.Message
		if text != "" || ev.Reasoning != "" {
			dst = s.line(dst, text, ev.Reasoning, false, nil)
		}
	case execution.EventTypeComplete:
		if calls := s.toolCalls(); calls != nil {
			dst = s.line(dst, "", "", false, map[string]any{"tool_calls": calls})
		}
		dst = s.line(dst, "", "", true, s.doneFields(ev.FinishReason))
	}
	return dst
}

func (s *Stream) collectTools(ev execution.RunEvent) {
	s.text.WriteString(ev.Delta + ev.Message)
	s.thinking.WriteString(ev.Reasoning)
	for _, tc := range ev.ToolCalls {
		t := s.tools[tc.Index]
		if t == nil {
			t = &toolAcc{}
			s.tools[tc.Index] = t
		}
		if tc.Name != "" {
			t.name = tc.Name
		}
		t.args.WriteString(tc.Arguments)
	}
}

func (s *Stream) toolCalls() []any {
	if len(s.tools) == 0 {
		return nil
	}
	idx := make([]int, 0, len(s.tools))
	for i := range s.tools {
		idx = append(idx, i)
	}
	sort.Ints(idx)
	out := make([]any, 0, len(idx))
	for _, i := range idx {
		t := s.tools[i]
		args := json.RawMessage(t.args.String())
		if !json.Valid(args) {
			args, _ = jsonstrict.Marshal(t.args.String())
		}
		out = append(out, map[string]any{"function": map[string]any{"name": t.name, "arguments": args}})
	}
	return out
}

func (s *Stream) doneFields(finish string) map[string]any {
	reason := finish
	if reason == "" || reason == "tool_calls" {
		reason = "stop"
	}
	total := time.Since(s.start).Nanoseconds()
	m := map[string]any{"done_reason": reason, "total_duration": total, "load_duration": int64(0), "eval_duration": total}
	if u := s.usage; u != nil {
		if u.PromptTokens > 0 {
			m["prompt_eval_count"] = u.PromptTokens
		}
		if u.CompletionTokens > 0 {
			m["eval_count"] = u.CompletionTokens
		}
	}
	return m
}

// Final renders the single JSON answer of a non-streaming request after
// the complete event ev.
func (s *Stream) Final(ev execution.RunEvent) []byte {
	if ev.Usage != nil {
		s.usage = ev.Usage
	}
	extra := s.doneFields(ev.FinishReason)
	if calls := s.toolCalls(); calls != nil {
		extra["tool_calls"] = calls
	}
	b := s.line(nil, s.text.String(), s.thinking.String(), true, extra)
	return b[:len(b)-1]
}

// Add folds ev into a non-streaming answer (use Final at the end).
func (s *Stream) Add(ev execution.RunEvent) {
	if ev.Usage != nil {
		s.usage = ev.Usage
	}
	switch ev.Type {
	case execution.EventTypeStart:
		if ev.Model != "" {
			s.model = ev.Model
		}
	case execution.EventTypeDelta, execution.EventTypeMessage:
		s.collectTools(ev)
	}
}
