// Package fleet is the edge's side of the node link: the nodes that dial
// in and the attempts carried to them. It owns
//
//   - the gRPC NodeLink service (Hub): node authentication by token or
//     client certificate, connection generations, the session (hello,
//     welcome, heartbeats, advertisements checked against the node's
//     grant and node_limits), re-advertisement and session replacement;
//   - attempt streams: dispatch (Open), the parked streams a node keeps
//     open ahead of work, take-up deadlines that make a silent node
//     suspect, provider commands (Command) such as the CAPABILITIES probe
//     — at connect (status evidence only) and for the recovery of
//     providers the overlay lowered (RunRecoveryProbes);
//   - the edge's half of an attempt (Dispatcher, a streamgate.Dispatcher):
//     a pool lease, the form of the work the leased provider runs (native
//     Ollama, tunnel or normalized run, the model rewritten for an alias),
//     the attempt stream's messages turned into runtime events or frames,
//     the stall verdict handed to the pool, and the trace span;
//   - the node port's connection limits (LimitConns) and drain: a node
//     removed by reload takes no new work and its session ends when its
//     streams have, within drain_timeout (SetNodes); shutdown (Drain,
//     Wait) stops every goroutine the hub started;
//   - its configuration sections (NodeConfig, NodeLinkConfig,
//     NodeLimitsConfig) and its metrics.
//
// It imports execution, codec, wire, streamgate (the runtime's Dispatcher
// and Attempt seam) and the pool (it registers each connection's
// providers there and leases them), never the gateway: the gateway
// composes its configuration, builds the Hub (HubConfig) and hands one
// Dispatcher per configuration generation to the runtime.
package fleet
