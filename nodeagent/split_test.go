package nodeagent

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/iopgw/iop/execution"
)

func TestSplitEventKeepsOutput(t *testing.T) {
	big := strings.Repeat("é😀x", 40)
	ev := execution.RunEvent{Type: execution.EventTypeMessage, Message: big, Reasoning: big,
		ToolCalls: []execution.ToolCallDelta{{Index: 1, ID: "c", Name: "f", Arguments: big}}, Usage: &execution.TokenUsage{TotalTokens: 3}}
	parts := splitEvent(ev, 16)
	var text, reasoning, args string
	for _, p := range parts {
		if p.Type != execution.EventTypeDelta || len(p.Delta)+len(p.Reasoning) > 16 || !utf8.ValidString(p.Delta) {
			t.Fatalf("part %+v", p)
		}
		text, reasoning = text+p.Delta, reasoning+p.Reasoning
		for _, tc := range p.ToolCalls {
			args += tc.Arguments
			if len(tc.Arguments) > 16 || tc.Index != 1 {
				t.Fatalf("tool part %+v", tc)
			}
		}
	}
	if text != big || reasoning != big || args != big || parts[len(parts)-1].Usage == nil || parts[0].ToolCalls != nil {
		t.Fatalf("split lost output: %d parts", len(parts))
	}
	if got := splitEvent(execution.RunEvent{Type: execution.EventTypeDelta, Delta: "small"}, 16); len(got) != 1 || got[0].Delta != "small" {
		t.Fatalf("small event changed: %+v", got)
	}
}

// TestProviderPanicEndsOnlyTheAttempt: a panicking provider becomes the
// attempt's internal failure; the node goes on.
func TestProviderPanicEndsOnlyTheAttempt(t *testing.T) {
	var log strings.Builder
	err := execSafely(t.Context(), func(context.Context) error { panic("secret prompt text") }, slog.New(slog.NewTextHandler(&log, nil)), "p1")
	var f *execution.ExecutionFailure
	if !errors.As(err, &f) || f.Code != execution.FailureCodeInternal {
		t.Fatalf("err %v", err)
	}
	if !strings.Contains(log.String(), "provider panicked") || strings.Contains(log.String(), "secret prompt text") {
		t.Fatalf("log %s", log.String())
	}
}
