package fleet

import "time"

// NodeConfig authorizes one node.
type NodeConfig struct {
	ID string `koanf:"id"`
	// TokenSHA256 is the hex SHA-256 of the node's token (preferred).
	TokenSHA256 string `koanf:"token_sha256"`
	// Token is the node's token in clear (development only).
	Token string `koanf:"token"`
	// Providers and Models are the node's grant: what it may advertise.
	// Empty means anything.
	Providers []string `koanf:"providers"`
	Models    []string `koanf:"models"`
}

// NodeLinkConfig times the node link.
type NodeLinkConfig struct {
	// OpenTimeout bounds how long a node has to open the attempt stream of
	// a dispatch; past it the dispatch is a pre-commit failure (the request
	// moves to another provider) and the node is suspect — it takes no new
	// work until it answers again. Default 2s.
	OpenTimeout time.Duration `koanf:"open_timeout"`
	// HeartbeatInterval is how often the edge pings each node session;
	// HeartbeatTimeout is how long a node may leave pings unanswered before
	// the edge drops its session (its streams end with a typed terminal, or
	// a replay before commit). Defaults 1s and 3s: a frozen node is out of
	// service within about 4 s, not the transport keepalive's 15 s.
	HeartbeatInterval time.Duration `koanf:"heartbeat_interval"`
	HeartbeatTimeout  time.Duration `koanf:"heartbeat_timeout"`
	// StartupGrace is how long after start an edge answers a model no
	// connected node serves with 503 model_unavailable and Retry-After
	// (nodes are still connecting) rather than 404. Configured and granted
	// models (models[], nodes[].models) always get 503. Default 20s (nodes
	// reconnect within about 19 s of an edge restart).
	StartupGrace time.Duration `koanf:"startup_grace"`
	// ParkedAttempts is how many attempt streams each node connection may
	// keep open ahead of work: a dispatch goes straight onto one (no
	// Dispatch message, no stream setup on the request path). Each costs
	// an idle HTTP/2 stream and a goroutine on both ends. Zero turns
	// parking off. A node parks no more than its providers' capacities
	// add up to. Default 128, at most 1024.
	ParkedAttempts int `koanf:"parked_attempts"`
}

// NodeLimitsConfig bounds what a node's advertisement may claim.
type NodeLimitsConfig struct {
	// MaxStallTimeout caps a provider's advertised stall timeout (the
	// edge's silent-node backstop derives from it). Default 30m.
	MaxStallTimeout time.Duration `koanf:"max_stall_timeout"`
	// MaxCapacity caps a provider's advertised concurrent attempts; an
	// advertised 0 or less counts as 1, more is cut to the cap (logged,
	// and shown as advertised_capacity in /admin/providers). Default
	// 16384.
	MaxCapacity int `koanf:"max_capacity"`
	// MaxProviders and MaxModels bound an advertisement (providers per
	// node, models per provider); a larger one is refused. Defaults 256
	// and 1024. Names (ids, models, adapter, target) are at most 256 bytes.
	MaxProviders int `koanf:"max_providers"`
	MaxModels    int `koanf:"max_models"`
	// MaxConnsPerSource and MaxConns bound connections on the node port
	// (per source IP, and in all), checked before a byte is read; more are
	// closed at once so idle connections cannot exhaust descriptors.
	// Defaults 64 and 4096.
	MaxConnsPerSource int `koanf:"max_conns_per_source"`
	MaxConns          int `koanf:"max_conns"`
}

// DefaultNodeLimits are node_limits' defaults.
func DefaultNodeLimits() NodeLimitsConfig {
	return NodeLimitsConfig{MaxStallTimeout: 30 * time.Minute, MaxCapacity: 16384, MaxProviders: 256, MaxModels: 1024,
		MaxConnsPerSource: 64, MaxConns: 4096}
}

// DefaultNodeLink are node_link's defaults.
func DefaultNodeLink() NodeLinkConfig {
	return NodeLinkConfig{OpenTimeout: 2 * time.Second, HeartbeatInterval: time.Second, HeartbeatTimeout: 3 * time.Second, ParkedAttempts: 128,
		StartupGrace: 20 * time.Second}
}

// DefaultDrainTimeout is drain_timeout's default.
const DefaultDrainTimeout = 30 * time.Second
