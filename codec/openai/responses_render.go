package openai

import (
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"github.com/iopgw/iop/codec/jsonstrict"
	"github.com/iopgw/iop/execution"
)

// ResponseEcho is what a Response object repeats from its request.
type ResponseEcho struct {
	Instructions       string
	Tools              json.RawMessage
	ToolChoice         json.RawMessage
	Temperature        *float64
	TopP               *float64
	MaxOutputTokens    *int64
	ParallelToolCalls  *bool
	Metadata           json.RawMessage
	PreviousResponseID string
	Store              *bool
}

// Echo returns the echo of r.
func (r *ResponsesRequest) Echo() ResponseEcho {
	return ResponseEcho{Instructions: r.Instructions, Tools: r.Tools, ToolChoice: r.ToolChoice, Temperature: r.Params.Temperature,
		TopP: r.Params.TopP, MaxOutputTokens: r.Params.MaxTokens, ParallelToolCalls: r.ParallelToolCalls, Metadata: r.Metadata,
		PreviousResponseID: r.PreviousResponseID, Store: r.Store}
}

// response accumulates the Response object and its output items.
type response struct {
	id        string
	model     string
	createdAt int64
	echo      ResponseEcho
	items     []*outputItem
	open      map[string]*outputItem // by kind key: "msg", "reasoning", "fn:<index>"
	usage     *execution.TokenUsage
	finish    string
}

type outputItem struct {
	kind   string // message, reasoning, function_call
	id     string
	index  int
	text   strings.Builder
	callID string
	name   string
	done   bool
}

func newResponse(id, model string, createdAt int64, echo ResponseEcho) *response {
	return &response{id: id, model: model, createdAt: createdAt, echo: echo, open: map[string]*outputItem{}}
}

func (r *response) item(key, kind string) (*outputItem, bool) {
	if it, ok := r.open[key]; ok {
		return it, false
	}
	it := &outputItem{kind: kind, index: len(r.items)}
	switch kind {
	case "message":
		it.id = "msg_" + r.id[len("resp_"):] + strconv.Itoa(it.index)
	case "reasoning":
		it.id = "rs_" + r.id[len("resp_"):] + strconv.Itoa(it.index)
	default:
		it.id = "fc_" + r.id[len("resp_"):] + strconv.Itoa(it.index)
	}
	r.items = append(r.items, it)
	r.open[key] = it
	return it, true
}

// itemJSON renders an output item in its current state.
func (it *outputItem) itemJSON() map[string]any {
	status := "in_progress"
	if it.done {
		status = "completed"
	}
	switch it.kind {
	case "message":
		content := []any{}
		if it.done || it.text.Len() > 0 {
			content = append(content, textPart(it.text.String()))
		}
		return map[string]any{"id": it.id, "type": "message", "status": status, "role": "assistant", "content": content}
	case "reasoning":
		m := map[string]any{"id": it.id, "type": "reasoning", "summary": []any{}}
		if it.done {
			m["content"] = []any{map[string]any{"type": "reasoning_text", "text": it.text.String()}}
		}
		return m
	}
	return map[string]any{"id": it.id, "type": "function_call", "status": status, "call_id": it.callID, "name": it.name, "arguments": it.text.String()}
}

func textPart(text string) map[string]any {
	return map[string]any{"type": "output_text", "text": text, "annotations": []any{}, "logprobs": []any{}}
}

// object renders the Response object with the given status.
func (r *response) object(status string, errObj, incomplete any) map[string]any {
	out := make([]any, 0, len(r.items))
	for _, it := range r.items {
		out = append(out, it.itemJSON())
	}
	obj := map[string]any{
		"id": r.id, "object": "response", "created_at": r.createdAt, "status": status,
		"error": errObj, "incomplete_details": incomplete, "instructions": nilIfEmpty(r.echo.Instructions),
		"model": r.model, "output": out, "parallel_tool_calls": boolOr(r.echo.ParallelToolCalls, true),
		"metadata": rawOr(r.echo.Metadata, "{}"), "tool_choice": rawOr(r.echo.ToolChoice, `"auto"`),
		"tools": rawOr(r.echo.Tools, "[]"), "temperature": floatOr(r.echo.Temperature, 1), "top_p": floatOr(r.echo.TopP, 1),
		"max_output_tokens": r.echo.MaxOutputTokens, "previous_response_id": nilIfEmpty(r.echo.PreviousResponseID),
		"store": boolOr(r.echo.Store, true), "text": map[string]any{"format": map[string]any{"type": "text"}},
		"truncation": "disabled", "reasoning": nil,
	}
	if status == "completed" || status == "incomplete" || status == "failed" {
		if r.usage != nil { // only usage the upstream reported: never invented zeros
			obj["usage"] = responseUsage(r.usage)
		}
	}
	if status == "completed" {
		obj["completed_at"] = time.Now().Unix()
	}
	return obj
}

func responseUsage(u *execution.TokenUsage) map[string]any {
	var in, out, total, cached, reasoning int64
	if u != nil {
		in, out, total, cached, reasoning = u.PromptTokens, u.CompletionTokens, u.TotalTokens, u.CachedTokens, u.ReasoningTokens
		if total == 0 {
			total = in + out
		}
	}
	return map[string]any{
		"input_tokens": in, "input_tokens_details": map[string]any{"cached_tokens": cached, "cache_write_tokens": 0},
		"output_tokens": out, "output_tokens_details": map[string]any{"reasoning_tokens": reasoning}, "total_tokens": total,
	}
}

func nilIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func boolOr(b *bool, def bool) bool {
	if b == nil {
		return def
	}
	return *b
}

func floatOr(f *float64, def float64) float64 {
	if f == nil {
		return def
	}
	return *f
}

func rawOr(raw json.RawMessage, def string) json.RawMessage {
	if len(raw) == 0 {
		return json.RawMessage(def)
	}
	return raw
}

// ResponsesStream renders one execution as Responses API SSE events with
// sequence_number from 0. It holds response.created back until the first
// output, so nothing is written before the provider makes progress. One per
// request; not safe for concurrent use.
type ResponsesStream struct {
	r       *response
	seq     int
	started bool
}

// NewResponsesStream returns a renderer for one stream.
func NewResponsesStream(id, model string, createdAt int64, echo ResponseEcho) *ResponsesStream {
	return &ResponsesStream{r: newResponse(id, model, createdAt, echo)}
}

// Started reports whether any event was rendered.
func (s *ResponsesStream) Started() bool { return s.started }

// NextSequence is the sequence_number the next event gets.
func (s *ResponsesStream) NextSequence() int { return s.seq }

func (s *ResponsesStream) event(dst []byte, typ string, fields map[string]any) []byte {
	fields["type"] = typ
	fields["sequence_number"] = s.seq
	s.seq++
	b, _ := jsonstrict.Marshal(fields)
	dst = append(dst, "event: "...)
	dst = append(dst, typ...)
	dst = append(dst, "\ndata: "...)
	dst = append(dst, b...)
	return append(dst, '\n', '\n')
}

func (s *ResponsesStream) begin(dst []byte) []byte {
	if s.started {
		return dst
	}
	s.started = true
	dst = s.event(dst, "response.created", map[string]any{"response": s.r.object("in_progress", nil, nil)})
	return s.event(dst, "response.in_progress", map[string]any{"response": s.r.object("in_progress", nil, nil)})
}

// Append appends the events ev produces. A complete event closes open
// items and ends with response.completed (or response.incomplete for
// length and content_filter). Error and cancelled events produce nothing:
// the caller decides the terminal (AppendFailed).
func (s *ResponsesStream) Append(dst []byte, ev execution.RunEvent) []byte {
	if ev.Usage != nil {
		s.r.usage = ev.Usage
	}
	switch ev.Type {
	case execution.EventTypeStart:
		if ev.Model != "" && !s.started {
			s.r.model = ev.Model
		}
	case execution.EventTypeDelta, execution.EventTypeMessage:
		dst = s.appendContent(dst, ev)
	case execution.EventTypeComplete:
		s.r.finish = ev.FinishReason
		dst = s.begin(dst)
		dst = s.closeAll(dst)
		status, incomplete := terminalStatus(ev.FinishReason)
		typ := "response.completed"
		if status == "incomplete" {
			typ = "response.incomplete"
		}
		dst = s.event(dst, typ, map[string]any{"response": s.r.object(status, nil, incomplete)})
	}
	return dst
}

func terminalStatus(finish string) (string, any) {
	switch finish {
	case "length":
		return "incomplete", map[string]any{"reason": "max_output_tokens"}
	case "content_filter":
		return "incomplete", map[string]any{"reason": "content_filter"}
	}
	return "completed", nil
}

func (s *ResponsesStream) appendContent(dst []byte, ev execution.RunEvent) []byte {
	text := ev.Delta + ev.Message
	if text == "" && ev.Reasoning == "" && len(ev.ToolCalls) == 0 {
		return dst
	}
	dst = s.begin(dst)
	if ev.Reasoning != "" {
		it, isNew := s.r.item("reasoning", "reasoning")
		if isNew {
			dst = s.event(dst, "response.output_item.added", map[string]any{"output_index": it.index, "item": it.itemJSON()})
		}
		it.text.WriteString(ev.Reasoning)
		dst = s.event(dst, "response.reasoning_text.delta", map[string]any{"item_id": it.id, "output_index": it.index, "content_index": 0, "delta": ev.Reasoning})
	}
	if text != "" {
		dst = s.closeKey(dst, "reasoning")
		it, isNew := s.r.item("msg", "message")
		if isNew {
			dst = s.event(dst, "response.output_item.added", map[string]any{"output_index": it.index, "item": it.itemJSON()})
			dst = s.event(dst, "response.content_part.added", map[string]any{"item_id": it.id, "output_index": it.index, "content_index": 0, "part": textPart("")})
		}
		it.text.WriteString(text)
		dst = s.event(dst, "response.output_text.delta", map[string]any{"item_id": it.id, "output_index": it.index, "content_index": 0, "delta": text, "logprobs": []any{}})
	}
	for _, tc := range ev.ToolCalls {
		dst = s.closeKey(dst, "reasoning")
		dst = s.closeKey(dst, "msg")
		it, isNew := s.r.item("fn:"+strconv.Itoa(tc.Index), "function_call")
		if isNew {
			it.callID, it.name = tc.ID, tc.Name
			dst = s.event(dst, "response.output_item.added", map[string]any{"output_index": it.index, "item": it.itemJSON()})
		}
		if tc.Arguments != "" {
			it.text.WriteString(tc.Arguments)
			dst = s.event(dst, "response.function_call_arguments.delta", map[string]any{"item_id": it.id, "output_index": it.index, "delta": tc.Arguments})
		}
	}
	return dst
}

func (s *ResponsesStream) closeKey(dst []byte, key string) []byte {
	it, ok := s.r.open[key]
	if !ok {
		return dst
	}
	delete(s.r.open, key)
	it.done = true
	switch it.kind {
	case "message":
		text := it.text.String()
		dst = s.event(dst, "response.output_text.done", map[string]any{"item_id": it.id, "output_index": it.index, "content_index": 0, "text": text, "logprobs": []any{}})
		dst = s.event(dst, "response.content_part.done", map[string]any{"item_id": it.id, "output_index": it.index, "content_index": 0, "part": textPart(text)})
	case "reasoning":
		dst = s.event(dst, "response.reasoning_text.done", map[string]any{"item_id": it.id, "output_index": it.index, "content_index": 0, "text": it.text.String()})
	default:
		dst = s.event(dst, "response.function_call_arguments.done", map[string]any{"item_id": it.id, "output_index": it.index, "name": it.name, "arguments": it.text.String()})
	}
	return s.event(dst, "response.output_item.done", map[string]any{"output_index": it.index, "item": it.itemJSON()})
}

func (s *ResponsesStream) closeAll(dst []byte) []byte {
	for _, it := range s.r.items {
		for key, open := range s.r.open {
			if open == it {
				dst = s.closeKey(dst, key)
			}
		}
	}
	return dst
}

// AppendFailed ends a committed Responses stream after an abnormal end: an
// error event carrying the typed code, then response.failed with status
// failed, each with the next sequence_number. The Response error code is
// server_error (the spec's closed enum); the typed code leads its message.
func (s *ResponsesStream) AppendFailed(dst []byte, code, message string) []byte {
	dst = s.begin(dst)
	dst = s.event(dst, "error", map[string]any{"code": code, "message": message, "param": nil})
	errObj := map[string]any{"code": "server_error", "message": code + ": " + message}
	return s.event(dst, "response.failed", map[string]any{"response": s.r.object("failed", errObj, nil)})
}

// ResponseAccumulator collects an execution into one Response object.
type ResponseAccumulator struct {
	s *ResponsesStream
}

// NewResponseAccumulator returns an accumulator.
func NewResponseAccumulator(id, model string, createdAt int64, echo ResponseEcho) *ResponseAccumulator {
	return &ResponseAccumulator{s: NewResponsesStream(id, model, createdAt, echo)}
}

// Add folds ev into the accumulated Response.
func (a *ResponseAccumulator) Add(ev execution.RunEvent) {
	if ev.Type == execution.EventTypeComplete {
		a.s.r.finish = ev.FinishReason
		if ev.Usage != nil {
			a.s.r.usage = ev.Usage
		}
		a.s.closeAll(nil)
		return
	}
	a.s.Append(nil, ev)
}

// HasToolCalls reports whether the answer contains function calls.
func (a *ResponseAccumulator) HasToolCalls() bool {
	for _, it := range a.s.r.items {
		if it.kind == "function_call" {
			return true
		}
	}
	return false
}

// Body renders the final Response JSON.
func (a *ResponseAccumulator) Body() []byte {
	status, incomplete := terminalStatus(a.s.r.finish)
	b, _ := jsonstrict.Marshal(a.s.r.object(status, nil, incomplete))
	return b
}
