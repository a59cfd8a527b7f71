package sim

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"

	"github.com/iopgw/iop/codec/openai"
	"github.com/iopgw/iop/execution"
)

// The sim's small deterministic answers to OpenAI's moderations and image
// generation and to rerank (as vLLM, llama.cpp and Jina serve it), so
// `iop dev` shows those surfaces with nothing else installed.

// moderationCategories are OpenAI's moderation categories.
var moderationCategories = []string{"harassment", "harassment/threatening", "hate", "hate/threatening", "illicit", "illicit/violent",
	"self-harm", "self-harm/instructions", "self-harm/intent", "sexual", "sexual/minors", "violence", "violence/graphic"}

// tunnelModerations answers POST /v1/moderations: nothing is flagged; the
// scores are small and stable per input.
func (p *Provider) tunnelModerations(req *execution.ProviderTunnelRequest, emit *execution.FrameEmitter) error {
	var r struct {
		Model string          `json:"model"`
		Input json.RawMessage `json:"input"`
	}
	if err := json.Unmarshal(req.Body, &r); err != nil {
		return respondError(emit, openai.InvalidRequest("", "We could not parse the JSON body of your request: %v", err))
	}
	inputs, e := moderationInputs(r.Input)
	if e != nil {
		return respondError(emit, e)
	}
	type result struct {
		Flagged        bool               `json:"flagged"`
		Categories     map[string]bool    `json:"categories"`
		CategoryScores map[string]float64 `json:"category_scores"`
	}
	out := struct {
		ID      string   `json:"id"`
		Model   string   `json:"model"`
		Results []result `json:"results"`
	}{ID: "modr-" + strings.TrimPrefix(openai.NewChatID(), "chatcmpl-"), Model: r.Model}
	for _, in := range inputs {
		sum := sha256.Sum256([]byte(in))
		res := result{Categories: map[string]bool{}, CategoryScores: map[string]float64{}}
		for i, c := range moderationCategories {
			res.Categories[c], res.CategoryScores[c] = false, float64(sum[i%len(sum)])/255/1000 // below 0.001
		}
		out.Results = append(out.Results, res)
	}
	return respondJSON(emit, out, nil)
}

// moderationInputs reads a moderation's input: a string or an array of
// strings (a result each), or an array of content parts (one result for
// them all) of which the sim judges text only — an image part is
// refused, not judged unseen.
func moderationInputs(raw json.RawMessage) ([]string, *openai.Error) {
	if inputs, err := textInputs(raw); len(raw) > 0 && err == nil && len(inputs) > 0 {
		return inputs, nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) != nil || len(parts) == 0 {
		return nil, openai.InvalidRequest("input", "input must be a string, an array of strings, or an array of text and image_url parts")
	}
	texts := make([]string, 0, len(parts))
	for _, p := range parts {
		if p.Type != "text" {
			return nil, openai.InvalidRequest("input", "iop-sim moderates text only: it cannot judge a %q part.", p.Type)
		}
		texts = append(texts, p.Text)
	}
	return []string{strings.Join(texts, "\n")}, nil
}

// tunnelRerank answers POST /v1/rerank: documents scored by the share of
// the query's words they contain, best first (top_n of them; all for 0
// or none), with their text unless return_documents is false.
func (p *Provider) tunnelRerank(req *execution.ProviderTunnelRequest, emit *execution.FrameEmitter) error {
	var r struct {
		Model     string   `json:"model"`
		Query     string   `json:"query"`
		Documents []string `json:"documents"`
		TopN      *int     `json:"top_n"`
		// ReturnDocuments false leaves each result's document out.
		ReturnDocuments *bool `json:"return_documents"`
	}
	if err := json.Unmarshal(req.Body, &r); err != nil {
		return respondError(emit, openai.InvalidRequest("", "query must be a string and documents an array of strings: %v", err))
	}
	if r.Query == "" || len(r.Documents) == 0 {
		return respondError(emit, openai.InvalidRequest("documents", "query and documents are required"))
	}
	type result struct {
		Index          int            `json:"index"`
		RelevanceScore float64        `json:"relevance_score"`
		Document       map[string]any `json:"document,omitempty"`
	}
	words := strings.Fields(strings.ToLower(r.Query))
	results := make([]result, len(r.Documents))
	tokens := len(words)
	for i, d := range r.Documents {
		doc := strings.ToLower(d)
		hits := 0
		for _, w := range words {
			if strings.Contains(doc, w) {
				hits++
			}
		}
		results[i] = result{Index: i, RelevanceScore: float64(hits) / float64(max(1, len(words)))}
		if r.ReturnDocuments == nil || *r.ReturnDocuments {
			results[i].Document = map[string]any{"text": d}
		}
		tokens += len(strings.Fields(d))
	}
	// Stable: by score, then by index.
	for i := 1; i < len(results); i++ {
		for j := i; j > 0 && results[j].RelevanceScore > results[j-1].RelevanceScore; j-- {
			results[j], results[j-1] = results[j-1], results[j]
		}
	}
	if r.TopN != nil && *r.TopN > 0 && *r.TopN < len(results) { // 0, as vLLM reads it: all
		results = results[:*r.TopN]
	}
	id := sha256.Sum256([]byte(r.Query))
	return respondJSON(emit, map[string]any{"id": "rerank-" + hex.EncodeToString(id[:6]), "model": r.Model, "results": results,
		"usage": map[string]int{"total_tokens": tokens}}, nil)
}
