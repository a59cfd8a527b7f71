package eventstream

import (
	"strings"
	"testing"
)

// TestObservedUsage: usage is read from what passes by — a stream's
// events (split anywhere, spaced JSON, any dialect) or a whole JSON body
// — and is absent, never zero, when the answer reported none.
func TestObservedUsage(t *testing.T) {
	tests := []struct {
		name   string
		d      Dialect
		f      Format
		json   bool // a whole body, not a stream
		chunks []string
		want   int64 // total tokens; 0 = none
	}{
		{"chat sse split", DialectChat, FormatSSE, false, []string{"data: {\"choices\":[]}\n\ndata: {\"choices\":[],\"us", "age\":{\"prompt_tokens\":9,\"completion_tokens\":6,\"total_tokens\":15}}\n\ndata: [DONE]\n\n"}, 15},
		{"responses completed", DialectResponses, FormatSSE, false, []string{"event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"usage\":{\"input_tokens\":5,\"output_tokens\":2,\"total_tokens\":7}}}\n\n"}, 7},
		{"json body", DialectChat, FormatSSE, true, []string{`{"choices":[],"usage":{"prompt_tokens":1,`, `"completion_tokens":2,"total_tokens":3}}`}, 3},
		{"ollama ndjson", DialectOllama, FormatNDJSON, false, []string{"{\"done\":false}\n{\"done\":true,\"prompt_eval_count\":4,\"eval_count\":5}\n"}, 9},
		{"ollama json body", DialectOllama, FormatNDJSON, true, []string{`{"done":true,"prompt_eval_count":4,"eval_count":5}`}, 9},
		{"null usage", DialectChat, FormatSSE, false, []string{"data: {\"usage\":null}\n\n"}, 0},
		{"chat spaced JSON, data: without space", DialectChat, FormatSSE, false, []string{"data:{\"choices\": [], \"usage\": {\"prompt_tokens\": 17, \"completion_tokens\": 23}}\r\n\r\ndata:[DONE]\r\n\r\n"}, 40},
		{"usage-like text in content is not usage", DialectChat, FormatSSE, false, []string{"data: {\"choices\":[{\"delta\":{\"content\":\"\\\"usage\\\":{\\\"total_tokens\\\":5}\"}}]}\n\n"}, 0},
		{"ollama spaced", DialectOllama, FormatNDJSON, false, []string{"{\"done\": true, \"prompt_eval_count\": 1, \"eval_count\": 2}"}, 3},
		{"json body without usage", DialectChat, FormatSSE, true, []string{`{"choices":[]}`}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var total *int64
			if tt.json {
				if u := ReadAnswer([]byte(strings.Join(tt.chunks, ""))).Usage; u != nil {
					total = &u.TotalTokens
				}
			} else {
				o := NewObserver(tt.d, tt.f)
				for _, c := range tt.chunks {
					o.Feed([]byte(c))
				}
				o.Close()
				if o.Usage != nil {
					total = &o.Usage.TotalTokens
				}
			}
			switch {
			case tt.want == 0 && total != nil:
				t.Errorf("usage total %d, want none", *total)
			case tt.want != 0 && (total == nil || *total != tt.want):
				t.Errorf("usage %v, want total %d", total, tt.want)
			}
		})
	}
}

// TestObservedOutput: the observer counts the generated text of every
// dialect's events (content, reasoning, refusals, tool calls) and the
// events that carried some; BodyOutput does the same for whole answers.
func TestObservedOutput(t *testing.T) {
	for _, tt := range []struct {
		name   string
		d      Dialect
		f      Format
		stream string
		want   Output
	}{
		{"chat", DialectChat, FormatSSE, "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\"}}]}\n\n" +
			"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hé\"}}]}\n\n" +
			"data: {\"choices\":[{\"index\":0,\"delta\":{\"reasoning_content\":\"hmm\"}}]}\n\n" +
			"data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"name\":\"f\",\"arguments\":\"{}\"}}]}}]}\n\n" +
			"data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n", Output{Bytes: 3 + 3 + 3, Events: 3}},
		{"responses", DialectResponses, FormatSSE, "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"abcd\"}\n\n" +
			"event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{}}\n\n", Output{Bytes: 4, Events: 1}},
		{"ollama", DialectOllama, FormatNDJSON, "{\"message\":{\"role\":\"assistant\",\"content\":\"ab\"},\"done\":false}\n" +
			"{\"message\":{\"role\":\"assistant\",\"content\":\"\"},\"done\":true}\n", Output{Bytes: 2, Events: 1}},
	} {
		o := NewObserver(tt.d, tt.f)
		o.Feed([]byte(tt.stream))
		o.Close()
		if o.Output != tt.want {
			t.Errorf("%s: %+v, want %+v", tt.name, o.Output, tt.want)
		}
	}
	for body, want := range map[string]int64{
		`{"choices":[{"message":{"content":"hello"}}]}`:                                   5,
		`{"output":[{"type":"message","content":[{"type":"output_text","text":"abc"}]}]}`: 3,
		`{"message":{"content":"xy"},"done":true}`:                                        2,
		`{"data":[{"embedding":[0.1]}]}`:                                                  0,
	} {
		if got := BodyOutput([]byte(body)); got.Bytes != want || got.Events != 0 {
			t.Errorf("BodyOutput(%s) = %+v, want %d bytes", body, got, want)
		}
	}
}

// TestReadAnswer: one parse of a whole body says whether it is whole
// JSON, the error it reports instead of an answer (not one an answer
// object carries), its usage, and what BodyOutput reads of it.
func TestReadAnswer(t *testing.T) {
	for _, tc := range []struct {
		body        string
		whole       bool
		errStatus   int // of the error reported instead of an answer; 0: none
		totalTokens int64
	}{
		{`{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"hello there"},"finish_reason":"stop"}],"usage":{"prompt_tokens":8,"completion_tokens":2,"total_tokens":10}}`, true, 0, 10},
		{`{"object":"response","output":[{"type":"message","content":[{"type":"output_text","text":"hi"}]}],"usage":{"input_tokens":3,"output_tokens":1}}`, true, 0, 4},
		{`{"object":"response","status":"failed","error":{"code":"server_error","message":"boom"},"output":[]}`, true, 0, 0},
		{`{"type":"message","content":[{"type":"text","text":"hey"}],"usage":{"input_tokens":4,"output_tokens":2}}`, true, 0, 6},
		{`{"model":"m","message":{"role":"assistant","content":"ok"},"done":true,"prompt_eval_count":5,"eval_count":1}`, true, 0, 6},
		{`{"object":"list","data":[{"embedding":[0.1]}],"usage":{"prompt_tokens":2,"total_tokens":2}}`, true, 0, 2},
		{`{"error":{"message":"slow down","type":"rate_limit_error"}}`, true, 429, 0},
		{`{"error":"model is loading"}`, true, 500, 0},
		{`{"object":"error","message":"bad","type":"invalid_request_error"}`, true, 400, 0},
		{`{"type":"error","error":{"type":"overloaded_error","message":"busy"}}`, true, 503, 0},
		{`{"error":null,"choices":[]}`, true, 0, 0},
		{`{"choices":[]}`, true, 0, 0}, {`[1,2]`, true, 0, 0},
		{`{"choices":[{"message":{"content":"hel`, false, 0, 0}, {`not json`, false, 0, 0}, {``, false, 0, 0},
	} {
		a := ReadAnswer([]byte(tc.body))
		var total int64
		if a.Usage != nil {
			total = a.Usage.TotalTokens
		}
		errStatus := 0
		if a.Err != nil {
			errStatus = a.Err.Status
		}
		if a.Whole != tc.whole || errStatus != tc.errStatus || total != tc.totalTokens || a.Output != BodyOutput([]byte(tc.body)) {
			t.Errorf("%s: whole %v, error %+v, total %d, output %+v", tc.body, a.Whole, a.Err, total, a.Output)
		}
	}
}
