package sim

import (
	"encoding/json"
	"slices"

	"github.com/iopgw/iop/codec/openai"
)

// The sim's refusals of what it cannot make — log probabilities,
// reasoning, audio, web search — each a 400 naming the field, as OpenAI
// refuses it for a model without the capability: never an answer without
// what was asked for.

// logprobsRefusal is the error of a Chat request for log probabilities,
// which the sim does not make: refused, never answered with logprobs
// null.
func logprobsRefusal(chatBody []byte) *openai.Error {
	var w struct {
		Logprobs    *bool `json:"logprobs"`
		TopLogprobs *int  `json:"top_logprobs"`
	}
	if json.Unmarshal(chatBody, &w) != nil {
		return nil
	}
	if (w.Logprobs != nil && *w.Logprobs) || (w.TopLogprobs != nil && *w.TopLogprobs > 0) {
		return openai.InvalidRequest("logprobs", "iop-sim makes no log probabilities: leave logprobs unset.")
	}
	return nil
}

// responsesLogprobsRefusal is logprobsRefusal of a Responses request:
// top_logprobs, or the log probabilities asked for in include.
func responsesLogprobsRefusal(body []byte) *openai.Error {
	var w struct {
		TopLogprobs *int     `json:"top_logprobs"`
		Include     []string `json:"include"`
	}
	if json.Unmarshal(body, &w) != nil {
		return nil
	}
	if w.TopLogprobs != nil && *w.TopLogprobs > 0 {
		return openai.InvalidRequest("top_logprobs", "iop-sim makes no log probabilities: leave top_logprobs unset.")
	}
	if slices.Contains(w.Include, "message.output_text.logprobs") {
		return openai.InvalidRequest("include", "iop-sim makes no log probabilities: leave message.output_text.logprobs out of include.")
	}
	return nil
}

// reasoningRefusal is the error of a Chat request asking the model to
// reason (reasoning_effort, or a template's enable_thinking — what an
// Ollama client's think becomes), which the sim does not do: refused as
// OpenAI refuses it for a model that does not reason, never answered
// without the reasoning asked for.
func reasoningRefusal(chatBody []byte) *openai.Error {
	var w struct {
		ReasoningEffort *string `json:"reasoning_effort"`
		Template        struct {
			EnableThinking *bool `json:"enable_thinking"`
		} `json:"chat_template_kwargs"`
	}
	if json.Unmarshal(chatBody, &w) != nil {
		return nil
	}
	if e := w.ReasoningEffort; e != nil && *e != "none" {
		return openai.InvalidRequest("reasoning_effort", "iop-sim does not reason: leave reasoning_effort (an Ollama client's think) unset.")
	}
	if w.Template.EnableThinking != nil && *w.Template.EnableThinking {
		return openai.InvalidRequest("chat_template_kwargs", "iop-sim does not think: leave enable_thinking (an Ollama client's think) unset.")
	}
	return nil
}

// responsesReasoningRefusal is reasoningRefusal of a Responses request:
// a reasoning effort, or a summary of the reasoning asked for.
func responsesReasoningRefusal(body []byte) *openai.Error {
	var w struct {
		Reasoning *struct {
			Effort  *string `json:"effort"`
			Summary *string `json:"summary"`
		} `json:"reasoning"`
	}
	if json.Unmarshal(body, &w) != nil || w.Reasoning == nil {
		return nil
	}
	if e := w.Reasoning.Effort; e != nil && *e != "none" {
		return openai.InvalidRequest("reasoning.effort", "iop-sim does not reason: leave reasoning.effort unset.")
	}
	if s := w.Reasoning.Summary; s != nil {
		return openai.InvalidRequest("reasoning.summary", "iop-sim does not reason, and has no reasoning to summarise: leave reasoning.summary unset.")
	}
	return nil
}

// outputRefusal is the error of a Chat request for output the sim cannot
// make: audio (modalities, audio), or answers from a web search.
func outputRefusal(chatBody []byte) *openai.Error {
	var w struct {
		Modalities []string        `json:"modalities"`
		Audio      json.RawMessage `json:"audio"`
		WebSearch  json.RawMessage `json:"web_search_options"`
	}
	if json.Unmarshal(chatBody, &w) != nil {
		return nil
	}
	switch {
	case slices.Contains(w.Modalities, "audio") || len(w.Audio) > 0 && string(w.Audio) != "null":
		return openai.InvalidRequest("modalities", "iop-sim answers in text only: leave audio out of modalities.")
	case len(w.WebSearch) > 0 && string(w.WebSearch) != "null":
		return openai.InvalidRequest("web_search_options", "iop-sim does not search the web: leave web_search_options unset.")
	}
	return nil
}

// serverToolsRefusal is the error of a Responses request offering tools
// the server runs (web search, file search, code interpreter…), which the
// sim does not run.
func serverToolsRefusal(serverTools bool) *openai.Error {
	if !serverTools {
		return nil
	}
	return openai.InvalidRequest("tools", "iop-sim runs no server tools (web search, file search, code interpreter…): offer function tools only.")
}
