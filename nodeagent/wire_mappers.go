package nodeagent

import (
	"fmt"

	"github.com/iopgw/iop/codec/openai"
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

// checkAttempt validates what every attempt request carries: its run id
// and its stall timeout (normalized).
func checkAttempt(runID string, stallMS int64) (int64, error) {
	ms, err := normalizeStallTimeout(stallMS)
	if err != nil {
		return 0, err
	}
	if err := execution.ValidateRunID(runID); err != nil {
		return 0, boundaryError(err)
	}
	return ms, nil
}

func runRequestFromProto(m *wire.RunRequest) (*execution.RunRequest, error) {
	ms, err := checkAttempt(m.GetRunId(), m.GetResponseStallTimeoutMs())
	if err != nil {
		return nil, err
	}
	req := wire.RunRequestFromProto(m)
	req.ResponseStallTimeoutMS = ms
	if len(req.Messages) == 0 && len(req.ChatBody) > 0 {
		// The link carries the request once, as its Chat body: the
		// neutral form adapters map from is parsed from it here.
		neutral, e := openai.NeutralRun(req.ChatBody)
		if e != nil {
			return nil, boundaryError(fmt.Errorf("chat_body: %s", e.Message))
		}
		req.Messages, req.Params = neutral.Messages, neutral.Params
	}
	return req, nil
}

func tunnelRequestFromProto(m *wire.ProviderTunnelRequest) (*execution.ProviderTunnelRequest, error) {
	ms, err := checkAttempt(m.GetRunId(), m.GetResponseStallTimeoutMs())
	if err != nil {
		return nil, err
	}
	req := wire.TunnelRequestFromProto(m)
	req.ResponseStallTimeoutMS = ms
	return req, nil
}

// runEventToProto maps a runtime event to the wire; a stall failure's
// metadata carries the attempt's authoritative identity.
func runEventToProto(ev execution.RunEvent, id attemptIdentity) *wire.RunEvent {
	return wire.RunEventToProto(ev, id.failureMetadata(ev.Failure))
}

// tunnelFrameToProto maps a tunnel frame with the same failure rules.
func tunnelFrameToProto(f execution.ProviderTunnelFrame, id attemptIdentity) *wire.ProviderTunnelFrame {
	return wire.TunnelFrameToProto(f, id.failureMetadata(f.Failure))
}

// failureMetadata is the identity a failure's metadata is bound to; an
// item without a failure (every content chunk) needs none.
func (a attemptIdentity) failureMetadata(f *execution.ExecutionFailure) map[string]string {
	if f == nil {
		return nil
	}
	return a.metadata()
}
