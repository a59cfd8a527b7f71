package httpx

import (
	"strings"
	"testing"
)

func TestUsageSniffer(t *testing.T) {
	tests := []struct {
		name, ct string
		chunks   []string
		want     int64 // total tokens; 0 = none
	}{
		{"chat sse split", "text/event-stream", []string{"data: {\"choices\":[]}\n\ndata: {\"choices\":[],\"us", "age\":{\"prompt_tokens\":9,\"completion_tokens\":6,\"total_tokens\":15}}\n\ndata: [DONE]\n\n"}, 15},
		{"responses completed", "text/event-stream; charset=utf-8", []string{"event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"usage\":{\"input_tokens\":5,\"output_tokens\":2,\"total_tokens\":7}}}\n\n"}, 7},
		{"json body", "application/json", []string{`{"choices":[],"usage":{"prompt_tokens":1,`, `"completion_tokens":2,"total_tokens":3}}`}, 3},
		{"ollama ndjson", "application/x-ndjson", []string{"{\"done\":false}\n{\"done\":true,\"prompt_eval_count\":4,\"eval_count\":5}\n"}, 9},
		{"null usage", "text/event-stream", []string{"data: {\"usage\":null}\n\n"}, 0},
		{"binary", "application/octet-stream", []string{`{"usage":{"total_tokens":3}}`}, 0},
		{"chat spaced JSON, data: without space", "text/event-stream", []string{"data:{\"choices\": [], \"usage\": {\"prompt_tokens\": 17, \"completion_tokens\": 23}}\r\n\r\ndata:[DONE]\r\n\r\n"}, 40},
		{"usage-like text in content is not usage", "text/event-stream", []string{"data: {\"choices\":[{\"delta\":{\"content\":\"\\\"usage\\\":{\\\"total_tokens\\\":5}\"}}]}\n\n"}, 0},
		{"ollama spaced", "application/x-ndjson", []string{"{\"done\": true, \"prompt_eval_count\": 1, \"eval_count\": 2}"}, 3},
	}
	for _, tt := range tests {
		path := "/v1/chat/completions"
		switch {
		case strings.HasPrefix(tt.name, "responses"):
			path = "/v1/responses"
		case strings.HasPrefix(tt.name, "ollama"):
			path = "/api/chat"
		}
		s := NewUsageSniffer(tt.ct, path)
		for _, c := range tt.chunks {
			s.Write([]byte(c))
		}
		u := s.Usage()
		switch {
		case tt.want == 0 && u != nil:
			t.Errorf("%s: usage %+v, want none", tt.name, u)
		case tt.want != 0 && (u == nil || u.TotalTokens != tt.want):
			t.Errorf("%s: usage %+v, want total %d", tt.name, u, tt.want)
		}
	}
}
