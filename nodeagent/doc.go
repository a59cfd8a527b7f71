// Package nodeagent is the node process: it dials every configured edge
// (one gRPC session each, reconnecting with backoff and logging why a
// connect failed), advertises its providers, and runs the attempts the
// edges dispatch on them.
//
// A dispatched attempt arrives on its own stream; the Bridge looks up the
// provider in the execution registry, runs it under a stall watchdog
// (liveness_watchdog.go) that claims a silent attempt, fences it, probes
// the provider and emits exactly one typed terminal, and sends events or
// tunnel frames back, split to the link's message bound. Commands
// (capabilities probes, transport status, native Ollama calls) share the
// same path. Providers live in providers/: sim, openai (any
// OpenAI-compatible server) and ollama, over the httpx helpers.
//
// The node treats the edge as its client: it never retries a provider
// itself and never infers recovery; the edge decides. Reload replaces
// providers without dropping attempts in flight; Drain stops new work and
// lets running attempts finish.
package nodeagent
