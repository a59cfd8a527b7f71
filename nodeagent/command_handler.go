package nodeagent

import (
	"context"
	"errors"
	"sort"

	"github.com/iopgw/iop/execution"
	"github.com/iopgw/iop/wire"
)

// Command answers one provider command from the wire. The closed allowlist
// is checked before any provider lookup. capabilities and transport_status
// produce a single CommandResult (sendResult); ollama_api streams frames
// (sendFrame) under the same watchdog as a tunnel.
func (b *Bridge) Command(ctx context.Context, sess *Session, m *wire.Command, send func(*wire.AttemptUp) error) {
	sendResult := func(r *wire.CommandResult) error {
		return send(&wire.AttemptUp{Msg: &wire.AttemptUp_CommandResult{CommandResult: r}})
	}
	cmd := wire.CommandFromProto(m)
	if err := execution.CheckProviderCommand(string(cmd.Command)); err != nil {
		_ = sendResult(commandError(cmd, err))
		return
	}
	switch cmd.Command {
	case execution.CommandCapabilities:
		_ = sendResult(b.capabilities(sess, cmd))
	case execution.CommandTransportStatus:
		_ = sendResult(b.transportStatus(sess))
	case execution.CommandOllamaAPI:
		b.ollamaAPI(ctx, sess, cmd, send)
	}
}

// capabilities performs the same bounded exact-target ProbeHealth as the
// watchdog. Its evidence is the requested adapter instance key, the exact
// target, the fail-closed normalized provider_status and the next
// health_observation_seq of the same session. Probe errors, unsupported
// probing and adapter/instance/target mismatches report unknown.
func (b *Bridge) capabilities(sess *Session, cmd *execution.CommandRequest) *wire.CommandResult {
	res := &wire.CommandResult{Command: string(cmd.Command)}
	status := execution.HealthUnknown
	if p, desc, err := b.registry.Lookup(cmd.ProviderID); err == nil {
		outcome := b.probes.ProbeHealth(p, execution.ProbeRequest{Adapter: desc.Adapter, InstanceKey: cmd.AdapterKey, Target: cmd.Target})
		if cmd.AdapterKey == "" {
			// The instance is part of the evidence: an unpinned request is
			// ambiguous and cannot be definitive.
			outcome = execution.ProbeOutcome{Requested: outcome.Requested}
		}
		status = execution.NormalizeProbeOutcome(outcome).Status()
	}
	caps := &wire.CapabilitiesResult{AdapterKey: cmd.AdapterKey, Target: cmd.Target, ProviderStatus: string(status)}
	if sess != nil {
		caps.HealthObservationSeq = sess.NextObservationSeq()
	}
	res.Capabilities = caps
	return res
}

func (b *Bridge) transportStatus(sess *Session) *wire.CommandResult {
	ts := &wire.TransportStatus{State: StateClosed}
	if sess != nil {
		ts.State = sess.State()
		ts.ConnectionGeneration = sess.Generation()
	}
	inflight := b.InFlight()
	ids := make([]string, 0, len(inflight))
	for id := range inflight {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		ts.Providers = append(ts.Providers, &wire.ProviderInFlight{ProviderId: id, InFlight: inflight[id]})
	}
	return &wire.CommandResult{Command: string(execution.CommandTransportStatus), TransportStatus: ts}
}

// ollamaAPI passes an allowlisted native Ollama request through to the
// provider and streams its answer as tunnel frames.
func (b *Bridge) ollamaAPI(ctx context.Context, sess *Session, cmd *execution.CommandRequest, send func(*wire.AttemptUp) error) {
	p, desc, err := b.registry.Lookup(cmd.ProviderID)
	if err != nil {
		_ = send(frameMsg(tunnelFrameToProto(errorFrame(err), attemptIdentity{})))
		return
	}
	if _, ok := p.(execution.CommandHandler); !ok {
		_ = send(frameMsg(tunnelFrameToProto(errorFrame(execution.NewFailure(execution.FailureCodeUnsupported, "provider does not serve the Ollama API")), attemptIdentity{})))
		return
	}
	if err := execution.ValidateRunID(cmd.RunID); err != nil {
		_ = send(frameMsg(tunnelFrameToProto(errorFrame(execution.NewFailure(execution.FailureCodeInvalidRequest, err.Error())), attemptIdentity{})))
		return
	}
	id := attemptIdentity{RunID: cmd.RunID, AttemptID: cmd.AttemptID, Adapter: desc.Adapter, Target: cmdTarget(cmd, desc)}
	b.frames(ctx, sess, id, desc, p, desc.EffectiveResponseStallTimeoutMS(), send, func(ctx context.Context, em *execution.FrameEmitter) error {
		return execution.RunProviderCommand(ctx, b.registry, cmd, em)
	})
}

func commandError(cmd *execution.CommandRequest, err error) *wire.CommandResult {
	res := &wire.CommandResult{Command: string(cmd.Command), Error: err.Error(), ErrorCode: string(execution.FailureCodeInternal)}
	var f *execution.ExecutionFailure
	if errors.As(err, &f) {
		res.ErrorCode = string(f.Code)
	}
	return res
}

// cmdTarget is the model an ollama_api request names, or the provider's
// target.
func cmdTarget(cmd *execution.CommandRequest, desc execution.ProviderDescriptor) string {
	if cmd.Target != "" {
		return cmd.Target
	}
	return desc.Target
}
