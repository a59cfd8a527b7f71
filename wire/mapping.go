package wire

import "github.com/iopgw/iop/execution"

// Both directions of the execution ↔ protobuf mapping live here, so the
// edge and the node cannot disagree. Validation of what a peer sent (run
// ids, stall timeouts, failure metadata) is the receiver's, not the
// mapping's.

// HeadersToProto maps a header map; empty maps to nil.
func HeadersToProto(h map[string][]string) []*Header {
	if len(h) == 0 {
		return nil
	}
	out := make([]*Header, 0, len(h))
	hs := make([]Header, len(h)) // one allocation for all of them
	for k, v := range h {
		m := &hs[len(out)]
		m.Name, m.Values = k, v
		out = append(out, m)
	}
	return out
}

// HeadersFromProto maps headers back; none maps to nil. Repeated names
// accumulate their values.
func HeadersFromProto(hs []*Header) map[string][]string {
	if len(hs) == 0 {
		return nil
	}
	out := make(map[string][]string, len(hs))
	for _, h := range hs {
		vs, seen := out[h.GetName()]
		if !seen {
			// The message's own values, capped so that an append copies
			// them rather than writing past them.
			v := h.GetValues()
			out[h.GetName()] = v[:len(v):len(v)]
			continue
		}
		out[h.GetName()] = append(vs[:len(vs):len(vs)], h.GetValues()...)
	}
	return out
}

// UsageToProto maps token usage; nil (unknown) stays nil.
func UsageToProto(u *execution.TokenUsage) *TokenUsage {
	if u == nil {
		return nil
	}
	return &TokenUsage{PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens, TotalTokens: u.TotalTokens,
		CachedTokens: u.CachedTokens, ReasoningTokens: u.ReasoningTokens}
}

// UsageFromProto maps token usage back; nil stays nil.
func UsageFromProto(u *TokenUsage) *execution.TokenUsage {
	if u == nil {
		return nil
	}
	return &execution.TokenUsage{PromptTokens: u.GetPromptTokens(), CompletionTokens: u.GetCompletionTokens(),
		TotalTokens: u.GetTotalTokens(), CachedTokens: u.GetCachedTokens(), ReasoningTokens: u.GetReasoningTokens()}
}

// RunRequestToProto maps a normalized run. The sender sets what the
// lease decides (attempt id, provider id, target model, stall timeout).
// A run with a Chat body crosses the link in that one form: its messages
// and parameters are left out, and the node parses them from the body.
func RunRequestToProto(r *execution.RunRequest) *RunRequest {
	m := &RunRequest{RunId: r.RunID, AttemptId: r.AttemptID, SessionId: r.SessionID, ProviderId: r.ProviderID, Model: r.Model,
		ResponseStallTimeoutMs: r.ResponseStallTimeoutMS, ChatBody: r.ChatBody, Headers: HeadersToProto(r.Header), Stream: r.Stream,
		Continuation: r.Continuation}
	if len(r.ChatBody) > 0 {
		return m
	}
	for _, msg := range r.Messages {
		wm := &Message{Role: msg.Role, Content: msg.Content, Images: msg.Images, Name: msg.Name, ToolCallId: msg.ToolCallID}
		for _, tc := range msg.ToolCalls {
			wm.ToolCalls = append(wm.ToolCalls, &ToolCall{Id: tc.ID, Name: tc.Name, Arguments: tc.Arguments})
		}
		m.Messages = append(m.Messages, wm)
	}
	p := r.Params
	m.Params = &GenerationParams{Temperature: p.Temperature, TopP: p.TopP, MaxTokens: p.MaxTokens, Seed: p.Seed,
		Stop: p.Stop, Tools: p.Tools, ToolChoice: p.ToolChoice, ResponseFormat: p.ResponseFormat}
	return m
}

// RunRequestFromProto maps a run back, unvalidated.
func RunRequestFromProto(m *RunRequest) *execution.RunRequest {
	req := &execution.RunRequest{RunID: m.GetRunId(), AttemptID: m.GetAttemptId(), SessionID: m.GetSessionId(),
		ProviderID: m.GetProviderId(), Model: m.GetModel(), ChatBody: m.GetChatBody(), Header: HeadersFromProto(m.GetHeaders()),
		Stream: m.GetStream(), Continuation: m.GetContinuation(), ResponseStallTimeoutMS: m.GetResponseStallTimeoutMs()}
	for _, msg := range m.GetMessages() {
		em := execution.Message{Role: msg.GetRole(), Content: msg.GetContent(), Images: msg.GetImages(), Name: msg.GetName(),
			ToolCallID: msg.GetToolCallId()}
		for _, tc := range msg.GetToolCalls() {
			em.ToolCalls = append(em.ToolCalls, execution.ToolCall{ID: tc.GetId(), Name: tc.GetName(), Arguments: tc.GetArguments()})
		}
		req.Messages = append(req.Messages, em)
	}
	if p := m.GetParams(); p != nil {
		req.Params = execution.GenerationParams{Temperature: p.Temperature, TopP: p.TopP, MaxTokens: p.MaxTokens, Seed: p.Seed,
			Stop: p.GetStop(), Tools: p.GetTools(), ToolChoice: p.GetToolChoice(), ResponseFormat: p.GetResponseFormat()}
	}
	return req
}

// TunnelRequestFromProto maps a tunnel request back, unvalidated.
func TunnelRequestFromProto(m *ProviderTunnelRequest) *execution.ProviderTunnelRequest {
	return &execution.ProviderTunnelRequest{RunID: m.GetRunId(), AttemptID: m.GetAttemptId(), SessionID: m.GetSessionId(),
		ProviderID: m.GetProviderId(), Model: m.GetModel(), Method: m.GetMethod(), Path: m.GetPath(),
		Header: HeadersFromProto(m.GetHeaders()), Body: m.GetBody(), ResponseStallTimeoutMS: m.GetResponseStallTimeoutMs()}
}

// CommandFromProto maps a provider command.
func CommandFromProto(m *Command) *execution.CommandRequest {
	return &execution.CommandRequest{Command: execution.ProviderCommand(m.GetCommand()), ProviderID: m.GetProviderId(),
		AdapterKey: m.GetAdapterKey(), Target: m.GetTarget(), Method: m.GetMethod(), Path: m.GetPath(), Body: m.GetBody(),
		RunID: m.GetRunId(), AttemptID: m.GetAttemptId()}
}

// RunEventToProto maps a runtime event. A response_stalled failure goes
// as an ExecutionFailure whose allowlisted metadata the attempt's
// authoritative identity overrides; any other failure as an ErrorDetail.
// The legacy Error string is always kept.
func RunEventToProto(ev execution.RunEvent, authoritative map[string]string) *RunEvent {
	m := &RunEvent{Type: string(ev.Type), Model: ev.Model, Delta: ev.Delta, Reasoning: ev.Reasoning, Message: ev.Message,
		Usage: UsageToProto(ev.Usage), FinishReason: ev.FinishReason, Error: ev.Error, Failure: failureToProto(ev.Failure, authoritative),
		Detail: detailToProto(ev.Failure), ResponseId: ev.ResponseID, Created: ev.Created, SystemFingerprint: ev.SystemFingerprint,
		ServiceTier: ev.ServiceTier, StopSequence: ev.StopSequence}
	for _, tc := range ev.ToolCalls {
		m.ToolCalls = append(m.ToolCalls, &ToolCallDelta{Index: int32(tc.Index), Id: tc.ID, Name: tc.Name, Arguments: tc.Arguments})
	}
	return m
}

// RunEventFromProto maps an event back; an error event gets its typed
// failure.
func RunEventFromProto(m *RunEvent) execution.RunEvent {
	ev := execution.RunEvent{Type: execution.EventType(m.GetType()), Model: m.GetModel(), Delta: m.GetDelta(), Reasoning: m.GetReasoning(),
		Message: m.GetMessage(), Usage: UsageFromProto(m.GetUsage()), FinishReason: m.GetFinishReason(), Error: m.GetError(),
		ResponseID: m.GetResponseId(), Created: m.GetCreated(), SystemFingerprint: m.GetSystemFingerprint(), ServiceTier: m.GetServiceTier(),
		StopSequence: m.GetStopSequence()}
	for _, tc := range m.GetToolCalls() {
		ev.ToolCalls = append(ev.ToolCalls, execution.ToolCallDelta{Index: int(tc.GetIndex()), ID: tc.GetId(), Name: tc.GetName(), Arguments: tc.GetArguments()})
	}
	if ev.Type == execution.EventTypeError {
		ev.Failure = FailureFromProto(m.GetError(), m.GetFailure(), m.GetDetail())
	}
	return ev
}

// TunnelFrameToProto maps a tunnel frame with RunEventToProto's failure
// rules.
func TunnelFrameToProto(f execution.ProviderTunnelFrame, authoritative map[string]string) *ProviderTunnelFrame {
	return &ProviderTunnelFrame{Type: string(f.Type), Status: int32(f.Status), Headers: HeadersToProto(f.Header), Body: f.Body,
		Usage: UsageToProto(f.Usage), Error: f.Error, Failure: failureToProto(f.Failure, authoritative), Detail: detailToProto(f.Failure)}
}

// TunnelFrameFromProto maps a frame back; an error frame gets its typed
// failure.
func TunnelFrameFromProto(m *ProviderTunnelFrame) execution.ProviderTunnelFrame {
	f := execution.ProviderTunnelFrame{Type: execution.FrameType(m.GetType()), Status: int(m.GetStatus()), Body: m.GetBody(),
		Usage: UsageFromProto(m.GetUsage()), Error: m.GetError(), Header: HeadersFromProto(m.GetHeaders())}
	if f.Type == execution.FrameTypeError {
		f.Failure = FailureFromProto(m.GetError(), m.GetFailure(), m.GetDetail())
	}
	return f
}

// FailureFromProto rebuilds the typed failure of an error event or frame:
// the response_stalled ExecutionFailure as sent, its metadata parsed into
// typed evidence (allowlisted, valid values only; the pool validates the
// binding), or the detail of any other failure.
func FailureFromProto(msg string, f *ExecutionFailure, d *ErrorDetail) *execution.ExecutionFailure {
	if f != nil {
		out := &execution.ExecutionFailure{Code: execution.FailureCode(f.GetCode()), Message: f.GetMessage(), Retryable: f.GetRetryable(),
			Metadata: f.GetMetadata()}
		if out.Code == execution.FailureCodeResponseStalled {
			out.Stall = execution.ParseStallEvidence(out.Metadata)
		}
		return out
	}
	if d == nil {
		return nil
	}
	out := &execution.ExecutionFailure{Code: execution.FailureCode(d.GetFailureCode()), Message: msg}
	if d.GetUpstream() {
		out.Upstream = &execution.UpstreamError{Status: int(d.GetUpstreamStatus()), Type: d.GetType(), Code: d.GetCode(),
			Param: d.GetParam(), Message: msg, RetryAfterMS: d.GetRetryAfterMs()}
	}
	return out
}

func failureToProto(f *execution.ExecutionFailure, authoritative map[string]string) *ExecutionFailure {
	wf := execution.WireFailure(f, authoritative)
	if wf == nil {
		return nil
	}
	return &ExecutionFailure{Code: string(wf.Code), Metadata: wf.Metadata, Retryable: wf.Retryable, Message: wf.Message}
}

// detailToProto types a failure that is not response_stalled.
func detailToProto(f *execution.ExecutionFailure) *ErrorDetail {
	if f == nil || f.Code == execution.FailureCodeResponseStalled {
		return nil
	}
	d := &ErrorDetail{FailureCode: string(f.Code)}
	if u := f.Upstream; u != nil {
		d.Upstream, d.UpstreamStatus = true, int32(u.Status)
		d.Type, d.Code, d.Param, d.RetryAfterMs = u.Type, u.Code, u.Param, u.RetryAfterMS
	}
	return d
}
