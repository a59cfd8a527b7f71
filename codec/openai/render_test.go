package openai

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/iopgw/iop/execution"
	"github.com/iopgw/iop/internal/testing/oaispec"
)

func sampleEvents(withTools bool) []execution.RunEvent {
	evs := []execution.RunEvent{
		{Type: execution.EventTypeStart, Model: "iop-sim"},
		{Type: execution.EventTypeDelta, Reasoning: "thinking"},
		{Type: execution.EventTypeDelta, Delta: "Hello"},
		{Type: execution.EventTypeDelta, Delta: " world"},
	}
	if withTools {
		evs = append(evs,
			execution.RunEvent{Type: execution.EventTypeDelta, ToolCalls: []execution.ToolCallDelta{{Index: 0, ID: "call_1", Name: "get_weather", Arguments: `{"city":`}}},
			execution.RunEvent{Type: execution.EventTypeDelta, ToolCalls: []execution.ToolCallDelta{{Index: 0, Arguments: `"Paris"}`}}},
		)
	}
	return append(evs, execution.RunEvent{Type: execution.EventTypeComplete, Usage: &execution.TokenUsage{PromptTokens: 5, CompletionTokens: 3}})
}

// sseEvents splits an SSE body into (event, data) pairs.
func sseEvents(t *testing.T, body []byte) [][2]string {
	t.Helper()
	var out [][2]string
	for _, block := range strings.Split(strings.TrimSuffix(string(body), "\n\n"), "\n\n") {
		var ev, data string
		for _, line := range strings.Split(block, "\n") {
			switch {
			case strings.HasPrefix(line, "event: "):
				ev = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				data = strings.TrimPrefix(line, "data: ")
			default:
				t.Fatalf("unexpected SSE line %q", line)
			}
		}
		out = append(out, [2]string{ev, data})
	}
	return out
}

func TestChatStreamMatchesSpec(t *testing.T) {
	for _, includeUsage := range []bool{false, true} {
		s := NewChatStream("chatcmpl-1", "m", 1700000000, includeUsage)
		var body []byte
		for _, ev := range sampleEvents(true) {
			body = s.Append(body, ev)
		}
		evs := sseEvents(t, body)
		if last := evs[len(evs)-1]; last[1] != "[DONE]" {
			t.Fatalf("last event %q, want [DONE]", last[1])
		}
		var text, args, finish string
		usageChunks := 0
		for _, ev := range evs[:len(evs)-1] {
			if err := oaispec.Validate("CreateChatCompletionStreamResponse", []byte(ev[1])); err != nil {
				t.Fatalf("chunk %s: %v", ev[1], err)
			}
			var c struct {
				Model   string `json:"model"`
				Usage   *UsageWire
				Choices []struct {
					Delta struct {
						Content   *string
						ToolCalls []struct{ Function struct{ Arguments string } } `json:"tool_calls"`
					}
					FinishReason *string `json:"finish_reason"`
				}
			}
			_ = json.Unmarshal([]byte(ev[1]), &c)
			if c.Model != "iop-sim" {
				t.Fatalf("model %q, want the start event's model", c.Model)
			}
			if strings.Contains(ev[1], `"usage"`) != includeUsage {
				t.Fatalf("usage key presence wrong in %s (include_usage=%v)", ev[1], includeUsage)
			}
			if len(c.Choices) == 0 {
				usageChunks++
				if c.Usage == nil || c.Usage.TotalTokens != 8 {
					t.Fatalf("usage chunk %s", ev[1])
				}
				continue
			}
			if d := c.Choices[0].Delta; d.Content != nil {
				text += *d.Content
			}
			for _, tc := range c.Choices[0].Delta.ToolCalls {
				args += tc.Function.Arguments
			}
			if f := c.Choices[0].FinishReason; f != nil {
				finish = *f
			}
		}
		if text != "Hello world" || args != `{"city":"Paris"}` || finish != "tool_calls" {
			t.Fatalf("text %q args %q finish %q", text, args, finish)
		}
		if want := map[bool]int{false: 0, true: 1}[includeUsage]; usageChunks != want {
			t.Fatalf("%d usage chunks, want %d", usageChunks, want)
		}
	}
}

func TestChatStreamHoldsRoleUntilOutput(t *testing.T) {
	s := NewChatStream("id", "m", 1, false)
	if out := s.Append(nil, execution.RunEvent{Type: execution.EventTypeStart}); len(out) != 0 || s.Started() {
		t.Fatalf("start rendered %q", out)
	}
	if out := s.Append(nil, execution.RunEvent{Type: execution.EventTypeDelta}); len(out) != 0 {
		t.Fatalf("empty delta rendered %q", out)
	}
	out := s.Append(nil, execution.RunEvent{Type: execution.EventTypeDelta, Delta: "x"})
	if evs := sseEvents(t, out); len(evs) != 2 || !strings.Contains(evs[0][1], `"role":"assistant"`) {
		t.Fatalf("first output %q", out)
	}
}

func TestChatAccumulatorMatchesSpec(t *testing.T) {
	for _, tools := range []bool{false, true} {
		a := NewChatAccumulator("chatcmpl-1", "m", 1700000000)
		for _, ev := range sampleEvents(tools) {
			a.Add(ev)
		}
		body := a.Body()
		if err := oaispec.Validate("CreateChatCompletionResponse", body); err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		var c struct {
			Model   string
			Choices []struct {
				Message struct {
					Content   *string
					ToolCalls []struct {
						Function struct{ Name, Arguments string }
					} `json:"tool_calls"`
				}
				FinishReason string `json:"finish_reason"`
			}
			Usage UsageWire
		}
		_ = json.Unmarshal(body, &c)
		if c.Model != "iop-sim" || *c.Choices[0].Message.Content != "Hello world" || c.Usage.TotalTokens != 8 {
			t.Fatalf("body %s", body)
		}
		if tools && (c.Choices[0].FinishReason != "tool_calls" || c.Choices[0].Message.ToolCalls[0].Function.Arguments != `{"city":"Paris"}`) {
			t.Fatalf("tool body %s", body)
		}
	}
}

func TestResponsesStreamMatchesSpec(t *testing.T) {
	temp := 0.5
	echo := ResponseEcho{Instructions: "be brief", Temperature: &temp}
	s := NewResponsesStream("resp_abc", "m", 1700000000, echo)
	var body []byte
	for _, ev := range sampleEvents(true) {
		body = s.Append(body, ev)
	}
	checkResponseEvents(t, body, "response.completed")

	// A committed stream that fails ends with error + response.failed.
	s = NewResponsesStream("resp_abd", "m", 1700000000, echo)
	body = s.Append(nil, execution.RunEvent{Type: execution.EventTypeDelta, Delta: "Hel"})
	body = s.AppendFailed(body, "response_stalled", "the provider stopped producing output")
	evs := checkResponseEvents(t, body, "response.failed")
	if evs[len(evs)-2][0] != "error" || !strings.Contains(evs[len(evs)-2][1], `"code":"response_stalled"`) {
		t.Fatalf("no typed error event before response.failed: %v", evs)
	}
}

// checkResponseEvents validates every event and the sequence numbers, and
// returns the events.
func checkResponseEvents(t *testing.T, body []byte, last string) [][2]string {
	t.Helper()
	evs := sseEvents(t, body)
	for i, ev := range evs {
		var head struct {
			Type string `json:"type"`
			Seq  *int   `json:"sequence_number"`
		}
		if err := json.Unmarshal([]byte(ev[1]), &head); err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		if head.Type != ev[0] {
			t.Fatalf("event name %q != data.type %q", ev[0], head.Type)
		}
		if head.Seq == nil || *head.Seq != i {
			t.Fatalf("event %d (%s) sequence_number %v", i, ev[0], head.Seq)
		}
		schema, ok := oaispec.ResponseEventSchema(head.Type)
		if !ok {
			t.Fatalf("no schema for %s", head.Type)
		}
		if err := oaispec.Validate(schema, []byte(ev[1])); err != nil {
			t.Fatalf("event %s: %v", ev[1], err)
		}
	}
	if evs[0][0] != "response.created" || evs[len(evs)-1][0] != last {
		t.Fatalf("first %s last %s", evs[0][0], evs[len(evs)-1][0])
	}
	return evs
}

func TestResponseAccumulatorMatchesSpec(t *testing.T) {
	for _, finish := range []string{"", "length"} {
		a := NewResponseAccumulator("resp_x", "m", 1700000000, ResponseEcho{})
		evs := sampleEvents(true)
		evs[len(evs)-1].FinishReason = finish
		for _, ev := range evs {
			a.Add(ev)
		}
		body := a.Body()
		if err := oaispec.Validate("Response", body); err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		want := `"status":"completed"`
		if finish == "length" {
			want = `"status":"incomplete"`
		}
		if !bytes.Contains(body, []byte(want)) || !bytes.Contains(body, []byte(`"text":"Hello world"`)) || !a.HasToolCalls() {
			t.Fatalf("body %s", body)
		}
	}
}

func TestErrorShapes(t *testing.T) {
	for _, e := range []*Error{InvalidRequest("messages", "bad"), ModelNotFound("gpt-x"), {Status: 500, Type: TypeServer, Message: "boom"}} {
		if err := oaispec.Validate("ErrorResponse", e.Body()); err != nil {
			t.Fatalf("%s: %v", e.Body(), err)
		}
	}
	if got := string(ModelNotFound("x").Body()); got != `{"error":{"message":"The model `+"`x`"+` does not exist or you do not have access to it.","type":"invalid_request_error","param":"model","code":"model_not_found"}}` {
		t.Fatalf("model_not_found body %s", got)
	}
	if got := string(InvalidRequest("", "m").Body()); got != `{"error":{"message":"m","type":"invalid_request_error","param":null,"code":null}}` {
		t.Fatalf("body %s", got)
	}
}
