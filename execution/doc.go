// Package execution defines the host-neutral provider primitives of iop: the
// narrow [Provider] interface and its optional capabilities, the provider
// [Registry], the ordered [Emitter] that publishes exactly one terminal event,
// typed failures ([ExecutionFailure], [FailureCodeResponseStalled]), the
// stall-timeout rules ([DefaultResponseStallTimeoutMS],
// [ResolveStallTimeoutMS]), the event and frame classifiers
// ([ClassifyRuntimeEvent], [ClassifyProviderTunnelFrame]), the fail-closed
// probe-outcome vocabulary ([ProviderHealth], [LivenessClassification],
// [NormalizeProbeOutcome]) and the closed provider-command allowlist
// (capabilities, transport_status, ollama_api).
//
// The package is the specification's "execution" scope
// (contract/execution-runtime.md). It imports the standard library only:
// neither echo nor gRPC nor generated wire types nor any other package of this
// module. Hosts — the node agent and the edge — translate these types to and
// from their transports.
//
// A session_id is an opaque correlation value. It does not select, create,
// resume or terminate anything: repeated requests with the same value are
// independent executions. Cancellation targets a non-empty run_id only.
//
// Token usage ([TokenUsage]) is observation data attached to execution or
// tunnel results; nothing in this package meters, bills or limits with it.
//
// # Prohibited ownership
//
// The package must not own interactive shells, persistent processes, terminal
// emulation, working-directory mutation, resumable conversations, local quota
// probing, or arbitrary host command execution. It must not import
// application-internal packages or generated transport types. The
// dependency test in this package enforces the import rule.
//
// What is left to others: the node agent owns the stall watchdog, the health
// probe coordinator, the transport session and its health_observation_seq;
// the edge owns leases, the runtime health overlay and every recovery
// decision.
package execution
