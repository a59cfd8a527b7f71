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
// produce a single CommandResult; ollama_api streams frames under the same
// watchdog as a tunnel.
func (b *Bridge) Command(ctx context.Context, sess *Session, m *wire.Command, send func(*wire.AttemptUp) error) {
	b.startCommand(ctx, sess, m, send, nil).background(&b.providers).wait(ctx)
}

// startCommand answers a command with one result, or starts an
// ollama_api attempt and returns at once; ended (if not nil) is called
// right after the result or the terminal was sent.
func (b *Bridge) startCommand(ctx context.Context, sess *Session, m *wire.Command, send func(*wire.AttemptUp) error, ended func()) started {
	result := func(r *wire.CommandResult) *wire.AttemptUp {
		return &wire.AttemptUp{Msg: &wire.AttemptUp_CommandResult{CommandResult: r}}
	}
	cmd := wire.CommandFromProto(m)
	if err := execution.CheckProviderCommand(string(cmd.Command)); err != nil {
		return refused(send, ended, result(commandError(cmd, err)))
	}
	switch cmd.Command {
	case execution.CommandCapabilities:
		return refused(send, ended, result(b.capabilities(sess, cmd)))
	case execution.CommandTransportStatus:
		return refused(send, ended, result(b.transportStatus(sess)))
	case execution.CommandOllamaAPI:
		return b.ollamaAPI(ctx, sess, cmd, send, ended)
	default:
		return refused(send, ended, result(commandError(cmd, execution.NewFailure(execution.FailureCodeUnsupported, "command not served"))))
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
func (b *Bridge) ollamaAPI(ctx context.Context, sess *Session, cmd *execution.CommandRequest, send func(*wire.AttemptUp) error, ended func()) started {
	p, desc, err := b.registry.Lookup(cmd.ProviderID)
	if err != nil {
		return refused(send, ended, frameMsg(tunnelFrameToProto(errorFrame(err), attemptIdentity{})))
	}
	if _, ok := p.(execution.CommandHandler); !ok {
		return refused(send, ended, frameMsg(tunnelFrameToProto(errorFrame(execution.NewFailure(execution.FailureCodeUnsupported, "provider does not serve the Ollama API")), attemptIdentity{})))
	}
	if err := execution.ValidateRunID(cmd.RunID); err != nil {
		return refused(send, ended, frameMsg(tunnelFrameToProto(errorFrame(execution.NewFailure(execution.FailureCodeInvalidRequest, err.Error())), attemptIdentity{})))
	}
	id := attemptIdentity{RunID: cmd.RunID, AttemptID: cmd.AttemptID, Adapter: desc.Adapter, Target: cmdTarget(cmd, desc)}
	return b.frames(ctx, sess, id, desc, p, desc.EffectiveResponseStallTimeoutMS(), send, ended, nil, func(ctx context.Context, em *execution.FrameEmitter) error {
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
