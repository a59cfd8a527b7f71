package nodeagent

import (
	"unicode/utf8"

	"github.com/iopgw/iop/execution"
)

// maxEventText bounds the text one event carries on the wire, so every
// message stays far below the edge's per-message limit
// (wire.EdgeMaxRecvMessage) whatever an upstream sends in one event.
const maxEventText = 256 << 10

// splitEvent splits a delta or message event whose text is larger than
// max into several delta events that concatenate to the same output
// (text, reasoning and each tool call's argument fragments, cut on rune
// boundaries). Other events, and small ones, are returned as they are.
func splitEvent(ev execution.RunEvent, max int) []execution.RunEvent {
	if ev.Type != execution.EventTypeDelta && ev.Type != execution.EventTypeMessage {
		return []execution.RunEvent{ev}
	}
	size := len(ev.Delta) + len(ev.Reasoning) + len(ev.Message)
	for _, tc := range ev.ToolCalls {
		size += len(tc.Arguments)
	}
	if size <= max {
		return []execution.RunEvent{ev}
	}
	var out []execution.RunEvent
	text := ev.Delta + ev.Message
	for _, s := range cut(ev.Reasoning, max) {
		out = append(out, execution.RunEvent{Type: execution.EventTypeDelta, Reasoning: s})
	}
	for _, s := range cut(text, max) {
		out = append(out, execution.RunEvent{Type: execution.EventTypeDelta, Delta: s})
	}
	for _, tc := range ev.ToolCalls {
		for i, s := range cut(tc.Arguments, max) {
			d := execution.ToolCallDelta{Index: tc.Index, Arguments: s}
			if i == 0 {
				d.ID, d.Name = tc.ID, tc.Name
			}
			out = append(out, execution.RunEvent{Type: execution.EventTypeDelta, ToolCalls: []execution.ToolCallDelta{d}})
		}
		if tc.Arguments == "" {
			out = append(out, execution.RunEvent{Type: execution.EventTypeDelta, ToolCalls: []execution.ToolCallDelta{tc}})
		}
	}
	if len(out) > 0 {
		out[len(out)-1].Usage = ev.Usage
	}
	return out
}

// cut splits s into pieces of at most max bytes on rune boundaries.
func cut(s string, max int) []string {
	var out []string
	for len(s) > max {
		i := max
		for i > 0 && !utf8.RuneStart(s[i]) {
			i--
		}
		if i == 0 {
			i = max
		}
		out = append(out, s[:i])
		s = s[i:]
	}
	if s != "" {
		out = append(out, s)
	}
	return out
}
