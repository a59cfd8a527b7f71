package sim

import (
	"cmp"
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/iopgw/iop/codec/openai"
	"github.com/iopgw/iop/execution"
)

// tunnelResponses answers POST /v1/responses as a server that stores
// nothing: its answers say store false, and a request that continues
// stored state (previous_response_id, conversation) is refused as such a
// server refuses it, never answered as if it had no past.
func (p *Provider) tunnelResponses(ctx context.Context, req *execution.ProviderTunnelRequest, emit *execution.FrameEmitter) error {
	r, e := openai.DecodeResponsesRequest(req.Body, openai.Limits{})
	if e != nil {
		return respondError(emit, e)
	}
	run := r.RunRequest()
	if e := cmp.Or(r.Neutral, statelessRefusal(req.Body), responsesLogprobsRefusal(req.Body), responsesReasoningRefusal(req.Body),
		toolChoiceRefusal(run.Params)); e != nil {
		return respondError(emit, e)
	}
	echo := r.Echo()
	echo.Store = new(false) // the sim stores no response: it says so, as iop's translated path does
	if r.Stream {
		s := openai.NewResponsesStream(openai.NewResponseID(), r.Model, time.Now().Unix(), echo)
		return p.tunnelStream(ctx, run, emit, respondError, s.Append)
	}
	acc := openai.NewResponseAccumulator(openai.NewResponseID(), r.Model, time.Now().Unix(), echo)
	return p.tunnelJSON(ctx, run, emit, respondError, acc.Add, acc.Body)
}

// statelessRefusal is the error of a Responses request that names state
// the sim never stored: OpenAI's own for an unknown previous response.
func statelessRefusal(body []byte) *openai.Error {
	var w struct {
		PreviousResponseID *string         `json:"previous_response_id"`
		Conversation       json.RawMessage `json:"conversation"`
	}
	if json.Unmarshal(body, &w) != nil {
		return nil // the decode read it already
	}
	if id := w.PreviousResponseID; id != nil && *id != "" {
		e := openai.InvalidRequest("previous_response_id", "Previous response with id '%s' not found.", (*id)[:min(len(*id), 64)])
		e.Code = "previous_response_not_found"
		return e
	}
	if len(w.Conversation) > 0 && string(w.Conversation) != "null" {
		return openai.InvalidRequest("conversation", "iop-sim stores no conversation: send the whole input instead.")
	}
	return nil
}

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

// storedNotFound answers a request naming a stored response (retrieve,
// delete, cancel, input items): the sim stores none, so none is found.
func storedNotFound(path string) *openai.Error {
	id, _, _ := strings.Cut(strings.TrimPrefix(path, "/v1/responses/"), "/")
	return &openai.Error{Status: http.StatusNotFound, Type: openai.TypeInvalidRequest,
		Message: "Response with id '" + id[:min(len(id), 64)] + "' not found: iop-sim stores no response (its answers say store false)."}
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
