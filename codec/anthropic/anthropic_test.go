package anthropic

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/iopgw/iop/execution"
)

func TestDecodeRequiresWhatTheAPIRequires(t *testing.T) {
	for body, want := range map[string]string{
		`{"max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`:                  "model",
		`{"model":"m","messages":[{"role":"user","content":"hi"}]}`:                     "max_tokens",
		`{"model":"m","max_tokens":-1,"messages":[{"role":"user","content":"hi"}]}`:     "max_tokens",
		`{"model":"m","max_tokens":5}`:                                                  "messages",
		`{"model":"m","max_tokens":5,"messages":[{"role":"system","content":"hi"}]}`:    "role",
		`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":7}]}`:         "content",
		`{"model":"m","max_tokens":"five","messages":[{"role":"user","content":"hi"}]}`: "valid",
	} {
		_, e := Decode([]byte(body))
		if e == nil || e.Status != http.StatusBadRequest || e.Type != TypeInvalidRequest || !strings.Contains(e.Message, want) {
			t.Errorf("%s: %v, want a 400 naming %s", body, e, want)
		}
	}
	if _, e := DecodeCount([]byte(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`)); e != nil {
		t.Errorf("count_tokens needs no max_tokens: %v", e)
	}
}

func TestDecodeNeutralForm(t *testing.T) {
	r, e := Decode([]byte(`{"model":"m","max_tokens":9,"stream":true,"system":[{"type":"text","text":"be "},{"type":"text","text":"brief"}],
		"temperature":0.2,"stop_sequences":["x"],"messages":[
		{"role":"user","content":[{"type":"text","text":"look"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"aGk="}}]},
		{"role":"assistant","content":[{"type":"tool_use","id":"tu1","name":"f","input":{"a":1}}]},
		{"role":"user","content":[{"type":"tool_result","tool_use_id":"tu1","content":"ok"}]}]}`))
	if e != nil {
		t.Fatal(e)
	}
	if !r.Stream || r.MaxTokens != 9 || *r.Run.Params.MaxTokens != 9 || *r.Run.Params.Temperature != 0.2 || r.Run.Params.Stop[0] != "x" {
		t.Fatalf("head: %+v %+v", r, r.Run.Params)
	}
	m := r.Run.Messages
	if len(m) != 5 || m[0].Role != "system" || m[0].Content != "be brief" || m[1].Content != "look" || m[1].Images[0] != "data:image/png;base64,aGk=" ||
		m[2].ToolCalls[0].ID != "tu1" || m[2].ToolCalls[0].Arguments != `{"a":1}` || m[4].Role != "tool" || m[4].ToolCallID != "tu1" || m[4].Content != "ok" {
		t.Fatalf("messages: %+v", m)
	}
}

// TestStreamEventSequence: the opening events come first, once, with the
// first output; the answer ends with content_block_stop, message_delta
// (stop reason, usage) and message_stop.
func TestStreamEventSequence(t *testing.T) {
	s := NewStream("msg_1", "m")
	var out []byte
	for _, ev := range []execution.RunEvent{{Type: execution.EventTypeStart}, {Type: execution.EventTypeDelta, Delta: "Hel"},
		{Type: execution.EventTypeDelta, Delta: "lo"}, {Type: execution.EventTypeComplete, FinishReason: "length",
			Usage: &execution.TokenUsage{PromptTokens: 3, CompletionTokens: 2}}} {
		out = s.Append(out, ev)
	}
	var names []string
	var last map[string]any
	for _, block := range strings.Split(strings.TrimSpace(string(out)), "\n\n") {
		name, data, _ := strings.Cut(block, "\ndata: ")
		names = append(names, strings.TrimPrefix(name, "event: "))
		if err := json.Unmarshal([]byte(data), &last); err != nil {
			t.Fatal(err)
		}
		if last["type"] != names[len(names)-1] {
			t.Fatalf("event %s carries type %v", names[len(names)-1], last["type"])
		}
		if names[len(names)-1] == "message_delta" {
			if last["delta"].(map[string]any)["stop_reason"] != "max_tokens" || last["usage"].(map[string]any)["output_tokens"] != 2.0 {
				t.Fatalf("message_delta: %v", last)
			}
		}
	}
	want := "message_start content_block_start ping content_block_delta content_block_delta content_block_stop message_delta message_stop"
	if strings.Join(names, " ") != want {
		t.Fatalf("events %v, want %s", names, want)
	}
}

func TestAccumulatorBody(t *testing.T) {
	a := NewAccumulator("msg_1", "m")
	a.Add(execution.RunEvent{Type: execution.EventTypeDelta, Delta: "hi"})
	a.Add(execution.RunEvent{Type: execution.EventTypeComplete, FinishReason: "stop", Usage: &execution.TokenUsage{PromptTokens: 1, CompletionTokens: 1}})
	var m struct {
		Type       string `json:"type"`
		Content    []struct{ Type, Text string }
		StopReason string `json:"stop_reason"`
		Usage      struct {
			In  int `json:"input_tokens"`
			Out int `json:"output_tokens"`
		}
	}
	if err := json.Unmarshal(a.Body(), &m); err != nil || m.Type != "message" || m.Content[0].Text != "hi" || m.StopReason != "end_turn" || m.Usage.In != 1 || m.Usage.Out != 1 {
		t.Fatalf("%s %v", a.Body(), err)
	}
}

func TestErrorShapes(t *testing.T) {
	e := New(529, "busy")
	if string(e.Body()) != `{"type":"error","error":{"type":"overloaded_error","message":"busy"}}` {
		t.Fatalf("%s", e.Body())
	}
	if !strings.HasPrefix(string(e.SSE()), "event: error\ndata: {") || !strings.HasSuffix(string(e.SSE()), "}\n\n") {
		t.Fatalf("%q", e.SSE())
	}
	for _, s := range []int{400, 401, 403, 404, 413, 429, 500, 529} {
		if got := StatusForType(TypeForStatus(s)); got != s {
			t.Errorf("status %d → %s → %d", s, TypeForStatus(s), got)
		}
	}
}

// TestDecodeNamesWhatTheNeutralFormLost: a block the neutral form cannot
// carry is named (the first of them); text, images with data or a URL,
// tool blocks and earlier turns' thinking are carried or left out as the
// API leaves them.
func TestDecodeNamesWhatTheNeutralFormLost(t *testing.T) {
	for content, lost := range map[string]string{
		`"hi"`: "",
		`[{"type":"text","text":"hi"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AA=="}},{"type":"image","source":{"type":"url","url":"https://x/y.png"}}]`: "",
		`[{"type":"thinking","thinking":"t","signature":"s"},{"type":"redacted_thinking","data":"d"},{"type":"text","text":"hi"}]`:                                                          "",
		`[{"type":"text","text":"hi"},{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"AA=="}},{"type":"search_result"}]`:                                "messages.0.content.1: a document block",
		`[{"type":"image","source":{"type":"file","file_id":"file_1"}}]`:                                                                                                                    "messages.0.content.0: an image by file id",
	} {
		r, e := Decode([]byte(`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":` + content + `}]}`))
		if e != nil || r.Lost != lost {
			t.Errorf("%s: lost %q, want %q (%v)", content, r.Lost, lost, e)
		}
	}
}

// TestStopSequenceReported: a stop sequence ends the answer as the API
// reports it — stop_reason stop_sequence and the sequence — when the
// renderer was told which (an upstream serving Messages) or when a Chat
// upstream named, with its "stop", one the request asked for; otherwise
// the finish maps as it always does, and a sequence the request did not
// ask for is not shown.
func TestStopSequenceReported(t *testing.T) {
	asked := []string{"###", "END"}
	for _, tc := range []struct {
		name   string
		ev     execution.RunEvent
		known  string
		reason string
		seq    any
	}{
		{"named and asked", execution.RunEvent{FinishReason: "stop", StopSequence: "END"}, "", "stop_sequence", "END"},
		{"named, not asked", execution.RunEvent{FinishReason: "stop", StopSequence: "</s>"}, "", "end_turn", nil},
		{"named on a length finish", execution.RunEvent{FinishReason: "length", StopSequence: "###"}, "", "max_tokens", nil},
		{"none named", execution.RunEvent{FinishReason: "stop"}, "", "end_turn", nil},
		{"known", execution.RunEvent{FinishReason: "stop_sequence"}, "###", "stop_sequence", "###"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ev := tc.ev
			ev.Type = execution.EventTypeComplete
			if reason, seq := stopped(ev, tc.known, asked); reason != tc.reason || seq != tc.seq {
				t.Errorf("stopped: %q %v, want %q %v", reason, seq, tc.reason, tc.seq)
			}
			a := NewAccumulator("msg_1", "m")
			a.StopSequence, a.Stops = tc.known, asked
			a.Add(ev)
			var m struct {
				StopReason   string `json:"stop_reason"`
				StopSequence any    `json:"stop_sequence"`
			}
			if err := json.Unmarshal(a.Body(), &m); err != nil || m.StopReason != tc.reason || m.StopSequence != tc.seq {
				t.Errorf("body %s", a.Body())
			}
			s := NewStream("msg_1", "m")
			s.StopSequence, s.Stops = tc.known, asked
			out := string(s.Append(nil, ev))
			want, _ := json.Marshal(map[string]any{"stop_reason": tc.reason, "stop_sequence": tc.seq})
			if !strings.Contains(out, string(want)) {
				t.Errorf("stream %s, want the delta %s", out, want)
			}
		})
	}
}
