package sim

import (
	"cmp"
	"context"
	"encoding/json"
	"net/http"
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
		serverToolsRefusal(r.ServerTools), toolChoiceRefusal(run.Params)); e != nil {
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

// tunnelInputTokens answers POST /v1/responses/input_tokens with the
// input tokens the sim's answer to the same request would report. A count
// is not usage: none is reported.
func (p *Provider) tunnelInputTokens(req *execution.ProviderTunnelRequest, emit *execution.FrameEmitter) error {
	r, e := openai.DecodeInputTokensRequest(req.Body, openai.Limits{})
	if e != nil {
		return respondError(emit, e)
	}
	if e := cmp.Or(r.Neutral, statelessRefusal(req.Body)); e != nil {
		return respondError(emit, e)
	}
	n := p.compose(r.RunRequest()).usage().PromptTokens
	return respondJSON(emit, map[string]any{"object": "response.input_tokens", "input_tokens": n}, nil)
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

// storedNotFound answers a request naming a stored response (retrieve,
// delete, cancel, input items): the sim stores none, so none is found.
func storedNotFound(path string) *openai.Error {
	id, _, _ := strings.Cut(strings.TrimPrefix(path, "/v1/responses/"), "/")
	return &openai.Error{Status: http.StatusNotFound, Type: openai.TypeInvalidRequest,
		Message: "Response with id '" + id[:min(len(id), 64)] + "' not found: iop-sim stores no response (its answers say store false)."}
}
