package pool

import "time"

// QueueConfig bounds the per-model wait for a provider slot.
type QueueConfig struct {
	MaxLength int           `koanf:"max_length"` // default 256
	MaxWait   time.Duration `koanf:"max_wait"`   // default 30s
}

// ProviderPolicy tunes one provider (by provider id).
type ProviderPolicy struct {
	ID       string `koanf:"id"`
	Priority int    `koanf:"priority"` // higher wins ties; default 0
	Disabled bool   `koanf:"disabled"` // configuration-unhealthy
}

// OverlayConfig tunes recovery probing of lowered providers.
type OverlayConfig struct {
	// RecoveryInterval is the first CAPABILITIES probe delay after a
	// provider is lowered; it doubles per inconclusive or unavailable
	// result up to RecoveryMaxInterval. Defaults 5s and 60s.
	RecoveryInterval    time.Duration `koanf:"recovery_interval"`
	RecoveryMaxInterval time.Duration `koanf:"recovery_max_interval"`
}

// ModelTarget is one provider model an alias stands for.
type ModelTarget struct {
	// Provider is the edge provider id ("<node_id>/<provider id>"); empty:
	// any provider serving Model.
	Provider string `koanf:"provider"`
	// Model is the provider's own model name, which the upstream receives.
	Model string `koanf:"model"`
	// Weight shares the alias's requests among its targets; default 1.
	Weight int `koanf:"weight"`
}
