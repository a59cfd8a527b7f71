package eventstream

import (
	"testing"

	"github.com/iopgw/iop/execution"
)

const messagesStream = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":10,\"cache_read_input_tokens\":4,\"output_tokens\":1}}}\n\n" +
	"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n" +
	"event: ping\ndata: {\"type\":\"ping\"}\n\n" +
	"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hello\"}}\n\n" +
	"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"tool_use\",\"id\":\"t\",\"name\":\"f\",\"input\":{}}}\n\n" +
	"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{}\"}}\n\n" +
	"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\"},\"usage\":{\"output_tokens\":7}}\n\n"

// TestObserveMessages: a Messages stream is done only at message_stop;
// its usage is message_start's input (cached input included) with
// message_delta's output; tool use and output bytes are seen.
func TestObserveMessages(t *testing.T) {
	o := NewObserver(DialectAnthropic, FormatSSE)
	o.Feed([]byte(messagesStream))
	if o.Done || o.Terminal() {
		t.Fatal("done before message_stop")
	}
	o.Feed([]byte("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"))
	want := execution.TokenUsage{PromptTokens: 14, CompletionTokens: 7, TotalTokens: 21, CachedTokens: 4}
	if !o.Done || o.Usage == nil || *o.Usage != want || !o.ToolCall || o.Output.Bytes != int64(len("Hello")+len("f")+len("{}")) {
		t.Fatalf("done %v usage %+v tool %v output %+v", o.Done, o.Usage, o.ToolCall, o.Output)
	}
}

func TestObserveMessagesError(t *testing.T) {
	o := NewObserver(DialectAnthropic, FormatSSE)
	o.Feed([]byte("event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n"))
	if o.Err == nil || o.Err.Status != 529 || o.Err.Type != "overloaded_error" || o.Err.Message != "Overloaded" || !o.FirstIsError {
		t.Fatalf("%+v", o.Err)
	}
}

func TestMessagesBodyOutputAndUsage(t *testing.T) {
	body := []byte(`{"type":"message","content":[{"type":"text","text":"abc"},{"type":"tool_use","name":"f","input":{"a":1}}],"usage":{"input_tokens":3,"output_tokens":2}}`)
	if o := BodyOutput(body); o.Bytes != int64(len("abc")+len("f")+len(`{"a":1}`)) {
		t.Fatalf("%+v", o)
	}
	if u := ReadAnswer(body).Usage; u == nil || u.PromptTokens != 3 || u.CompletionTokens != 2 || u.TotalTokens != 5 {
		t.Fatalf("%+v", u)
	}
}
