package anthropic

import (
	"encoding/json"
	"strings"

	"github.com/iopgw/iop/execution"
	"github.com/iopgw/iop/internal/ids"
)

// NewMessageID returns a fresh msg_ id.
func NewMessageID() string { return "msg_" + ids.New() }

// StopReason maps a run's finish reason to the API's stop_reason.
func StopReason(finish string) string {
	switch finish {
	case "length":
		return "max_tokens"
	case "tool_calls":
		return "tool_use"
	case "stop_sequence":
		return "stop_sequence"
	}
	return "end_turn"
}

type usageOut struct {
	InputTokens  int64 `json:"input_tokens"`
	OutputTokens int64 `json:"output_tokens"`
}

func usageOf(u *execution.TokenUsage) usageOut {
	if u == nil {
		return usageOut{}
	}
	return usageOut{InputTokens: u.PromptTokens, OutputTokens: u.CompletionTokens}
}

// Stream renders a run's events as the Messages SSE sequence: one text
// block (index 0), then message_delta with the stop reason and usage,
// then message_stop. The opening events (message_start,
// content_block_start, ping) go out with the first output, as the other
// renderers' do.
type Stream struct {
	ID, Model string
	opened    bool
	start     *execution.TokenUsage // the start event's usage, if any
}

// NewStream returns a stream renderer for one answer.
func NewStream(id, model string) *Stream { return &Stream{ID: id, Model: model} }

func event(dst []byte, name string, v any) []byte {
	b, _ := json.Marshal(v)
	dst = append(dst, "event: "...)
	dst = append(dst, name...)
	dst = append(dst, "\ndata: "...)
	dst = append(dst, b...)
	return append(dst, '\n', '\n')
}

// open appends the opening events once.
func (s *Stream) open(dst []byte) []byte {
	if s.opened {
		return dst
	}
	s.opened = true
	dst = event(dst, "message_start", map[string]any{"type": "message_start", "message": map[string]any{
		"id": s.ID, "type": "message", "role": "assistant", "model": s.Model, "content": []any{},
		"stop_reason": nil, "stop_sequence": nil, "usage": usageOf(s.start)}})
	dst = event(dst, "content_block_start", map[string]any{"type": "content_block_start", "index": 0,
		"content_block": map[string]any{"type": "text", "text": ""}})
	return event(dst, "ping", map[string]any{"type": "ping"})
}

// Append appends the events ev produces to dst.
func (s *Stream) Append(dst []byte, ev execution.RunEvent) []byte {
	switch ev.Type {
	case execution.EventTypeStart:
		s.start = ev.Usage
	case execution.EventTypeDelta:
		if ev.Delta == "" {
			return dst
		}
		dst = s.open(dst)
		return event(dst, "content_block_delta", map[string]any{"type": "content_block_delta", "index": 0,
			"delta": map[string]any{"type": "text_delta", "text": ev.Delta}})
	case execution.EventTypeComplete:
		dst = s.open(dst)
		dst = event(dst, "content_block_stop", map[string]any{"type": "content_block_stop", "index": 0})
		dst = event(dst, "message_delta", map[string]any{"type": "message_delta",
			"delta": map[string]any{"stop_reason": StopReason(ev.FinishReason), "stop_sequence": nil}, "usage": usageOf(ev.Usage)})
		return event(dst, "message_stop", map[string]any{"type": "message_stop"})
	}
	return dst
}

// Accumulator collects a run's events into one Messages answer.
type Accumulator struct {
	ID, Model string
	text      strings.Builder
	finish    string
	usage     *execution.TokenUsage
}

// NewAccumulator returns an accumulator for one answer.
func NewAccumulator(id, model string) *Accumulator { return &Accumulator{ID: id, Model: model} }

// Add takes one event.
func (a *Accumulator) Add(ev execution.RunEvent) {
	switch ev.Type {
	case execution.EventTypeDelta:
		a.text.WriteString(ev.Delta)
	case execution.EventTypeComplete:
		a.finish = ev.FinishReason
	}
	if ev.Usage != nil {
		a.usage = ev.Usage
	}
}

// Body is the JSON answer.
func (a *Accumulator) Body() []byte {
	b, _ := json.Marshal(map[string]any{"id": a.ID, "type": "message", "role": "assistant", "model": a.Model,
		"content": []any{map[string]any{"type": "text", "text": a.text.String()}}, "stop_reason": StopReason(a.finish),
		"stop_sequence": nil, "usage": usageOf(a.usage)})
	return b
}
