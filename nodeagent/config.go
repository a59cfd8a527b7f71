package nodeagent

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/iopgw/iop/execution"
	"github.com/iopgw/iop/internal/gcheadroom"
	"github.com/iopgw/iop/internal/konfig"
	"github.com/iopgw/iop/internal/tracing"
	"github.com/iopgw/iop/wire"
)

// Config is a node agent's configuration (configs/node.example.yaml).
type Config struct {
	// NodeID identifies the node to every edge. Required.
	NodeID string `koanf:"node_id"`
	// Token authenticates the node to its edges. Required unless TokenFile
	// is set. Env: IOP_TOKEN.
	Token string `koanf:"token"`
	// TokenFile is a file holding the token (trailing whitespace dropped).
	TokenFile string `koanf:"token_file"`
	// Edges lists the edges to dial; the node keeps one session per edge.
	Edges []EdgeConfig `koanf:"edges"`
	// Metrics serves /metrics; an empty listen address disables it.
	Metrics MetricsConfig `koanf:"metrics"`
	// Log configures structured logging.
	Log LogConfig `koanf:"log"`
	// Reload: SIGHUP always re-reads the file (providers and log level);
	// with watch, a change of its content does too (polled every interval,
	// default 2s).
	Reload ReloadConfig `koanf:"reload"`
	// Tracing exports OpenTelemetry spans over OTLP/HTTP (off by default).
	Tracing tracing.Config `koanf:"tracing"`
	// Liveness tunes the stall watchdog.
	Liveness LivenessConfig `koanf:"liveness"`
	// Providers are the model servers this node runs work on.
	Providers []ProviderConfig `koanf:"providers"`
	// DrainTimeout bounds a graceful stop: on SIGTERM the node tells every
	// edge it is draining (no new work), lets in-flight attempts finish for
	// this long, then ends the rest with a typed terminal. Default 30s.
	DrainTimeout time.Duration `koanf:"drain_timeout"`
	// GCHeadroomBytes keeps at least this many bytes of allocation
	// between garbage collections while the process is small (see
	// internal/gcheadroom): fewer collections under load, for up to this
	// much more memory; no effect once what a collection scans (the live
	// heap, goroutine stacks, globals) is larger than it.
	// Default 16 MiB; 0 leaves the collector at the runtime's default, as
	// does GOGC set in the environment. Changing it needs a restart.
	GCHeadroomBytes int64 `koanf:"gc_headroom_bytes"`
}

// EdgeConfig is one edge to dial.
type EdgeConfig struct {
	// Address is host:port of the edge's node listener. Required.
	Address string `koanf:"address"`
	// TLS secures the link; disabled means plaintext (loopback only!).
	TLS TLSConfig `koanf:"tls"`
	// Resolve "dns" keeps one session per address the host resolves to
	// (every edge behind a headless Service), refreshed every
	// ResolveInterval (default 30s). Empty dials Address as given.
	Resolve         string        `koanf:"resolve"`
	ResolveInterval time.Duration `koanf:"resolve_interval"`
}

// TLSConfig configures the node side of a TLS link.
type TLSConfig struct {
	Enabled    bool   `koanf:"enabled"`     // default false
	CAFile     string `koanf:"ca_file"`     // CA that signed the edge's certificate; empty = system roots
	ServerName string `koanf:"server_name"` // expected edge name; empty = host of Address
	CertFile   string `koanf:"cert_file"`   // client certificate for mTLS (optional)
	KeyFile    string `koanf:"key_file"`    // client key for mTLS (optional)
}

// MetricsConfig configures the node's Prometheus endpoint.
type MetricsConfig struct {
	// Listen is the address of /metrics. Default 127.0.0.1:9101; "" disables.
	Listen string `koanf:"listen"`
}

// LogConfig configures logging.
type LogConfig struct {
	Level  string `koanf:"level"`  // debug, info, warn, error; default info
	Format string `koanf:"format"` // json or text; default json
}

// LivenessConfig tunes the stall watchdog.
type LivenessConfig struct {
	// CloseGrace is how long a stalled provider has to release the attempt
	// after cancellation for the fence to count as confirmed. Default 2s.
	CloseGrace time.Duration `koanf:"close_grace"`
}

// ProviderConfig is one provider served by the node.
type ProviderConfig struct {
	// ID is the provider's identity, unique within the node. Required.
	ID string `koanf:"id"`
	// Adapter is sim, ollama or openai. Required.
	Adapter string `koanf:"adapter"`
	// Path is auto (default: a client surface the upstream serves
	// natively — see Surfaces — goes through unchanged, the tunnel; the
	// rest is translated, the normalized path), tunnel (every OpenAI
	// request carried through unchanged) or normalized (every request
	// translated: the node speaks to the provider and the edge renders the
	// client's format).
	Path string `koanf:"path"`
	// Surfaces are the client API surfaces the upstream serves natively:
	// chat, responses, completions, embeddings (OpenAI) and ollama (/api/*).
	// Defaults: openai chat, completions, embeddings (add responses for a
	// server with /v1/responses); ollama ollama, completions, embeddings
	// (Chat and Responses clients are translated to /api/chat); sim chat,
	// responses.
	Surfaces []string `koanf:"surfaces"`
	// NonStream is how a client's non-stream request reaches an
	// OpenAI-compatible upstream on the normalized path: stream (default:
	// the watchdog sees every token; the upstream sees stream: true) or json
	// (the upstream's own non-stream answer and usage; no progress is seen
	// until the whole answer, so the stall timeout must exceed the longest
	// answer). The tunnel path always sends the client's request as is.
	NonStream string `koanf:"non_stream"`
	// Prefill declares that the upstream continues a trailing assistant
	// message (llama.cpp, Ollama, vLLM with PrefillFields), so the edge
	// may resume a cut stream on it. Default true for sim, false otherwise
	// (OpenAI's API starts a new answer instead).
	Prefill *bool `koanf:"prefill"`
	// PrefillFields are set in the upstream body of a continuation only,
	// e.g. vLLM's {continue_final_message: true, add_generation_prompt: false}.
	PrefillFields map[string]any `koanf:"prefill_fields"`
	// BaseURL is the provider's URL (ollama: http://127.0.0.1:11434;
	// openai: https://host/v1 or http://host:8000/v1). Unused by sim.
	BaseURL string `koanf:"base_url"`
	// APIKey is sent as the provider's bearer token; prefer APIKeyEnv.
	APIKey string `koanf:"api_key"`
	// APIKeyEnv names an environment variable holding the API key.
	APIKeyEnv string `koanf:"api_key_env"`
	// Headers are extra headers sent to the provider.
	Headers map[string]string `koanf:"headers"`
	// ForwardHeaders names credential-scoped client headers passed to this
	// provider (e.g. OpenAI-Organization, OpenAI-Project); by default they
	// are stripped, so a client cannot choose what the node's key bills.
	ForwardHeaders []string `koanf:"forward_headers"`
	// Models are the model names served. Required (at least one).
	Models []string `koanf:"models"`
	// Target is the exact model probes check. Default: Models[0].
	Target string `koanf:"target"`
	// InstanceKey pins the adapter instance. Default: the normalized
	// BaseURL (sim: "sim/<id>").
	InstanceKey string `koanf:"instance_key"`
	// Capacity is the number of concurrent attempts. Default 4.
	Capacity int `koanf:"capacity"`
	// ResponseStallTimeoutMS is the stall timeout; 0 means 300000.
	ResponseStallTimeoutMS int64 `koanf:"response_stall_timeout_ms"`
	// Sim configures the built-in simulated model.
	Sim SimConfig `koanf:"sim"`
}

// SimConfig configures the sim adapter (see nodeagent/providers/sim).
type SimConfig struct {
	TokenLatency     time.Duration `koanf:"token_latency"`      // between tokens; default 20ms
	FirstTokenDelay  time.Duration `koanf:"first_token_delay"`  // before the first token; default 0
	MaxTokens        int           `koanf:"max_tokens"`         // answer length cap; default 24
	StallBeforeFirst bool          `koanf:"stall_before_first"` // never produce a token
	StallAfter       int           `koanf:"stall_after"`        // stall after N tokens; 0 = never
	CutAfter         int           `koanf:"cut_after"`          // end abruptly after N tokens; 0 = never
	MalformedAt      int           `koanf:"malformed_at"`       // tunnel: event N is invalid JSON; 0 = never
	ErrorStatus      int           `koanf:"error_status"`       // answer with this HTTP-style status; 0 = never
	ErrorCount       int           `koanf:"error_count"`        // how many attempts fail with ErrorStatus; 0 = all
	IgnoreCancel     bool          `koanf:"ignore_cancel"`      // keep the attempt after cancel (unconfirmed fence)
	Probe            string        `koanf:"probe"`              // available (default) or unavailable
	// UnhealthyAfterStall makes the probe report unavailable for this long
	// after each stall, then available again (a recovering provider).
	UnhealthyAfterStall time.Duration `koanf:"unhealthy_after_stall"`
	// StallAttempts limits stalls to the first N attempts; 0 = every attempt.
	StallAttempts int `koanf:"stall_attempts"`
}

// The execution paths a provider config can choose.
const (
	PathAuto       = "auto"
	PathNormalized = "normalized"
	PathTunnel     = "tunnel"
)

// surfaceNames are the surfaces a provider may declare.
var surfaceNames = wire.Surfaces

// defaultSurfaces are the surfaces each adapter's upstream serves natively.
var defaultSurfaces = map[string][]string{
	"openai": {wire.SurfaceChat, wire.SurfaceCompletions, wire.SurfaceEmbeddings},
	// /api/* natively; Ollama's /v1 for the endpoints iop does not translate
	"ollama": {wire.SurfaceOllama, wire.SurfaceCompletions, wire.SurfaceEmbeddings},
	"sim": {wire.SurfaceChat, wire.SurfaceResponses, wire.SurfaceCompletions, wire.SurfaceEmbeddings, wire.SurfaceModerations,
		wire.SurfaceImages, wire.SurfaceRerank, wire.SurfaceMessages, wire.SurfaceAudio},
}

// DefaultConfig returns a Config with every default set.
func DefaultConfig() Config {
	return Config{
		Metrics:         MetricsConfig{Listen: "127.0.0.1:9101"},
		Log:             LogConfig{Level: "info", Format: "json"},
		Liveness:        LivenessConfig{CloseGrace: DefaultCloseGrace},
		DrainTimeout:    30 * time.Second,
		GCHeadroomBytes: gcheadroom.Default,
	}
}

// LoadConfig reads a node configuration from path and the IOP_ environment,
// applies defaults and validates it.
func LoadConfig(path string) (Config, error) {
	c := DefaultConfig()
	if err := konfig.Load(path, &c); err != nil {
		return Config{}, err
	}
	if err := c.Resolve(); err != nil {
		if path == "" {
			path = "environment"
		}
		return Config{}, fmt.Errorf("config %s: %w", path, err)
	}
	return c, nil
}

var adapters = []string{"sim", "ollama", "openai"}

// Resolve validates c and fills derived defaults. Errors name the key.
func (c *Config) Resolve() error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: "+format, append([]any{key}, args...)...))
	}
	if c.NodeID == "" {
		bad("node_id", "required")
	} else if !validID(c.NodeID) {
		bad("node_id", "must be 1-64 characters of [A-Za-z0-9._-]")
	}
	if err := c.Tracing.Validate("tracing"); err != nil {
		errs = append(errs, err)
	}
	if c.Token == "" && c.TokenFile != "" {
		b, err := os.ReadFile(c.TokenFile)
		if err != nil {
			bad("token_file", "%v", err)
		}
		c.Token = strings.TrimSpace(string(b))
	}
	if c.Token == "" {
		bad("token", "required (or token_file, or IOP_TOKEN)")
	}
	if len(c.Edges) == 0 {
		bad("edges", "at least one edge is required")
	}
	for i, e := range c.Edges {
		if e.Address == "" {
			bad(fmt.Sprintf("edges[%d].address", i), "required")
		}
		if e.Resolve != "" && e.Resolve != "dns" {
			bad(fmt.Sprintf("edges[%d].resolve", i), "must be dns or empty")
		}
		if (e.TLS.CertFile == "") != (e.TLS.KeyFile == "") {
			bad(fmt.Sprintf("edges[%d].tls", i), "cert_file and key_file go together")
		}
	}
	if c.Liveness.CloseGrace <= 0 {
		c.Liveness.CloseGrace = DefaultCloseGrace
	}
	if c.DrainTimeout < 0 {
		bad("drain_timeout", "must not be negative")
	}
	if c.GCHeadroomBytes < 0 {
		bad("gc_headroom_bytes", "must not be negative (0 leaves the collector at the runtime's default)")
	}
	if len(c.Providers) == 0 {
		bad("providers", "at least one provider is required")
	}
	seen := map[string]bool{}
	for i := range c.Providers {
		key := fmt.Sprintf("providers[%d]", i)
		if seen[c.Providers[i].ID] {
			bad(key+".id", "duplicate id %q", c.Providers[i].ID)
		}
		seen[c.Providers[i].ID] = true
		errs = append(errs, c.Providers[i].resolve(key)...)
	}
	return errors.Join(errs...)
}

func (p *ProviderConfig) resolve(prefix string) []error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf(prefix+"."+key+": "+format, args...))
	}
	p.resolveIdentity(bad)
	p.resolvePath(bad)
	p.resolveUpstream(bad)
	return errs
}

// resolveIdentity checks what names the provider and what it serves.
func (p *ProviderConfig) resolveIdentity(bad func(key, format string, args ...any)) {
	if p.ID == "" || !validID(p.ID) {
		bad("id", "required, 1-64 characters of [A-Za-z0-9._-]")
	}
	if !slices.Contains(adapters, p.Adapter) {
		bad("adapter", "must be one of %s", strings.Join(adapters, ", "))
	}
	if len(p.Models) == 0 {
		bad("models", "at least one model is required")
	}
	if p.Target == "" && len(p.Models) > 0 {
		p.Target = p.Models[0]
	}
	if p.Capacity == 0 {
		p.Capacity = 4
	} else if p.Capacity < 0 {
		bad("capacity", "must be positive")
	}
	if err := execution.ValidateStallTimeoutMS(p.ResponseStallTimeoutMS); err != nil {
		bad("response_stall_timeout_ms", "%v", err)
	}
	if p.InstanceKey == "" {
		p.InstanceKey = strings.TrimRight(p.BaseURL, "/")
		if p.Adapter == "sim" {
			p.InstanceKey = "sim/" + p.ID
		}
	}
}

// resolvePath checks how requests reach the upstream: path, surfaces,
// prefill, non-stream handling.
func (p *ProviderConfig) resolvePath(bad func(key, format string, args ...any)) {
	switch p.Path {
	case "":
		p.Path = PathAuto
	case PathAuto, PathNormalized, PathTunnel:
	default:
		bad("path", "must be auto, normalized or tunnel")
	}
	if p.Surfaces == nil {
		p.Surfaces = defaultSurfaces[p.Adapter]
	}
	for i, s := range p.Surfaces {
		if !slices.Contains(surfaceNames, s) {
			bad(fmt.Sprintf("surfaces[%d]", i), "must be one of %s", strings.Join(surfaceNames, ", "))
		}
	}
	if p.Prefill == nil {
		v := p.Adapter == "sim" && p.Path != PathTunnel
		p.Prefill = &v
	}
	if *p.Prefill && p.Path == PathTunnel {
		bad("prefill", "needs path auto or normalized (a continuation runs translated)")
	}
	if len(p.PrefillFields) > 0 && p.Adapter != "openai" {
		bad("prefill_fields", "applies to adapter openai only")
	}
	switch p.NonStream {
	case "":
		p.NonStream = "stream"
	case "stream", "json":
	default:
		bad("non_stream", "must be stream or json")
	}
}

// resolveUpstream checks where the upstream is and its credential.
func (p *ProviderConfig) resolveUpstream(bad func(key, format string, args ...any)) {
	if p.Adapter != "sim" {
		if u, err := url.Parse(p.BaseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			bad("base_url", "an http(s) URL is required for adapter %s", p.Adapter)
		}
	}
	if p.APIKey == "" && p.APIKeyEnv != "" {
		v, ok := os.LookupEnv(p.APIKeyEnv)
		if !ok || v == "" {
			bad("api_key_env", "names the environment variable %s, which is not set (requests would go out without credentials)", p.APIKeyEnv)
		}
		p.APIKey = v
	}
	switch p.Sim.Probe {
	case "", "available", "unavailable":
	default:
		bad("sim.probe", "must be available or unavailable")
	}
}

// PathPolicy is p's path as advertised to the edge: auto, or the
// contract's execution path a forced path always takes.
func (p *ProviderConfig) PathPolicy() string {
	switch p.Path {
	case PathTunnel:
		return string(execution.ExecutionPathProviderTunnel)
	case PathNormalized:
		return string(execution.ExecutionPathNormalized)
	}
	return PathAuto
}

func validID(s string) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return false
		}
	}
	return true
}

// ReloadConfig is when the configuration file is re-read.
type ReloadConfig struct {
	Watch    bool          `koanf:"watch"`
	Interval time.Duration `koanf:"interval"`
}
