package sim

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/iopgw/iop/codec/anthropic"
	"github.com/iopgw/iop/codec/openai"
	"github.com/iopgw/iop/execution"
)

// tunnelMessages answers POST /v1/messages as Anthropic's Messages API
// does: one JSON message, or the SSE event sequence (message_start,
// content_block_start, ping, content_block_delta…, content_block_stop,
// message_delta with the stop reason and usage, message_stop), with the
// sim's scripted faults; errors in Anthropic's shape.
func (p *Provider) tunnelMessages(ctx context.Context, req *execution.ProviderTunnelRequest, emit *execution.FrameEmitter) error {
	r, ae := anthropic.Decode(req.Body)
	if ae != nil {
		return respondMessagesError(emit, &openai.Error{Status: ae.Status, Message: ae.Message})
	}
	if r.Lost != "" {
		return respondMessagesError(emit, unreadable(r.Lost))
	}
	if e := toolChoiceRefusal(r.Run.Params); e != nil {
		return respondMessagesError(emit, e)
	}
	if thinks(req.Body) {
		return respondMessagesError(emit, &openai.Error{Status: http.StatusBadRequest,
			Message: "thinking: iop-sim does not think: leave thinking out, or disabled."})
	}
	r.Run.Continuation = r.Prefill // continued, as the API does, not answered
	id := anthropic.NewMessageID()
	// A stop sequence ends the answer as the API reports it: stop_reason
	// stop_sequence, naming the sequence.
	stop := p.compose(r.Run).stopSeq
	finished := func(ev execution.RunEvent) execution.RunEvent {
		if ev.Type == execution.EventTypeComplete && stop != "" && ev.FinishReason == "stop" {
			ev.FinishReason = "stop_sequence"
		}
		return ev
	}
	if r.Stream {
		s := anthropic.NewStream(id, r.Model)
		s.StopSequence = stop
		return p.tunnelStream(ctx, r.Run, emit, respondMessagesError, func(dst []byte, ev execution.RunEvent) []byte { return s.Append(dst, finished(ev)) })
	}
	acc := anthropic.NewAccumulator(id, r.Model)
	acc.StopSequence = stop
	return p.tunnelJSON(ctx, r.Run, emit, respondMessagesError, func(ev execution.RunEvent) { acc.Add(finished(ev)) }, acc.Body)
}

// thinks reports whether a Messages request asks for extended thinking,
// which the sim does not do: refused, never answered without the
// thinking blocks asked for.
func thinks(body []byte) bool {
	var w struct {
		Thinking *struct {
			Type string `json:"type"`
		} `json:"thinking"`
	}
	return json.Unmarshal(body, &w) == nil && w.Thinking != nil && w.Thinking.Type != "disabled"
}

// tunnelCountTokens answers POST /v1/messages/count_tokens with the
// prompt's token count as the sim counts it for usage. A count is not
// usage: none is reported.
func (p *Provider) tunnelCountTokens(req *execution.ProviderTunnelRequest, emit *execution.FrameEmitter) error {
	r, ae := anthropic.DecodeCount(req.Body)
	if ae != nil {
		return respondMessagesError(emit, &openai.Error{Status: ae.Status, Message: ae.Message})
	}
	if r.Lost != "" {
		return respondMessagesError(emit, unreadable(r.Lost))
	}
	n := p.compose(r.Run).usage().PromptTokens
	return respondJSON(emit, map[string]int64{"input_tokens": n}, nil)
}

// unreadable is the error of a request with a content block the sim
// cannot read (anthropic.Request.Lost): refused, neither answered nor
// counted as if the client had not sent it.
func unreadable(lost string) *openai.Error {
	return &openai.Error{Status: http.StatusBadRequest, Message: lost + ": iop-sim cannot read it."}
}

// respondMessagesError answers with e in Anthropic's error shape.
func respondMessagesError(emit *execution.FrameEmitter, e *openai.Error) error {
	h := header("application/json")
	if e.Status == http.StatusTooManyRequests {
		h["Retry-After"] = []string{"1"}
	}
	emit.Emit(execution.ProviderTunnelFrame{Type: execution.FrameTypeResponseStart, Status: e.Status, Header: h})
	emit.Emit(execution.ProviderTunnelFrame{Type: execution.FrameTypeBody, Body: anthropic.New(e.Status, e.Message).Body()})
	emit.Emit(execution.ProviderTunnelFrame{Type: execution.FrameTypeEnd})
	return nil
}
