package ollama

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/iopgw/iop/execution"
)

func TestDecode(t *testing.T) {
	r, e := Decode([]byte(`{"model":"llama3.2","messages":[{"role":"user","content":"hi","images":["AAAA"]}],"options":{"temperature":0.1,"num_predict":5}}`), false, 0)
	if e != nil {
		t.Fatal(e)
	}
	if !r.Stream || r.Model != "llama3.2" || r.Messages[0].Images[0] != "AAAA" || *r.Params.MaxTokens != 5 {
		t.Fatalf("decoded %+v", r)
	}
	r, e = Decode([]byte(`{"model":"m","prompt":"p","system":"s","stream":false}`), true, 0)
	if e != nil || r.Stream || len(r.Messages) != 2 || r.Messages[1].Content != "p" {
		t.Fatalf("generate decoded %+v %v", r, e)
	}
	for _, bad := range []string{``, `{}`, `{"model":""}`, `{"model":"m","messages":{}}`, `{"model":"m","model":"n","messages":[]}`, "{\"model\":\"\xff\"}"} {
		if _, e := Decode([]byte(bad), false, 0); e == nil || e.Status != 400 || !strings.HasPrefix(string(e.Body()), `{"error":"`) {
			t.Errorf("Decode(%q) = %v", bad, e)
		}
	}
	if got := string(ModelNotFound("missing").Body()); got != `{"error":"model 'missing' not found"}` {
		t.Fatalf("404 body %s", got)
	}
}

func TestStreamNDJSON(t *testing.T) {
	s := NewStream("m", false, time.Now())
	var out []byte
	for _, ev := range []execution.RunEvent{
		{Type: execution.EventTypeStart},
		{Type: execution.EventTypeDelta, Delta: "Hel"},
		{Type: execution.EventTypeDelta, Delta: "lo"},
		{Type: execution.EventTypeDelta, ToolCalls: []execution.ToolCallDelta{{Index: 0, Name: "f", Arguments: `{"a":`}}},
		{Type: execution.EventTypeDelta, ToolCalls: []execution.ToolCallDelta{{Index: 0, Arguments: `1}`}}},
		{Type: execution.EventTypeComplete, Usage: &execution.TokenUsage{PromptTokens: 2, CompletionTokens: 3}},
	} {
		out = s.Append(out, ev)
	}
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(lines) != 4 {
		t.Fatalf("%d lines: %s", len(lines), out)
	}
	var last struct {
		Done       bool   `json:"done"`
		DoneReason string `json:"done_reason"`
		EvalCount  int64  `json:"eval_count"`
	}
	if err := json.Unmarshal([]byte(lines[3]), &last); err != nil || !last.Done || last.DoneReason != "stop" || last.EvalCount != 3 {
		t.Fatalf("final line %s", lines[3])
	}
	if !strings.Contains(lines[2], `"tool_calls":[{"function":{"arguments":{"a":1},"name":"f"}}]`) {
		t.Fatalf("tool line %s", lines[2])
	}
}

func TestGenerateFinal(t *testing.T) {
	s := NewStream("m", true, time.Now())
	s.Add(execution.RunEvent{Type: execution.EventTypeDelta, Delta: "abc"})
	b := s.Final(execution.RunEvent{Type: execution.EventTypeComplete, FinishReason: "length"})
	var v map[string]any
	if err := json.Unmarshal(b, &v); err != nil || v["response"] != "abc" || v["done"] != true || v["done_reason"] != "length" {
		t.Fatalf("final %s", b)
	}
}
