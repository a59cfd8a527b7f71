package nodeagent

import (
	"fmt"

	"github.com/iopgw/iop/execution"
	"github.com/iopgw/iop/wire"
)

// attemptIdentity is the authoritative identity of an attempt: the values
// the node, not the provider, puts into stall metadata.
type attemptIdentity struct {
	RunID     string
	AttemptID string
	Adapter   string
	Target    string
}

func (a attemptIdentity) metadata() map[string]string {
	return map[string]string{
		execution.MetadataKeyRunID:     a.RunID,
		execution.MetadataKeyAttemptID: a.AttemptID,
		execution.MetadataKeyAdapter:   a.Adapter,
		execution.MetadataKeyTarget:    a.Target,
	}
}

// boundaryError is a wire boundary rejection: an invalid_request failure.
func boundaryError(err error) *execution.ExecutionFailure {
	return &execution.ExecutionFailure{Code: execution.FailureCodeInvalidRequest, Message: err.Error(), Err: err}
}

// normalizeStallTimeout is the node wire boundary rule: zero becomes
// 300000; negative or overflow values are rejected before any router or
// provider is invoked.
func normalizeStallTimeout(ms int64) (int64, error) {
	resolved, err := execution.ResolveStallTimeoutMS(ms)
	if err != nil {
		return 0, boundaryError(fmt.Errorf("response_stall_timeout_ms: %w", err))
	}
	return resolved, nil
}

func runRequestFromProto(m *wire.RunRequest) (*execution.RunRequest, error) {
	ms, err := normalizeStallTimeout(m.GetResponseStallTimeoutMs())
	if err != nil {
		return nil, err
	}
	if err := execution.ValidateRunID(m.GetRunId()); err != nil {
		return nil, boundaryError(err)
	}
	req := &execution.RunRequest{
		RunID:                  m.GetRunId(),
		AttemptID:              m.GetAttemptId(),
		SessionID:              m.GetSessionId(),
		ProviderID:             m.GetProviderId(),
		Model:                  m.GetModel(),
		ChatBody:               m.GetChatBody(),
		Header:                 headersFromProto(m.GetHeaders()),
		Stream:                 m.GetStream(),
		Continuation:           m.GetContinuation(),
		ResponseStallTimeoutMS: ms,
	}
	for _, msg := range m.GetMessages() {
		em := execution.Message{
			Role: msg.GetRole(), Content: msg.GetContent(), Images: msg.GetImages(),
			Name: msg.GetName(), ToolCallID: msg.GetToolCallId(),
		}
		for _, tc := range msg.GetToolCalls() {
			em.ToolCalls = append(em.ToolCalls, execution.ToolCall{ID: tc.GetId(), Name: tc.GetName(), Arguments: tc.GetArguments()})
		}
		req.Messages = append(req.Messages, em)
	}
	if p := m.GetParams(); p != nil {
		req.Params = execution.GenerationParams{
			Temperature: p.Temperature, TopP: p.TopP, MaxTokens: p.MaxTokens, Seed: p.Seed,
			Stop: p.GetStop(), Tools: p.GetTools(), ToolChoice: p.GetToolChoice(), ResponseFormat: p.GetResponseFormat(),
		}
	}
	return req, nil
}

func tunnelRequestFromProto(m *wire.ProviderTunnelRequest) (*execution.ProviderTunnelRequest, error) {
	ms, err := normalizeStallTimeout(m.GetResponseStallTimeoutMs())
	if err != nil {
		return nil, err
	}
	if err := execution.ValidateRunID(m.GetRunId()); err != nil {
		return nil, boundaryError(err)
	}
	return &execution.ProviderTunnelRequest{
		RunID: m.GetRunId(), AttemptID: m.GetAttemptId(), SessionID: m.GetSessionId(),
		ProviderID: m.GetProviderId(), Model: m.GetModel(),
		Method: m.GetMethod(), Path: m.GetPath(), Header: headersFromProto(m.GetHeaders()), Body: m.GetBody(),
		ResponseStallTimeoutMS: ms,
	}, nil
}

func commandFromProto(m *wire.Command) *execution.CommandRequest {
	return &execution.CommandRequest{
		Command: execution.ProviderCommand(m.GetCommand()), ProviderID: m.GetProviderId(),
		AdapterKey: m.GetAdapterKey(), Target: m.GetTarget(),
		Method: m.GetMethod(), Path: m.GetPath(), Body: m.GetBody(),
		RunID: m.GetRunId(), AttemptID: m.GetAttemptId(),
	}
}

// runEventToProto maps a runtime event to the wire. The optional
// ExecutionFailure is populated only for response_stalled failures, with a
// defensive clone of the allowlisted metadata in which the attempt's
// authoritative identity overrides anything the caller set; the legacy
// Error string is always preserved.
func runEventToProto(ev execution.RunEvent, id attemptIdentity) *wire.RunEvent {
	m := &wire.RunEvent{
		Type: string(ev.Type), Model: ev.Model, Delta: ev.Delta, Reasoning: ev.Reasoning,
		Message: ev.Message, Usage: usageToProto(ev.Usage), FinishReason: ev.FinishReason,
		Error: ev.Error, Failure: failureToProto(ev.Failure, id), Detail: detailToProto(ev.Failure),
		ResponseId: ev.ResponseID, Created: ev.Created, SystemFingerprint: ev.SystemFingerprint, ServiceTier: ev.ServiceTier,
	}
	for _, tc := range ev.ToolCalls {
		m.ToolCalls = append(m.ToolCalls, &wire.ToolCallDelta{Index: int32(tc.Index), Id: tc.ID, Name: tc.Name, Arguments: tc.Arguments})
	}
	return m
}

// tunnelFrameToProto maps a tunnel frame to the wire with the same failure
// rules as runEventToProto.
func tunnelFrameToProto(f execution.ProviderTunnelFrame, id attemptIdentity) *wire.ProviderTunnelFrame {
	return &wire.ProviderTunnelFrame{
		Type: string(f.Type), Status: int32(f.Status), Headers: headersToProto(f.Header),
		Body: f.Body, Usage: usageToProto(f.Usage), Error: f.Error, Failure: failureToProto(f.Failure, id),
		Detail: detailToProto(f.Failure),
	}
}

func failureToProto(f *execution.ExecutionFailure, id attemptIdentity) *wire.ExecutionFailure {
	wf := execution.WireFailure(f, id.metadata())
	if wf == nil {
		return nil
	}
	return &wire.ExecutionFailure{Code: string(wf.Code), Metadata: wf.Metadata, Retryable: wf.Retryable, Message: wf.Message}
}

// detailToProto types a failure that is not response_stalled.
func detailToProto(f *execution.ExecutionFailure) *wire.ErrorDetail {
	if f == nil || f.Code == execution.FailureCodeResponseStalled {
		return nil
	}
	d := &wire.ErrorDetail{FailureCode: string(f.Code)}
	if u := f.Upstream; u != nil {
		d.Upstream = true
		d.UpstreamStatus = int32(u.Status)
		d.Type, d.Code, d.Param, d.RetryAfterMs = u.Type, u.Code, u.Param, u.RetryAfterMS
	}
	return d
}

func usageToProto(u *execution.TokenUsage) *wire.TokenUsage {
	if u == nil {
		return nil
	}
	return &wire.TokenUsage{
		PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens, TotalTokens: u.TotalTokens,
		CachedTokens: u.CachedTokens, ReasoningTokens: u.ReasoningTokens,
	}
}

func headersToProto(h map[string][]string) []*wire.Header {
	if len(h) == 0 {
		return nil
	}
	out := make([]*wire.Header, 0, len(h))
	for k, v := range h {
		out = append(out, &wire.Header{Name: k, Values: v})
	}
	return out
}

func headersFromProto(hs []*wire.Header) map[string][]string {
	if len(hs) == 0 {
		return nil
	}
	out := make(map[string][]string, len(hs))
	for _, h := range hs {
		out[h.GetName()] = append(out[h.GetName()], h.GetValues()...)
	}
	return out
}
