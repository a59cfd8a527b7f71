// Package streamgate is iop's request-local runtime: one Runtime per
// supported client request, the sole owner of that request's liveness from
// dispatch to the last byte, even when semantic filtering is disabled.
//
// It owns, for one request:
//   - rendering provider output for the client's surface with the
//     encoder its descriptor gives (package surface: chat JSON, chat SSE,
//     Responses JSON, Responses SSE, Ollama NDJSON/JSON), or carrying
//     tunnel bytes through unchanged, read in the surface's dialect;
//   - the commit state (transport_uncommitted → stream_open →
//     terminal_committed): nothing — not even the status line — is written
//     before the first byte of a JSON body or SSE data event;
//   - the exact-replay gate (uncommitted, uncancelled, side-effect-safe,
//     snapshot-backed, within the shared budget) and pre-commit failover;
//   - typed terminals after commit: never a tidy end after an abnormal one;
//   - the recovery observations (iop_edge_liveness_recovery_*).
//
// It is written against interfaces it declares — Dispatcher, Attempt,
// Clock — which the gateway package implements; streamgate never imports
// gateway. It retains from a provider failure only the stable failure code,
// the confirmed-handoff token and the available|unavailable|unknown
// classification: provider messages and metadata are never copied into
// what the client sees about a stall.
package streamgate
