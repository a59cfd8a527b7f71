package execution

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
)

// ProviderDescriptor is a provider's identity and advertised shape.
type ProviderDescriptor struct {
	ProviderID  string   // unique within a node; the registry key
	Adapter     string   // adapter kind: ollama, openai, sim
	InstanceKey string   // adapter instance key (e.g. normalized base URL)
	Target      string   // primary exact target (model) for probes
	Models      []string // models served; Target is among them
	Capacity    int      // concurrent attempts; 0 means unlimited
	// ResponseStallTimeoutMS is the configured stall timeout; 0 = default.
	ResponseStallTimeoutMS int64
}

// EffectiveResponseStallTimeoutMS returns the descriptor's effective stall
// timeout.
func (d ProviderDescriptor) EffectiveResponseStallTimeoutMS() int64 {
	return NodeProviderConf{ProviderID: d.ProviderID, ResponseStallTimeoutMS: d.ResponseStallTimeoutMS}.EffectiveResponseStallTimeoutMS()
}

// ProviderLookup resolves a provider by identity.
type ProviderLookup interface {
	Lookup(providerID string) (Provider, ProviderDescriptor, error)
}

// Registry maps provider identities to providers. It is safe for
// concurrent use.
type Registry struct {
	mu      sync.RWMutex // guards the following fields
	entries map[string]*registryEntry
	started bool
}

type registryEntry struct {
	desc        ProviderDescriptor
	provider    Provider
	unavailable bool
}

var _ ProviderLookup = (*Registry)(nil)

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{entries: make(map[string]*registryEntry)}
}

// Register adds p under desc.ProviderID. The id must be non-empty and
// unique.
func (r *Registry) Register(desc ProviderDescriptor, p Provider) error {
	if desc.ProviderID == "" {
		return errors.New("register provider: empty provider id")
	}
	if p == nil {
		return fmt.Errorf("register provider %q: nil provider", desc.ProviderID)
	}
	if err := ValidateStallTimeoutMS(desc.ResponseStallTimeoutMS); err != nil {
		return fmt.Errorf("register provider %q: %w", desc.ProviderID, err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.entries[desc.ProviderID]; dup {
		return fmt.Errorf("register provider %q: already registered", desc.ProviderID)
	}
	r.entries[desc.ProviderID] = &registryEntry{desc: desc, provider: p}
	return nil
}

// SetAvailable marks a registered provider as accepting work or not. It
// reports whether the provider exists.
func (r *Registry) SetAvailable(providerID string, available bool) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.entries[providerID]
	if ok {
		e.unavailable = !available
	}
	return ok
}

// Lookup returns the provider registered under providerID. It fails with a
// provider_not_found failure for an unknown id and a provider_unavailable
// failure for a provider marked unavailable; both match their sentinels
// with errors.Is.
func (r *Registry) Lookup(providerID string) (Provider, ProviderDescriptor, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	e, ok := r.entries[providerID]
	if !ok {
		return nil, ProviderDescriptor{}, NewFailure(FailureCodeProviderNotFound, fmt.Sprintf("no provider %q", providerID))
	}
	if e.unavailable {
		return nil, e.desc, NewFailure(FailureCodeProviderUnavailable, fmt.Sprintf("provider %q is unavailable", providerID))
	}
	return e.provider, e.desc, nil
}

// Descriptors returns every registered descriptor, ordered by provider id.
func (r *Registry) Descriptors() []ProviderDescriptor {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]ProviderDescriptor, 0, len(r.entries))
	for _, e := range r.entries {
		out = append(out, e.desc)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ProviderID < out[j].ProviderID })
	return out
}

// Start starts every provider that implements Lifecycle, once.
func (r *Registry) Start(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.started {
		return nil
	}
	for id, e := range r.entries {
		if lc, ok := e.provider.(Lifecycle); ok {
			if err := lc.Start(ctx); err != nil {
				return fmt.Errorf("start provider %q: %w", id, err)
			}
		}
	}
	r.started = true
	return nil
}

// Close closes every provider that implements Lifecycle and returns the
// joined errors.
func (r *Registry) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	var errs []error
	for id, e := range r.entries {
		if lc, ok := e.provider.(Lifecycle); ok {
			if err := lc.Close(); err != nil {
				errs = append(errs, fmt.Errorf("close provider %q: %w", id, err))
			}
		}
	}
	r.started = false
	return errors.Join(errs...)
}

// Replace installs p under desc.ProviderID, adding it or replacing the
// provider registered there (a reload). Attempts already running keep the
// provider they looked up. A started registry starts p (if it implements
// Lifecycle). It returns the provider replaced, if any, for the caller to
// close once its attempts have ended.
func (r *Registry) Replace(ctx context.Context, desc ProviderDescriptor, p Provider) (Provider, error) {
	if desc.ProviderID == "" || p == nil {
		return nil, errors.New("replace provider: empty provider id or nil provider")
	}
	if err := ValidateStallTimeoutMS(desc.ResponseStallTimeoutMS); err != nil {
		return nil, fmt.Errorf("replace provider %q: %w", desc.ProviderID, err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if lc, ok := p.(Lifecycle); ok && r.started {
		if err := lc.Start(ctx); err != nil {
			return nil, fmt.Errorf("start provider %q: %w", desc.ProviderID, err)
		}
	}
	var old Provider
	if e := r.entries[desc.ProviderID]; e != nil {
		old = e.provider
	}
	r.entries[desc.ProviderID] = &registryEntry{desc: desc, provider: p}
	return old, nil
}

// Remove unregisters providerID: new lookups fail with provider_not_found;
// attempts already running keep the provider. It returns the provider
// removed (nil if none), for the caller to close once its attempts ended.
func (r *Registry) Remove(providerID string) Provider {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.entries[providerID]
	if e == nil {
		return nil
	}
	delete(r.entries, providerID)
	return e.provider
}
