package gateway

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/iopgw/iop/gateway/fleet"
	"github.com/iopgw/iop/gateway/pool"
	"github.com/iopgw/iop/gateway/tenancy"
	"github.com/iopgw/iop/internal/gcheadroom"
	"github.com/iopgw/iop/internal/konfig"
	"github.com/iopgw/iop/internal/tracing"
	"github.com/iopgw/iop/streamgate"
)

// Config is the edge's configuration (configs/gateway.example.yaml).
type Config struct {
	// Listen is the public HTTP address. Default 127.0.0.1:8080.
	Listen string `koanf:"listen"`
	// NodeListen is the gRPC address nodes dial. Default 127.0.0.1:9090.
	NodeListen string `koanf:"node_listen"`
	// AdminListen serves /metrics, /healthz, /readyz, /admin/*; loopback by
	// default. Default 127.0.0.1:8081.
	AdminListen string `koanf:"admin_listen"`
	// EdgeID names this edge to nodes (logs only). Default: the hostname.
	EdgeID string `koanf:"edge_id"`

	TLS     TLSConfig          `koanf:"tls"`      // public HTTPS (optional)
	NodeTLS NodeTLSConfig      `koanf:"node_tls"` // node link TLS (optional)
	Nodes   []fleet.NodeConfig `koanf:"nodes"`    // nodes allowed to connect
	Auth    AuthConfig         `koanf:"auth"`
	Admin   AdminConfig        `koanf:"admin"`
	Limits  LimitsConfig       `koanf:"limits"`
	Queue   pool.QueueConfig   `koanf:"queue"`
	Retry   RetryConfig        `koanf:"retry"`
	// Reload: SIGHUP always re-reads the file; with watch, a change of its
	// content does too (polled every interval, default 2s).
	Reload ReloadConfig `koanf:"reload"`
	// CORS lets browser pages on other origins call the API (nothing by
	// default).
	CORS CORSConfig `koanf:"cors"`
	// Tracing exports OpenTelemetry spans over OTLP/HTTP (off by default).
	Tracing tracing.Config `koanf:"tracing"`

	policies *policyTable  // resolved retry policies (resolvePolicies)
	Models   []ModelConfig `koanf:"models"`
	// Providers tunes providers by id (priority, disabled).
	Providers  []pool.ProviderPolicy `koanf:"providers"`
	StreamGate StreamGateConfig      `koanf:"streamgate"`
	Overlay    pool.OverlayConfig    `koanf:"overlay"`
	Outlier    pool.OutlierConfig    `koanf:"outlier"`
	Log        LogConfig             `koanf:"log"`
	// NodeLimits bound what a node may claim: everything a node sends is
	// untrusted input.
	NodeLimits fleet.NodeLimitsConfig `koanf:"node_limits"`
	// NodeLink times the node link: dispatches and heartbeats.
	NodeLink fleet.NodeLinkConfig `koanf:"node_link"`
	// DrainTimeout bounds graceful shutdown: streams get this long to
	// finish before they receive a typed terminal. Default 30s.
	DrainTimeout time.Duration `koanf:"drain_timeout"`
	// GCHeadroomBytes keeps at least this many bytes of allocation
	// between garbage collections while the process is small (see
	// internal/gcheadroom): fewer collections under load, for up to this
	// much more memory; no effect once what a collection scans (the live
	// heap, goroutine stacks, globals) is larger than it.
	// Default 16 MiB; 0 leaves the collector at the runtime's default, as
	// does GOGC set in the environment. Changing it needs a restart.
	GCHeadroomBytes int64 `koanf:"gc_headroom_bytes"`
	// Node is a bundled node's configuration (the node agent's keys, as
	// in node.yaml): iop gateway runs that node in this process, linked
	// through the in-process channel — the all-in-one mode. The edge
	// itself never reads it; changing it needs a restart.
	Node map[string]any `koanf:"node"`
}

// TLSConfig is a server certificate.
type TLSConfig struct {
	CertFile string `koanf:"cert_file"`
	KeyFile  string `koanf:"key_file"`
}

// NodeTLSConfig secures the node link.
type NodeTLSConfig struct {
	CertFile string `koanf:"cert_file"`
	KeyFile  string `koanf:"key_file"`
	// ClientCAFile enables mTLS: node certificates must chain to it, and
	// a certificate's identity (CN or a DNS SAN) must equal the node_id
	// the node claims.
	ClientCAFile string `koanf:"client_ca_file"`
}

// AuthConfig configures client API keys.
type AuthConfig struct {
	// Keys are the accepted client keys; none means the API is open.
	Keys []KeyConfig `koanf:"keys"`
	// FailuresPerMinute: failed authentications per client address per
	// minute before 429 (a valid key always passes). Default 20.
	FailuresPerMinute int `koanf:"failures_per_minute"`
	// TrustedProxies are the CIDRs of front proxies whose X-Forwarded-For
	// names the client address failures are counted against. Default none.
	TrustedProxies []string `koanf:"trusted_proxies"`
	// LimitsStore shares keys' rate windows and budgets among edges (in
	// Redis); unset, each edge counts on its own.
	LimitsStore LimitStoreConfig `koanf:"limits_store"`
	// UsageFile, if set, keeps each key's usage and budget windows across
	// restarts (a JSON snapshot written every 5s and at shutdown).
	UsageFile string `koanf:"usage_file"`
	// DefaultMaxTokens is what a request that sets no output limit
	// (max_tokens, max_completion_tokens, max_output_tokens, num_predict)
	// reserves for its output against its key's token limits. Default 1024.
	DefaultMaxTokens int64 `koanf:"default_max_tokens"`
	// AllowAnonymous must be true for a configuration without client keys
	// to replace, by reload, one that had some (the API would open).
	AllowAnonymous bool `koanf:"allow_anonymous"`
}

// KeyConfig, KeyLimits and LimitStoreConfig are the tenancy package's
// configuration sections, composed into AuthConfig.
type (
	KeyConfig        = tenancy.KeyConfig
	KeyLimits        = tenancy.KeyLimits
	LimitStoreConfig = tenancy.LimitStoreConfig
)

// settings is what the authenticator checks.
func (a AuthConfig) settings() tenancy.AuthSettings {
	return tenancy.AuthSettings{Keys: a.Keys, FailuresPerMinute: a.FailuresPerMinute, TrustedProxies: a.TrustedProxies}
}

// AdminConfig protects the admin listener.
type AdminConfig struct {
	// TokenSHA256 is the hex SHA-256 of the admin bearer token; empty means
	// the admin listener (loopback by default) needs none.
	TokenSHA256 string `koanf:"token_sha256"`
	// AllowNoToken must be true for a configuration without a token to
	// replace, by reload, one that had one.
	AllowNoToken bool `koanf:"allow_no_token"`
}

// LimitsConfig bounds client requests.
type LimitsConfig struct {
	MaxBodyBytes      int64         `koanf:"max_body_bytes"`      // default 16 MiB
	MaxHeaderBytes    int           `koanf:"max_header_bytes"`    // default 64 KiB
	MaxDepth          int           `koanf:"max_depth"`           // JSON nesting, default 64
	MaxMessages       int           `koanf:"max_messages"`        // default 4096
	ReadHeaderTimeout time.Duration `koanf:"read_header_timeout"` // default 10s
	BodyReadTimeout   time.Duration `koanf:"body_read_timeout"`   // default 30s
	IdleTimeout       time.Duration `koanf:"idle_timeout"`        // default 120s
	WriteTimeout      time.Duration `koanf:"write_timeout"`       // per write, default 60s
}

// ReloadConfig is when the configuration file is re-read.
type ReloadConfig struct {
	Watch    bool          `koanf:"watch"`
	Interval time.Duration `koanf:"interval"`
}

// ModelConfig tunes one model.
type ModelConfig struct {
	Name      string           `koanf:"name"`
	Fallbacks []string         `koanf:"fallbacks"`
	Queue     pool.QueueConfig `koanf:"queue"`
	Retry     RetryConfig      `koanf:"retry"`
	// Targets make Name an alias: its requests go to these provider
	// models (by weight), which the upstream receives by their own name.
	Targets []pool.ModelTarget `koanf:"targets"`
	// ExposeTarget shows the provider's model name in answers and keeps
	// native passthrough; by default an alias's answers name the alias
	// (iop renders them).
	ExposeTarget bool `koanf:"expose_target"`
}

// StreamGateConfig configures the request runtime.
type StreamGateConfig struct {
	MaxAttempts      int           `koanf:"max_attempts"`       // per request, over every model; default 10
	SnapshotMaxBytes int           `koanf:"snapshot_max_bytes"` // default 8 MiB
	BudgetRatio      float64       `koanf:"budget_ratio"`       // default 0.2
	BudgetMin        int           `koanf:"budget_min"`         // default 3
	HoldMaxDelay     time.Duration `koanf:"hold_max_delay"`     // commit hold; default 0 (off)
	HoldMaxEvents    int           `koanf:"hold_max_events"`    // commit hold; default 0 (off)
	// BackstopMargin is how long past a provider's stall timeout the edge
	// waits on a silent attempt (a frozen or hostile node) before ending it
	// itself. Default 15s.
	BackstopMargin time.Duration `koanf:"backstop_margin"`
	Filter         FilterConfig  `koanf:"filter"`
}

// FilterConfig is semantic filtering (disabled by default).
type FilterConfig struct {
	Enabled bool                    `koanf:"enabled"`
	Rules   []streamgate.FilterRule `koanf:"rules"`
}

// LogConfig configures logging.
type LogConfig struct {
	Level  string `koanf:"level"`  // debug, info, warn, error; default info
	Format string `koanf:"format"` // json or text; default json
	// Access is the access log: all (default: one line per API request),
	// errors (only failed requests), or off.
	Access string `koanf:"access"`
	// AccessSample is the fraction of successful requests logged when
	// Access is all (failed ones always are). Default 1.
	AccessSample float64 `koanf:"access_sample"`
	// FlushInterval is how long log lines may be held in memory before
	// they are written, together (default 100ms; 0 writes each line as it
	// is logged). Warnings and errors are written at once.
	FlushInterval time.Duration `koanf:"flush_interval"`
}

// DefaultConfig returns a Config with every default.
func DefaultConfig() Config {
	return Config{
		Listen: "127.0.0.1:8080", NodeListen: "127.0.0.1:9090", AdminListen: "127.0.0.1:8081",
		Auth: AuthConfig{FailuresPerMinute: 20},
		Limits: LimitsConfig{MaxBodyBytes: 16 << 20, MaxHeaderBytes: 64 << 10, MaxDepth: 64, MaxMessages: 4096,
			ReadHeaderTimeout: 10 * time.Second, BodyReadTimeout: 30 * time.Second, IdleTimeout: 120 * time.Second, WriteTimeout: 60 * time.Second},
		Queue:           pool.QueueConfig{MaxLength: 256, MaxWait: 30 * time.Second},
		StreamGate:      StreamGateConfig{MaxAttempts: 10, SnapshotMaxBytes: 8 << 20, BudgetRatio: 0.2, BudgetMin: 3},
		Overlay:         pool.OverlayConfig{RecoveryInterval: 5 * time.Second, RecoveryMaxInterval: 60 * time.Second},
		Log:             LogConfig{Level: "info", Format: "json", Access: AccessAll, AccessSample: 1, FlushInterval: DefaultLogFlush},
		NodeLimits:      fleet.DefaultNodeLimits(),
		NodeLink:        fleet.DefaultNodeLink(),
		DrainTimeout:    fleet.DefaultDrainTimeout,
		GCHeadroomBytes: gcheadroom.Default,
	}
}

// LoadConfig reads a gateway configuration from path and the environment.
func LoadConfig(path string) (Config, error) {
	c := DefaultConfig()
	if err := konfig.Load(path, &c); err != nil {
		return Config{}, err
	}
	err := c.Validate()
	if len(c.Nodes) == 0 && len(c.Node) == 0 && path != "" {
		err = errors.Join(err, errors.New("nodes: at least one node is required: the edge serves only what nodes advertise"))
	}
	if err != nil {
		if path == "" {
			path = "environment"
		}
		return Config{}, fmt.Errorf("config %s: %w", path, err)
	}
	return c, nil
}

// Validate checks c; errors name the key.
func (c *Config) Validate() error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: "+format, append([]any{key}, args...)...))
	}
	for _, check := range []func(badFunc){c.checkListeners, c.checkNodes, c.checkAuth, c.checkLimits, c.checkLog, c.checkModels,
		c.checkReferences, c.CORS.validate, c.checkAliases, c.checkLimitsStore, c.checkTracing} {
		check(bad)
	}
	return errors.Join(errs...)
}

// loopback reports whether host names only the local machine.
func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func isSHA256(s string) bool {
	b, err := hex.DecodeString(s)
	return err == nil && len(b) == sha256.Size
}

// HashToken returns the hex SHA-256 of a token, the form configs store.
func HashToken(token string) string { return tenancy.HashToken(token) }

// configured reports whether the configuration names model: as a model,
// a fallback, or in a node's grant.
func (c *Config) configured(model string) bool {
	for _, m := range c.Models {
		if strings.EqualFold(m.Name, model) {
			return true
		}
		for _, f := range m.Fallbacks {
			if strings.EqualFold(f, model) {
				return true
			}
		}
	}
	for _, n := range c.Nodes {
		for _, m := range n.Models {
			if strings.EqualFold(m, model) {
				return true
			}
		}
	}
	return false
}

// model returns the configuration of a model name (zero value if none).
func (c *Config) model(name string) ModelConfig {
	for _, m := range c.Models {
		if strings.EqualFold(m.Name, name) {
			return m
		}
	}
	return ModelConfig{Name: name}
}
