// Package pool is the edge's provider pool: which provider serves an
// attempt, and what the edge knows of each provider's health. It owns
//
//   - the advertised providers of every node connection, compare-and-swap
//     on the connection generation (SetNode, RemoveNode, SetNodeState);
//   - selection (Acquire, Candidates): admission by model, surface, path
//     and prefill, aliases and their weighted targets (ModelTarget),
//     configured priority and disabling (ProviderPolicy), least load and
//     least recent use, the request's avoid and exclude hints;
//   - the per-model FIFO wait queues (QueueConfig) and the release-once
//     dispatch leases (Lease, Reception);
//   - the runtime health overlay: stall verdicts (AcceptStall), recovery
//     probes (DueProbes, ApplyProbe, OverlayConfig) and their
//     observations (HealthObservability, the admin event log EventLog);
//   - outlier ejection after consecutive server-side failures (Report,
//     OutlierConfig);
//   - the provider snapshot /admin/providers and the status page show.
//
// It imports execution, wire (the advertisement it selects on) and
// streamgate (the Need and Candidates vocabulary), never the gateway: the
// gateway composes its configuration sections, builds the pool's request
// (ProviderPoolDispatchRequest) from a request's generation and reads the
// snapshot.
package pool
