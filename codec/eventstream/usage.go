package eventstream

import (
	"github.com/valyala/fastjson"

	"github.com/iopgw/iop/execution"
)

// Usage is a usage object as OpenAI-style upstreams send it, in Chat
// Completions (prompt/completion) or Responses (input/output) naming.
type Usage struct {
	PromptTokens            int64             `json:"prompt_tokens"`
	CompletionTokens        int64             `json:"completion_tokens"`
	InputTokens             int64             `json:"input_tokens"`
	OutputTokens            int64             `json:"output_tokens"`
	TotalTokens             int64             `json:"total_tokens"`
	PromptTokensDetails     *CachedDetails    `json:"prompt_tokens_details"`
	InputTokensDetails      *CachedDetails    `json:"input_tokens_details"`
	CompletionTokensDetails *ReasoningDetails `json:"completion_tokens_details"`
	OutputTokensDetails     *ReasoningDetails `json:"output_tokens_details"`
}

// CachedDetails are the prompt (input) token details.
type CachedDetails struct {
	CachedTokens int64 `json:"cached_tokens"`
}

// ReasoningDetails are the completion (output) token details.
type ReasoningDetails struct {
	ReasoningTokens int64 `json:"reasoning_tokens"`
}

// TokenUsage converts u; a missing total is the sum of its parts.
func (u *Usage) TokenUsage() *execution.TokenUsage {
	out := &execution.TokenUsage{PromptTokens: u.PromptTokens + u.InputTokens, CompletionTokens: u.CompletionTokens + u.OutputTokens, TotalTokens: u.TotalTokens}
	if d := u.PromptTokensDetails; d != nil {
		out.CachedTokens = d.CachedTokens
	} else if d := u.InputTokensDetails; d != nil {
		out.CachedTokens = d.CachedTokens
	}
	if d := u.CompletionTokensDetails; d != nil {
		out.ReasoningTokens = d.ReasoningTokens
	} else if d := u.OutputTokensDetails; d != nil {
		out.ReasoningTokens = d.ReasoningTokens
	}
	if out.TotalTokens == 0 {
		out.TotalTokens = out.PromptTokens + out.CompletionTokens
	}
	return out
}

// Answer is what the edge reads of a whole (non-streaming) JSON answer,
// from one parse.
type Answer struct {
	// Usage is the answer's usage: OpenAI's "usage" (Chat, Completions,
	// Embeddings, Responses, Anthropic's) or Ollama's eval counts; nil
	// when the body reports none.
	Usage *execution.TokenUsage
	// Output is BodyOutput's.
	Output Output
	// ResponseID is the id of a Responses API answer (a JSON object of
	// object "response"; "" for any other body, or an implausibly long
	// id).
	ResponseID string
	// Whole: the body is one JSON value (not empty, cut or malformed).
	Whole bool
	// Err is the error a body reports instead of an answer —
	// {"error":…} or {"object":"error",…}, as an error event reads — nil
	// for an answer, including one that carries an error of its own (a
	// failed Responses object).
	Err *execution.UpstreamError
}

// ReadAnswer reads a whole answer body.
func ReadAnswer(body []byte) (a Answer) {
	ParseWhole(body, func(v *fastjson.Value, err error) {
		a.Whole = err == nil
		if err != nil || v.Type() != fastjson.TypeObject {
			return
		}
		a.Usage, a.Output = valueUsage(v), valueOutput(v)
		switch object := string(v.GetStringBytes("object")); object {
		case "response":
			a.ResponseID = boundedID(v.GetStringBytes("id"))
		case "", "error":
			a.Err = chunkError(v)
		}
	})
	return a
}

// maxResponseID bounds the response ids the edge keeps (OpenAI's are
// about 50 bytes).
const maxResponseID = 256

func boundedID(b []byte) string {
	if len(b) > maxResponseID {
		return ""
	}
	return string(b)
}

func valueUsage(v *fastjson.Value) *execution.TokenUsage {
	if w := v.Get("usage"); present(w) {
		return usageOf(w)
	}
	return ollamaUsage(int64Field(v, "prompt_eval_count"), int64Field(v, "eval_count"))
}

// ParseWhole parses a whole JSON body and hands the result to f, which
// must not keep v or anything read from it without copying: the parser
// is pooled (a body over maxPooledBody gets a parser of its own, which a
// pool would keep alive with the body's size).
func ParseWhole(body []byte, f func(v *fastjson.Value, err error)) {
	if len(body) > maxPooledBody {
		var p fastjson.Parser
		f(p.ParseBytes(body))
		return
	}
	p := bodyParsers.Get()
	defer bodyParsers.Put(p)
	f(p.ParseBytes(body))
}

// bodyParsers parse whole bodies up to maxPooledBody.
var bodyParsers fastjson.ParserPool

const maxPooledBody = 64 << 10
