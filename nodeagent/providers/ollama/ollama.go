// Package ollama is the provider for an Ollama server. The normalized path
// speaks Ollama's native /api/chat (NDJSON) and reports usage from
// prompt_eval_count and eval_count; the tunnel path goes through Ollama's
// OpenAI-compatible /v1; the ollama_api command passes an allowlisted
// native request through; the probe lists /api/tags.
//
// Ollama answers 403 to a Host header that is not local when it listens on
// loopback. The node builds every upstream request for the configured base
// URL, so the Host is the base URL's host — never the client's.
package ollama

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/iopgw/iop/execution"
	"github.com/iopgw/iop/nodeagent/providers/httpx"
)

// Config configures an Ollama provider.
type Config struct {
	BaseURL     string // e.g. http://127.0.0.1:11434
	InstanceKey string
	Credentials httpx.Credentials
	Client      *http.Client
}

// Provider is an Ollama provider. It is safe for concurrent use.
type Provider struct {
	cfg  Config
	base string
}

var (
	_ execution.Provider       = (*Provider)(nil)
	_ execution.Tunneler       = (*Provider)(nil)
	_ execution.ProviderProber = (*Provider)(nil)
	_ execution.CommandHandler = (*Provider)(nil)
)

// New returns a provider.
func New(cfg Config) *Provider {
	if cfg.Client == nil {
		cfg.Client = httpx.NewClient(0)
	}
	return &Provider{cfg: cfg, base: strings.TrimRight(cfg.BaseURL, "/")}
}

// Tunnel implements [execution.Tunneler] through Ollama's /v1.
func (p *Provider) Tunnel(ctx context.Context, req *execution.ProviderTunnelRequest, emit *execution.FrameEmitter) error {
	if !strings.HasPrefix(req.Path, "/v1/") {
		return execution.NewFailure(execution.FailureCodeInvalidRequest, "tunnel paths start with /v1/")
	}
	hreq, err := httpx.NewRequest(ctx, req.Method, p.base+req.Path, req.Header, req.Body, p.cfg.Credentials)
	if err != nil {
		return execution.NewFailure(execution.FailureCodeInvalidRequest, err.Error())
	}
	return httpx.Tunnel(ctx, p.cfg.Client, hreq, emit)
}

// nativeAPI is the allowlist of native requests ollama_api passes through.
var nativeAPI = map[string]string{
	"/api/version": http.MethodGet, "/api/tags": http.MethodGet, "/api/ps": http.MethodGet,
	"/api/show": http.MethodPost, "/api/chat": http.MethodPost, "/api/generate": http.MethodPost,
	"/api/embed": http.MethodPost, "/api/embeddings": http.MethodPost,
}

// HandleCommand implements [execution.CommandHandler] for ollama_api.
func (p *Provider) HandleCommand(ctx context.Context, cmd *execution.CommandRequest, emit *execution.FrameEmitter) error {
	if cmd.Command != execution.CommandOllamaAPI {
		return execution.NewFailure(execution.FailureCodeUnsupported, "ollama handles only ollama_api")
	}
	method, ok := nativeAPI[cmd.Path]
	if !ok || (cmd.Method != method && !(method == http.MethodGet && cmd.Method == http.MethodHead)) {
		return execution.NewFailure(execution.FailureCodeCommandNotAllowed, fmt.Sprintf("ollama_api does not allow %s %s", cmd.Method, cmd.Path))
	}
	hdr := map[string][]string{"Accept": {"application/x-ndjson, application/json"}}
	hreq, err := httpx.NewRequest(ctx, cmd.Method, p.base+cmd.Path, hdr, cmd.Body, p.cfg.Credentials)
	if err != nil {
		return execution.NewFailure(execution.FailureCodeInvalidRequest, err.Error())
	}
	return httpx.Tunnel(ctx, p.cfg.Client, hreq, emit)
}

// ProbeTarget implements [execution.ProviderProber]: GET /api/tags; the
// exact target is available when listed (a name without a tag matches
// ":latest"), unavailable when not.
func (p *Provider) ProbeTarget(ctx context.Context, req execution.ProbeRequest) (execution.ProbeResult, error) {
	res := execution.ProbeResult{Adapter: "ollama", InstanceKey: p.cfg.InstanceKey, Target: req.Target}
	var tags struct {
		Models []struct {
			Name  string `json:"name"`
			Model string `json:"model"`
		} `json:"models"`
	}
	if err := httpx.ProbeJSON(ctx, p.cfg.Client, p.base+"/api/tags", p.cfg.Credentials, &tags); err != nil {
		return res, err
	}
	res.Status = execution.HealthUnavailable
	want := withTag(req.Target)
	for _, m := range tags.Models {
		if withTag(m.Name) == want || withTag(m.Model) == want {
			res.Status = execution.HealthAvailable
		}
	}
	return res, nil
}

func withTag(name string) string {
	if name != "" && !strings.Contains(name, ":") {
		return name + ":latest"
	}
	return name
}
