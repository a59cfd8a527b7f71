package anthropic

import (
	"encoding/json"
	"slices"

	"github.com/iopgw/iop/execution"
	"github.com/iopgw/iop/internal/ids"
)

// NewMessageID returns a fresh msg_ id.
func NewMessageID() string { return ids.NewWith("msg_") }

// newToolUseID returns an id for a tool call whose upstream gave none.
func newToolUseID() string { return ids.NewWith("toolu_") }

// StopReason maps a run's finish reason to the API's stop_reason.
func StopReason(finish string) string {
	switch finish {
	case "length":
		return "max_tokens"
	case "tool_calls":
		return "tool_use"
	case "stop_sequence":
		return "stop_sequence"
	case "content_filter":
		return "refusal"
	}
	return "end_turn"
}

type usageOut struct {
	InputTokens          int64 `json:"input_tokens"`
	OutputTokens         int64 `json:"output_tokens"`
	CacheReadInputTokens int64 `json:"cache_read_input_tokens,omitempty"`
}

// usageOf is a run's usage as the API counts it: input_tokens excludes
// what was read from the cache.
func usageOf(u *execution.TokenUsage) usageOut {
	if u == nil {
		return usageOut{}
	}
	return usageOut{InputTokens: u.PromptTokens - u.CachedTokens, OutputTokens: u.CompletionTokens, CacheReadInputTokens: u.CachedTokens}
}

// Stream renders a run's events as the Messages SSE sequence:
// message_start with the first output, then a content block per
// kind of output as it comes (thinking, text, each tool call with its
// input as input_json_delta) — the ping after the first block's start —
// then message_delta with the stop reason and
// usage, then message_stop.
type Stream struct {
	ID, Model string
	opened    bool
	pinged    bool
	start     *execution.TokenUsage // the start event's usage, if any
	blocks    int                   // content blocks started
	open      string                // the kind of the open block ("" when none)
	tool      int                   // the upstream index of the open tool block
	// StopSequence is the stop sequence that ended the answer, when its
	// finish reason is stop_sequence.
	StopSequence string
	// Stops are the stop sequences the request asked for: one an
	// upstream names with its finish is reported (see stopped).
	Stops []string
}

// stopped is the stop_reason and stop_sequence of an answer that
// finished as ev. A stop sequence ended it when the renderer was told
// which (known, with the finish reason stop_sequence: an upstream serving
// Messages), or when an upstream of Chat finished with "stop" naming one
// of the sequences the request asked for (vLLM and SGLang name it;
// OpenAI does not, and its stop reads end_turn). A sequence the request
// did not ask for is not shown.
func stopped(ev execution.RunEvent, known string, asked []string) (string, any) {
	switch {
	case ev.FinishReason == "stop_sequence" && known != "":
		return "stop_sequence", known
	case ev.FinishReason == "stop" && ev.StopSequence != "" && slices.Contains(asked, ev.StopSequence):
		return "stop_sequence", ev.StopSequence
	}
	return StopReason(ev.FinishReason), nil
}

// NewStream returns a stream renderer for one answer.
func NewStream(id, model string) *Stream { return &Stream{ID: id, Model: model, tool: -1} }

func event(dst []byte, name string, v any) []byte {
	b, _ := json.Marshal(v)
	dst = append(dst, "event: "...)
	dst = append(dst, name...)
	dst = append(dst, "\ndata: "...)
	dst = append(dst, b...)
	return append(dst, '\n', '\n')
}

// begin appends message_start once.
func (s *Stream) begin(dst []byte) []byte {
	if s.opened {
		return dst
	}
	s.opened = true
	dst = event(dst, "message_start", map[string]any{"type": "message_start", "message": map[string]any{
		"id": s.ID, "type": "message", "role": "assistant", "model": s.Model, "content": []any{},
		"stop_reason": nil, "stop_sequence": nil, "usage": usageOf(s.start)}})
	return dst
}

// ping appends the ping the API sends after the first block's start.
func (s *Stream) ping(dst []byte) []byte {
	if s.pinged {
		return dst
	}
	s.pinged = true
	return event(dst, "ping", map[string]any{"type": "ping"})
}

// block makes a block of kind the open one, closing the one before.
func (s *Stream) block(dst []byte, kind string, start map[string]any) []byte {
	dst = s.closeBlock(s.begin(dst))
	s.open = kind
	s.blocks++
	dst = event(dst, "content_block_start", map[string]any{"type": "content_block_start", "index": s.blocks - 1, "content_block": start})
	return s.ping(dst)
}

func (s *Stream) closeBlock(dst []byte) []byte {
	if s.open == "" {
		return dst
	}
	s.open, s.tool = "", -1
	return event(dst, "content_block_stop", map[string]any{"type": "content_block_stop", "index": s.blocks - 1})
}

func (s *Stream) delta(dst []byte, d map[string]any) []byte {
	return event(dst, "content_block_delta", map[string]any{"type": "content_block_delta", "index": s.blocks - 1, "delta": d})
}

// Append appends the events ev produces to dst.
func (s *Stream) Append(dst []byte, ev execution.RunEvent) []byte {
	switch ev.Type {
	case execution.EventTypeStart:
		s.start = ev.Usage
	case execution.EventTypeDelta, execution.EventTypeMessage:
		if ev.Reasoning != "" {
			if s.open != "thinking" {
				dst = s.block(dst, "thinking", map[string]any{"type": "thinking", "thinking": ""})
			}
			dst = s.delta(dst, map[string]any{"type": "thinking_delta", "thinking": ev.Reasoning})
		}
		if text := ev.Delta + ev.Message; text != "" {
			if s.open != "text" {
				dst = s.block(dst, "text", map[string]any{"type": "text", "text": ""})
			}
			dst = s.delta(dst, map[string]any{"type": "text_delta", "text": text})
		}
		for _, tc := range ev.ToolCalls {
			if s.open != "tool_use" || tc.Index != s.tool {
				id := tc.ID
				if id == "" {
					id = newToolUseID()
				}
				dst = s.block(dst, "tool_use", map[string]any{"type": "tool_use", "id": id, "name": tc.Name, "input": map[string]any{}})
				s.tool = tc.Index
			}
			if tc.Arguments != "" {
				dst = s.delta(dst, map[string]any{"type": "input_json_delta", "partial_json": tc.Arguments})
			}
		}
	case execution.EventTypeComplete:
		dst = s.ping(s.closeBlock(s.begin(dst)))
		reason, seq := stopped(ev, s.StopSequence, s.Stops)
		dst = event(dst, "message_delta", map[string]any{"type": "message_delta",
			"delta": map[string]any{"stop_reason": reason, "stop_sequence": seq}, "usage": usageOf(ev.Usage)})
		return event(dst, "message_stop", map[string]any{"type": "message_stop"})
	}
	return dst
}

// Accumulator collects a run's events into one Messages answer.
type Accumulator struct {
	ID, Model string
	content   []map[string]any
	args      map[int]*[]byte    // tool calls' argument text, by upstream index
	kinds     []string           // the kind of each content block
	tools     map[int]int        // upstream tool index → content block
	finish    execution.RunEvent // the complete event
	usage     *execution.TokenUsage
	// StopSequence is the stop sequence that ended the answer, when its
	// finish reason is stop_sequence.
	StopSequence string
	// Stops are the stop sequences the request asked for (as Stream's).
	Stops []string
}

// NewAccumulator returns an accumulator for one answer.
func NewAccumulator(id, model string) *Accumulator {
	return &Accumulator{ID: id, Model: model, args: map[int]*[]byte{}, tools: map[int]int{}}
}

// appendText adds text to the last block of kind, or a new one.
func (a *Accumulator) appendText(kind, key, text string) {
	if n := len(a.kinds); n > 0 && a.kinds[n-1] == kind {
		a.content[n-1][key] = a.content[n-1][key].(string) + text
		return
	}
	a.kinds = append(a.kinds, kind)
	b := map[string]any{"type": kind, key: text}
	if kind == "thinking" {
		b["signature"] = ""
	}
	a.content = append(a.content, b)
}

// Add takes one event.
func (a *Accumulator) Add(ev execution.RunEvent) {
	switch ev.Type {
	case execution.EventTypeDelta, execution.EventTypeMessage:
		if ev.Reasoning != "" {
			a.appendText("thinking", "thinking", ev.Reasoning)
		}
		if text := ev.Delta + ev.Message; text != "" {
			a.appendText("text", "text", text)
		}
		for _, tc := range ev.ToolCalls {
			if _, ok := a.tools[tc.Index]; !ok || tc.ID != "" && a.content[a.tools[tc.Index]]["id"] != tc.ID {
				id := tc.ID
				if id == "" {
					id = newToolUseID()
				}
				a.tools[tc.Index] = len(a.content)
				a.kinds = append(a.kinds, "tool_use")
				a.content = append(a.content, map[string]any{"type": "tool_use", "id": id, "name": tc.Name})
				a.args[len(a.content)-1] = new([]byte)
			}
			b := a.args[a.tools[tc.Index]]
			*b = append(*b, tc.Arguments...)
		}
	case execution.EventTypeComplete:
		a.finish = ev
	}
	if ev.Usage != nil {
		a.usage = ev.Usage
	}
}

// Body is the JSON answer. A tool call's input is its arguments as the
// upstream wrote them: the JSON object, or — when they are not valid
// JSON — the text itself, never a made-up object.
func (a *Accumulator) Body() []byte {
	content := make([]any, 0, len(a.content))
	for i, b := range a.content {
		if args, ok := a.args[i]; ok {
			switch {
			case len(*args) == 0:
				b["input"] = map[string]any{}
			case json.Valid(*args):
				b["input"] = json.RawMessage(*args)
			default:
				b["input"] = string(*args)
			}
		}
		content = append(content, b)
	}
	reason, seq := stopped(a.finish, a.StopSequence, a.Stops)
	b, _ := json.Marshal(map[string]any{"id": a.ID, "type": "message", "role": "assistant", "model": a.Model,
		"content": content, "stop_reason": reason, "stop_sequence": seq, "usage": usageOf(a.usage)})
	return b
}
