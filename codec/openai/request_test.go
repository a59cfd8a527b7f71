package openai

import (
	"reflect"
	"strings"
	"testing"
)

func TestDecodeChatRequest(t *testing.T) {
	ok := `{"model":"m","messages":[{"role":"user","content":"hi"}]}`
	tests := []struct {
		name      string
		body      string
		wantParam string // "" with wantErr=false means success
		wantErr   bool
	}{
		{"minimal", ok, "", false},
		{"stream with usage", `{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`, "", false},
		{"parts and image", `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA"}}]}]}`, "", false},
		{"tools", `{"model":"m","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f","parameters":{}}}]}`, "", false},
		{"tool turn", `{"model":"m","messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c","content":"42"}]}`, "", false},
		{"unknown fields pass", `{"model":"m","messages":[{"role":"user","content":"hi"}],"service_tier":"auto","x_custom":1}`, "", false},
		{"malformed", `{"model":`, "", true},
		{"missing model", `{"messages":[{"role":"user","content":"hi"}]}`, "model", true},
		{"empty model", `{"model":"","messages":[{"role":"user","content":"hi"}]}`, "model", true},
		{"model wrong type", `{"model":5,"messages":[]}`, "model", true},
		{"stream yes", `{"model":"m","stream":"yes","messages":[{"role":"user","content":"hi"}]}`, "stream", true},
		{"messages object", `{"model":"m","messages":{}}`, "messages", true},
		{"messages missing", `{"model":"m"}`, "messages", true},
		{"messages empty", `{"model":"m","messages":[]}`, "messages", true},
		{"bad role", `{"model":"m","messages":[{"role":"boss","content":"hi"}]}`, "messages[0].role", true},
		{"tool without id", `{"model":"m","messages":[{"role":"tool","content":"x"}]}`, "messages[0].tool_call_id", true},
		{"user without content", `{"model":"m","messages":[{"role":"user"}]}`, "messages[0].content", true},
		{"max_tokens overflow", `{"model":"m","max_tokens":1e999,"messages":[{"role":"user","content":"hi"}]}`, "max_tokens", true},
		{"max_tokens negative", `{"model":"m","max_tokens":-1,"messages":[{"role":"user","content":"hi"}]}`, "max_tokens", true},
		{"n huge", `{"model":"m","n":1000000000,"messages":[{"role":"user","content":"hi"}]}`, "n", true},
		{"temperature string", `{"model":"m","temperature":"NaN","messages":[{"role":"user","content":"hi"}]}`, "temperature", true},
		{"temperature range", `{"model":"m","temperature":3,"messages":[{"role":"user","content":"hi"}]}`, "temperature", true},
		{"stream_options without stream", `{"model":"m","stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`, "stream_options", true},
		{"giant stop", `{"model":"m","stop":["a","b","c","d","e"],"messages":[{"role":"user","content":"hi"}]}`, "stop", true},
		{"giant tools", `{"model":"m","tools":[` + strings.Repeat(`{"type":"function","function":{"name":"f"}},`, 128) + `{"type":"function","function":{"name":"f"}}],"messages":[{"role":"user","content":"hi"}]}`, "tools", true},
		{"duplicate model", `{"model":"a","model":"b","messages":[{"role":"user","content":"hi"}]}`, "", true},
		{"duplicate stream", `{"model":"a","stream":true,"stream":false,"messages":[{"role":"user","content":"hi"}]}`, "", true},
		{"lone surrogate", `{"model":"m","messages":[{"role":"user","content":"\ud800"}]}`, "", true},
		{"invalid utf8", "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"\xc3\x28\"}]}", "", true},
		{"part without type", `{"model":"m","messages":[{"role":"user","content":[{"text":"x"}]}]}`, "messages[0].content[0].type", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, e := DecodeChatRequest([]byte(tt.body), Limits{})
			sameAsCheck(t, []byte(tt.body), req, e)
			if !tt.wantErr {
				if e != nil {
					t.Fatalf("unexpected error %s", e.Body())
				}
				if req.Model != "m" || len(req.Messages) == 0 {
					t.Fatalf("decoded %+v", req)
				}
				return
			}
			if e == nil {
				t.Fatalf("accepted %s", tt.body)
			}
			if e.Status != 400 || e.Type != TypeInvalidRequest {
				t.Fatalf("error %d %s, want 400 invalid_request_error", e.Status, e.Type)
			}
			if tt.wantParam != "" && e.Param != tt.wantParam {
				t.Fatalf("param %q, want %q (%s)", e.Param, tt.wantParam, e.Message)
			}
		})
	}
}

func TestDecodeChatRequestValues(t *testing.T) {
	req, e := DecodeChatRequest([]byte(`{"model":"m","stream":true,"stream_options":{"include_usage":true},"temperature":0.2,"max_completion_tokens":9,"stop":"END","messages":[{"role":"system","content":"s"},{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}]}`), Limits{})
	if e != nil {
		t.Fatal(e)
	}
	if !req.Stream || !req.IncludeUsage || *req.Params.Temperature != 0.2 || *req.Params.MaxTokens != 9 || req.Params.Stop[0] != "END" || req.Messages[1].Content != "ab" {
		t.Fatalf("decoded %+v", req)
	}
	if rr := req.RunRequest(); rr.Model != "m" || len(rr.Messages) != 2 {
		t.Fatalf("run request %+v", rr)
	}
}

// TestChatContentPartsPassForOpenAIProviders: input_audio and file parts
// are not refused at the edge (OpenAI-compatible providers get the body);
// the neutral form notes that it cannot carry them.
func TestChatContentPartsPassForOpenAIProviders(t *testing.T) {
	body := `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"hi"},{"type":"input_audio","input_audio":{"data":"AA==","format":"wav"}},{"type":"file","file":{"file_data":"data:application/pdf;base64,AA==","filename":"a.pdf"}}]}]}`
	r, e := DecodeChatRequest([]byte(body), Limits{})
	if e != nil {
		t.Fatal(e.Message)
	}
	if r.Neutral == nil || r.Neutral.Param != "messages[0].content[1].type" || r.Messages[0].Content != "hi" {
		t.Fatalf("decoded %+v, neutral %+v", r, r.Neutral)
	}
}

func TestDecodeResponsesRequest(t *testing.T) {
	tests := []struct {
		name    string
		body    string
		wantErr string
		check   func(*ResponsesRequest) bool
	}{
		{"string input", `{"model":"m","input":"hi"}`, "", func(r *ResponsesRequest) bool { return r.Messages[0].Content == "hi" && r.Messages[0].Role == "user" }},
		{"instructions", `{"model":"m","instructions":"be brief","input":"hi"}`, "", func(r *ResponsesRequest) bool { return r.Messages[0].Role == "system" && len(r.Messages) == 2 }},
		{"items", `{"model":"m","input":[{"role":"user","content":[{"type":"input_text","text":"a"}]},{"type":"function_call","call_id":"c","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"c","output":"42"}]}`, "",
			func(r *ResponsesRequest) bool {
				return len(r.Messages) == 3 && r.Messages[2].Role == "tool" && r.Messages[2].Content == "42"
			}},
		{"function tools converted", `{"model":"m","input":"hi","tools":[{"type":"function","name":"f","parameters":{"type":"object"}}]}`, "",
			func(r *ResponsesRequest) bool {
				return !r.ServerTools && r.HasTools && strings.Contains(string(r.Params.Tools), `"function":{"name":"f"`)
			}},
		{"server tools flagged", `{"model":"m","input":"hi","tools":[{"type":"web_search"}]}`, "", func(r *ResponsesRequest) bool { return r.ServerTools }},
		{"missing model", `{"input":"hi"}`, "model", nil},
		{"missing input", `{"model":"m"}`, "input", nil},
		{"background", `{"model":"m","input":"hi","background":true}`, "background", nil},
		{"item only the native API takes", `{"model":"m","input":[{"type":"computer_call"}]}`, "", func(r *ResponsesRequest) bool {
			return r.Neutral != nil && r.Neutral.Param == "input[0].type"
		}},
		{"an earlier turn's reasoning left out", `{"model":"m","input":[{"role":"user","content":"a"},{"type":"reasoning","id":"rs_1","summary":[]},{"role":"user","content":"b"}]}`, "", func(r *ResponsesRequest) bool {
			return r.Neutral == nil && len(r.Messages) == 2 && r.Messages[1].Content == "b"
		}},
		{"max_output_tokens", `{"model":"m","input":"hi","max_output_tokens":0}`, "max_output_tokens", nil},
		{"duplicate keys", `{"model":"m","input":"a","input":"b"}`, "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, e := DecodeResponsesRequest([]byte(tt.body), Limits{})
			if tt.check != nil {
				if e != nil {
					t.Fatalf("error %s", e.Body())
				}
				if !tt.check(r) {
					t.Fatalf("decoded %+v", r)
				}
				return
			}
			if e == nil || e.Status != 400 {
				t.Fatalf("accepted or wrong status: %v", e)
			}
			if tt.wantErr != "" && e.Param != tt.wantErr {
				t.Fatalf("param %q, want %q", e.Param, tt.wantErr)
			}
		})
	}
}

// sameAsCheck: CheckChatRequest refuses what DecodeChatRequest refuses,
// with the same error, and otherwise decodes the same request without
// its messages.
func sameAsCheck(t *testing.T, body []byte, req *ChatRequest, e *Error) {
	t.Helper()
	c, ce := CheckChatRequest(body, Limits{})
	if !reflect.DeepEqual(e, ce) {
		t.Fatalf("decode error %+v, check error %+v", e, ce)
	}
	if req == nil {
		return
	}
	if c.Messages != nil {
		t.Fatalf("check kept messages: %+v", c.Messages)
	}
	want := *req
	want.Messages = nil
	if !reflect.DeepEqual(&want, c) {
		t.Fatalf("checked %+v, decoded %+v", c, req)
	}
}

func FuzzDecodeChatRequest(f *testing.F) {
	f.Add([]byte(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`))
	f.Add([]byte(`{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"a"}]}],"stop":["x"]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		req, e := DecodeChatRequest(b, Limits{})
		sameAsCheck(t, b, req, e)
		if (req == nil) == (e == nil) {
			t.Fatalf("exactly one of request and error expected: %v %v", req, e)
		}
		if e != nil && (e.Status != 400 || len(e.Body()) == 0) {
			t.Fatalf("error %+v", e)
		}
	})
}

func FuzzDecodeResponsesRequest(f *testing.F) {
	f.Add([]byte(`{"model":"m","input":"hi"}`))
	f.Add([]byte(`{"model":"m","input":[{"role":"user","content":"x"}],"tools":[{"type":"function","name":"f"}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		req, e := DecodeResponsesRequest(b, Limits{})
		if (req == nil) == (e == nil) {
			t.Fatalf("exactly one of request and error expected")
		}
		if e != nil && e.Status != 400 {
			t.Fatalf("status %d", e.Status)
		}
	})
}
