package openai

import (
	"testing"

	"github.com/iopgw/iop/execution"
)

// TestChunkMatchesReflection: the append-style chunk renderer writes
// exactly what encoding the chunk struct writes, for every delta shape.
func TestChunkMatchesReflection(t *testing.T) {
	text, empty, stop := "hé \"q\" \n\u2028 \xff", "", "stop"
	streams := []*ChatStream{
		{ID: "chatcmpl-1", Model: "m", Created: 1700000000},
		{ID: "id\"x", Model: "model/</x>", Created: -1, IncludeUsage: true, Fingerprint: "fp_1", ServiceTier: "default"},
	}
	deltas := []struct {
		d      deltaWire
		finish *string
	}{
		{deltaWire{Role: "assistant", Content: &empty}, nil},
		{deltaWire{Content: &text}, nil},
		{deltaWire{ReasoningContent: "think \t"}, nil},
		{deltaWire{ToolCalls: []toolDeltaWire{{Index: 1, ID: "call_1", Type: "function", Function: toolFnWire{Name: "f", Arguments: `{"a":1}`}}}}, nil},
		{deltaWire{Role: "assistant", Content: &text, ReasoningContent: "r", ToolCalls: []toolDeltaWire{{Function: toolFnWire{Arguments: ""}}}}, nil},
		{deltaWire{}, &stop},
	}
	for _, s := range streams {
		for _, tc := range deltas {
			c := chunkWire{answerHead: s.head(), Choices: []chunkChoice{{Index: 0, Delta: tc.d, FinishReason: tc.finish}}}
			if s.IncludeUsage {
				c.Usage = nullJSON
			}
			if got, want := s.chunk(tc.d, tc.finish), sseData(c); string(got) != string(want) {
				t.Errorf("chunk:\n got %s\nwant %s", got, want)
			}
		}
	}
}

// BenchmarkChatStreamAppend renders a translated stream's content chunks
// (the edge's per-chunk work on the normalized path).
func BenchmarkChatStreamAppend(b *testing.B) {
	s := NewChatStream("chatcmpl-1", "model", 1700000000, true)
	ev := execution.RunEvent{Type: execution.EventTypeDelta, Delta: "token text "}
	dst := make([]byte, 0, 1024)
	b.ReportAllocs()
	for b.Loop() {
		dst = s.Append(dst[:0], ev)
	}
	if len(dst) == 0 {
		b.Fatal("nothing rendered")
	}
}
