package pool

import (
	"sync/atomic"
	"time"
)

// Lease is an immutable dispatch lease: the provider slot one attempt
// holds, bound to (node_id, connection_generation, provider_id, adapter,
// target). It is released exactly once, whatever happens — completion,
// client cancel, error, node loss or shutdown; a second Release is a no-op
// that reports false.
type Lease struct {
	NodeID               string
	ConnectionGeneration uint64
	ProviderID           string // edge-owned: "<node_id>/<node's provider id>"
	LocalProviderID      string // the provider id on its node
	Adapter              string
	Target               string // the exact target (model) the attempt runs
	InstanceKey          string
	Model                string
	Path                 string   // the provider's path policy: auto, provider_tunnel or normalized
	Surfaces             []string // the client surfaces its upstream serves natively
	StallTimeout         time.Duration
	SupportsTunnel       bool
	SupportsOllamaAPI    bool

	slot     *pooled
	pool     *Pool
	released atomic.Bool
}

// Release returns the slot to the pool. It reports false when the lease
// was already released.
func (l *Lease) Release() bool {
	if !l.released.CompareAndSwap(false, true) {
		if m := l.pool.metrics; m != nil {
			m.doubleRelease.Inc()
		}
		return false
	}
	l.pool.release(l)
	return true
}

// Tunnels reports whether the attempt carries a request of the client
// surface through unchanged rather than translating it: on path auto
// when the upstream serves the surface natively, always on path tunnel,
// never on path normalized.
func (l *Lease) Tunnels(surface string) bool {
	return passesThrough(l.SupportsTunnel, l.Path, l.Surfaces, surface)
}

// passesThrough is Lease.Tunnels of a provider's advertisement.
func passesThrough(supportsTunnel bool, path string, surfaces []string, surface string) bool {
	if !supportsTunnel {
		return false
	}
	switch path {
	case pathAuto:
		return nativeSurface(surfaces, surface)
	case pathNormalized:
		return false
	}
	return true
}

// Released reports whether the lease was released.
func (l *Lease) Released() bool { return l.released.Load() }

// Reception is the authoritative (node_id, connection_generation) an
// attempt's messages arrived on.
type Reception struct {
	NodeID               string
	ConnectionGeneration uint64
}

// Owns reports whether the reception is the lease's own connection.
func (l *Lease) Owns(r Reception) bool {
	return r.NodeID == l.NodeID && r.ConnectionGeneration == l.ConnectionGeneration
}
