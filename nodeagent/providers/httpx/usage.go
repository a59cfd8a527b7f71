package httpx

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/iopgw/iop/execution"
)

// maxSniffLine bounds what the sniffer buffers for one line or body; past
// it, usage is simply not observed (bytes still pass untouched).
const maxSniffLine = 4 << 20

// UsageSniffer observes token usage in a response body as it passes by,
// without changing it: the last SSE data line or NDJSON line (or the whole
// JSON body) that carries usage wins. Usage is observation data only.
type UsageSniffer struct {
	stream bool // SSE or NDJSON: line by line
	json   bool
	line   []byte
	over   bool
	usage  *execution.TokenUsage
}

// NewUsageSniffer returns a sniffer for a body of the given content type.
// Compressed or unknown bodies are not sniffed.
func NewUsageSniffer(contentType string) *UsageSniffer {
	ct := strings.ToLower(contentType)
	return &UsageSniffer{
		stream: strings.Contains(ct, "event-stream") || strings.Contains(ct, "ndjson"),
		json:   strings.Contains(ct, "json") && !strings.Contains(ct, "ndjson"),
	}
}

// Write observes p.
func (s *UsageSniffer) Write(p []byte) {
	switch {
	case s.stream:
		for len(p) > 0 {
			i := bytes.IndexByte(p, '\n')
			if i < 0 {
				s.buffer(p)
				return
			}
			s.buffer(p[:i])
			s.observeLine()
			p = p[i+1:]
		}
	case s.json:
		s.buffer(p)
	}
}

func (s *UsageSniffer) buffer(p []byte) {
	if s.over || len(s.line)+len(p) > maxSniffLine {
		s.over = true
		return
	}
	s.line = append(s.line, p...)
}

func (s *UsageSniffer) observeLine() {
	line := bytes.TrimSpace(s.line)
	over := s.over
	s.line, s.over = s.line[:0], false
	if over {
		return
	}
	line = bytes.TrimPrefix(line, []byte("data:"))
	if bytes.Contains(line, []byte(`"usage":{`)) || bytes.Contains(line, []byte(`"usage": {`)) || bytes.Contains(line, []byte(`"eval_count"`)) {
		if u := parseUsage(bytes.TrimSpace(line)); u != nil {
			s.usage = u
		}
	}
}

// Usage returns the observed usage, or nil.
func (s *UsageSniffer) Usage() *execution.TokenUsage {
	if s.json && !s.over && len(s.line) > 0 {
		if u := parseUsage(s.line); u != nil {
			s.usage = u
		}
		s.line = nil
	}
	if s.stream && len(s.line) > 0 {
		s.observeLine()
	}
	return s.usage
}

// Usage is a usage object as OpenAI-style upstreams send it, in Chat
// Completions (prompt/completion) or Responses (input/output) naming.
type Usage struct {
	PromptTokens        int64 `json:"prompt_tokens"`
	CompletionTokens    int64 `json:"completion_tokens"`
	InputTokens         int64 `json:"input_tokens"`
	OutputTokens        int64 `json:"output_tokens"`
	TotalTokens         int64 `json:"total_tokens"`
	PromptTokensDetails *struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
	CompletionTokensDetails *struct {
		ReasoningTokens int64 `json:"reasoning_tokens"`
	} `json:"completion_tokens_details"`
}

// usageKey starts the usage object OpenAI-style bodies carry.
var usageKey = []byte(`"usage":`)

func parseUsage(b []byte) *execution.TokenUsage {
	// Decode only the usage object (the last one in the body), not the
	// whole answer.
	if i := bytes.LastIndex(b, usageKey); i >= 0 {
		var u Usage
		dec := json.NewDecoder(bytes.NewReader(b[i+len(usageKey):]))
		if dec.Decode(&u) == nil && (u.TotalTokens > 0 || u.PromptTokens > 0 || u.InputTokens > 0 || u.CompletionTokens > 0 || u.OutputTokens > 0) {
			return u.TokenUsage()
		}
	}
	var v struct {
		Usage    *Usage `json:"usage"`
		Response *struct {
			Usage *Usage `json:"usage"`
		} `json:"response"`
		PromptEvalCount *int64 `json:"prompt_eval_count"`
		EvalCount       *int64 `json:"eval_count"`
	}
	if json.Unmarshal(b, &v) != nil {
		return nil
	}
	u := v.Usage
	if u == nil && v.Response != nil {
		u = v.Response.Usage
	}
	if u == nil {
		if v.EvalCount == nil && v.PromptEvalCount == nil {
			return nil
		}
		out := &execution.TokenUsage{}
		if v.PromptEvalCount != nil {
			out.PromptTokens = *v.PromptEvalCount
		}
		if v.EvalCount != nil {
			out.CompletionTokens = *v.EvalCount
		}
		out.TotalTokens = out.PromptTokens + out.CompletionTokens
		return out
	}
	return u.TokenUsage()
}

// TokenUsage converts u; a missing total is the sum of its parts.
func (u *Usage) TokenUsage() *execution.TokenUsage {
	out := &execution.TokenUsage{PromptTokens: u.PromptTokens + u.InputTokens, CompletionTokens: u.CompletionTokens + u.OutputTokens, TotalTokens: u.TotalTokens}
	if u.PromptTokensDetails != nil {
		out.CachedTokens = u.PromptTokensDetails.CachedTokens
	}
	if u.CompletionTokensDetails != nil {
		out.ReasoningTokens = u.CompletionTokensDetails.ReasoningTokens
	}
	if out.TotalTokens == 0 {
		out.TotalTokens = out.PromptTokens + out.CompletionTokens
	}
	return out
}
