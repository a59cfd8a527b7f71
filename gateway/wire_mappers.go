package gateway

import (
	"github.com/iopgw/iop/execution"
	"github.com/iopgw/iop/wire"
)

func runRequestToProto(r *execution.RunRequest, l *Lease, attemptID string) *wire.RunRequest {
	m := &wire.RunRequest{RunId: r.RunID, AttemptId: attemptID, SessionId: r.SessionID, ProviderId: l.LocalProviderID,
		Model: l.Target, ResponseStallTimeoutMs: l.StallTimeout.Milliseconds(), ChatBody: r.ChatBody,
		Headers: headersToProto(r.Header), Stream: r.Stream, Continuation: r.Continuation}
	for _, msg := range r.Messages {
		wm := &wire.Message{Role: msg.Role, Content: msg.Content, Images: msg.Images, Name: msg.Name, ToolCallId: msg.ToolCallID}
		for _, tc := range msg.ToolCalls {
			wm.ToolCalls = append(wm.ToolCalls, &wire.ToolCall{Id: tc.ID, Name: tc.Name, Arguments: tc.Arguments})
		}
		m.Messages = append(m.Messages, wm)
	}
	p := r.Params
	m.Params = &wire.GenerationParams{Temperature: p.Temperature, TopP: p.TopP, MaxTokens: p.MaxTokens, Seed: p.Seed,
		Stop: p.Stop, Tools: p.Tools, ToolChoice: p.ToolChoice, ResponseFormat: p.ResponseFormat}
	return m
}

func headersToProto(h map[string][]string) []*wire.Header {
	out := make([]*wire.Header, 0, len(h))
	for k, v := range h {
		out = append(out, &wire.Header{Name: k, Values: v})
	}
	return out
}

func headersFromProto(hs []*wire.Header) map[string][]string {
	out := make(map[string][]string, len(hs))
	for _, h := range hs {
		out[h.GetName()] = append(out[h.GetName()], h.GetValues()...)
	}
	return out
}

func usageFromProto(u *wire.TokenUsage) *execution.TokenUsage {
	if u == nil {
		return nil
	}
	return &execution.TokenUsage{PromptTokens: u.GetPromptTokens(), CompletionTokens: u.GetCompletionTokens(),
		TotalTokens: u.GetTotalTokens(), CachedTokens: u.GetCachedTokens(), ReasoningTokens: u.GetReasoningTokens()}
}

// failureFromProto rebuilds the typed failure of an error event or frame:
// the response_stalled ExecutionFailure as sent (its metadata is
// validated later against the lease), or the detail of any other failure.
func failureFromProto(msg string, f *wire.ExecutionFailure, d *wire.ErrorDetail) *execution.ExecutionFailure {
	if f != nil {
		return &execution.ExecutionFailure{Code: execution.FailureCode(f.GetCode()), Message: f.GetMessage(), Retryable: f.GetRetryable(), Metadata: f.GetMetadata()}
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

func runEventFromProto(m *wire.RunEvent) execution.RunEvent {
	ev := execution.RunEvent{Type: execution.EventType(m.GetType()), Model: m.GetModel(), Delta: m.GetDelta(), Reasoning: m.GetReasoning(),
		Message: m.GetMessage(), Usage: usageFromProto(m.GetUsage()), FinishReason: m.GetFinishReason(), Error: m.GetError(),
		ResponseID: m.GetResponseId(), Created: m.GetCreated(), SystemFingerprint: m.GetSystemFingerprint(), ServiceTier: m.GetServiceTier()}
	for _, tc := range m.GetToolCalls() {
		ev.ToolCalls = append(ev.ToolCalls, execution.ToolCallDelta{Index: int(tc.GetIndex()), ID: tc.GetId(), Name: tc.GetName(), Arguments: tc.GetArguments()})
	}
	if ev.Type == execution.EventTypeError {
		ev.Failure = failureFromProto(m.GetError(), m.GetFailure(), m.GetDetail())
	}
	return ev
}

func tunnelFrameFromProto(m *wire.ProviderTunnelFrame) execution.ProviderTunnelFrame {
	f := execution.ProviderTunnelFrame{Type: execution.FrameType(m.GetType()), Status: int(m.GetStatus()), Body: m.GetBody(),
		Usage: usageFromProto(m.GetUsage()), Error: m.GetError()}
	if len(m.GetHeaders()) > 0 {
		f.Header = headersFromProto(m.GetHeaders())
	}
	if f.Type == execution.FrameTypeError {
		f.Failure = failureFromProto(m.GetError(), m.GetFailure(), m.GetDetail())
	}
	return f
}
