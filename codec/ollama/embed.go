package ollama

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/iopgw/iop/codec/jsonstrict"
	"github.com/iopgw/iop/codec/openai"
)

// EmbedRequest is an Ollama embedding request: /api/embed (input, a
// string or an array of strings) or the older /api/embeddings (prompt, one
// string). Only the fields with an OpenAI equivalent are kept for
// translation; a native Ollama upstream gets the original body.
type EmbedRequest struct {
	Model      string
	Input      []string
	Dimensions *int
	Legacy     bool // /api/embeddings: one prompt, answered {"embedding": […]}
}

// DecodeEmbed reads an embedding request of /api/embed (legacy false) or
// /api/embeddings (legacy true).
func DecodeEmbed(body []byte, legacy bool) (EmbedRequest, *openai.Error) {
	var w struct {
		Model      string          `json:"model"`
		Input      json.RawMessage `json:"input"`
		Prompt     *string         `json:"prompt"`
		Dimensions *int            `json:"dimensions"`
		Truncate   *bool           `json:"truncate"`
	}
	if err := json.Unmarshal(body, &w); err != nil {
		return EmbedRequest{}, openai.InvalidRequest("", "invalid JSON: %v", err)
	}
	r := EmbedRequest{Model: w.Model, Dimensions: w.Dimensions, Legacy: legacy}
	if w.Model == "" {
		return r, openai.InvalidRequest("model", "model is required")
	}
	if w.Dimensions != nil && *w.Dimensions < 1 {
		return r, openai.InvalidRequest("dimensions", "dimensions must be positive")
	}
	if legacy {
		if w.Prompt != nil && *w.Prompt != "" {
			r.Input = []string{*w.Prompt}
		}
		return r, nil
	}
	var one string
	var many []string
	switch {
	case len(w.Input) == 0:
	case json.Unmarshal(w.Input, &one) == nil:
		if one != "" {
			r.Input = []string{one}
		}
	case json.Unmarshal(w.Input, &many) == nil:
		r.Input = many
	default:
		return r, openai.InvalidRequest("input", "input must be a string or an array of strings")
	}
	return r, nil
}

// LoadAnswer is the answer to a request with nothing to embed (no input,
// or an empty string or array; no prompt, or an empty one): Ollama loads
// the model and answers no embeddings, {"model", "embeddings": []} for
// /api/embed, {"embedding": []} for /api/embeddings. Clients send it to
// load a model; iop answers it itself, as it answers a generation's load.
func (r EmbedRequest) LoadAnswer() []byte {
	if r.Legacy {
		return []byte(`{"embedding":[]}`)
	}
	return append(append([]byte(`{"model":`), jsonstrict.AppendString(nil, r.Model)...), `,"embeddings":[]}`...)
}

// OpenAIBody is the request as OpenAI's POST /v1/embeddings takes it.
// Ollama's truncate (default true) has no OpenAI equivalent: such an
// upstream refuses an input past its context, as Ollama does with
// truncate false.
func (r EmbedRequest) OpenAIBody() []byte {
	b, _ := json.Marshal(struct {
		Model      string   `json:"model"`
		Input      []string `json:"input"`
		Dimensions *int     `json:"dimensions,omitempty"`
	}{r.Model, r.Input, r.Dimensions})
	return b
}

// FromOpenAI translates an OpenAI embeddings answer into the Ollama one
// the request's endpoint answers: {"model", "embeddings", "total_duration",
// "prompt_eval_count"} for /api/embed, {"embedding"} for /api/embeddings.
// took is the time the answer took (Ollama reports durations).
func (r EmbedRequest) FromOpenAI(body []byte, took time.Duration) ([]byte, error) {
	var o struct {
		Data []struct {
			Index     int       `json:"index"`
			Embedding []float64 `json:"embedding"`
		} `json:"data"`
		Usage struct {
			PromptTokens int64 `json:"prompt_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(body, &o); err != nil {
		return nil, fmt.Errorf("the upstream's embeddings answer: %w", err)
	}
	if len(o.Data) != len(r.Input) {
		return nil, fmt.Errorf("the upstream answered %d embeddings for %d inputs", len(o.Data), len(r.Input))
	}
	vecs := make([][]float64, len(o.Data))
	for _, d := range o.Data {
		if d.Index < 0 || d.Index >= len(vecs) || vecs[d.Index] != nil {
			return nil, fmt.Errorf("the upstream's embeddings answer has a bad index %d", d.Index)
		}
		vecs[d.Index] = d.Embedding
	}
	if r.Legacy {
		return json.Marshal(map[string]any{"embedding": vecs[0]})
	}
	return json.Marshal(struct {
		Model           string      `json:"model"`
		Embeddings      [][]float64 `json:"embeddings"`
		TotalDuration   int64       `json:"total_duration"`
		LoadDuration    int64       `json:"load_duration"`
		PromptEvalCount int64       `json:"prompt_eval_count"`
	}{r.Model, vecs, took.Nanoseconds(), 0, o.Usage.PromptTokens})
}
