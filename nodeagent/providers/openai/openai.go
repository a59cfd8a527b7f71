// Package openai is the provider for any OpenAI-compatible server — vLLM,
// llama.cpp server, LM Studio, Ollama's /v1, OpenAI itself. The tunnel
// path carries the client's request and the upstream's status, headers
// and bytes unchanged; the normalized path speaks streaming Chat
// Completions upstream and turns its chunks into execution events. The
// probe lists /v1/models and looks for the exact target.
package openai

import (
	"context"
	"net/http"
	"strings"

	"github.com/iopgw/iop/execution"
	"github.com/iopgw/iop/nodeagent/providers/httpx"
)

// Config configures an OpenAI-compatible provider.
type Config struct {
	// BaseURL is the API root including its version prefix, e.g.
	// http://127.0.0.1:8000/v1 or https://api.openai.com/v1.
	BaseURL     string
	InstanceKey string
	Adapter     string // the adapter name reported by probes; default "openai"
	Credentials httpx.Credentials
	Client      *http.Client // default httpx.NewClient(0)
	// NonStream is how a client's non-stream request reaches the upstream
	// on the normalized path: NonStreamStream (default) or NonStreamJSON.
	NonStream string
	// PrefillFields are set in the body of a continuation request only
	// (e.g. vLLM's continue_final_message).
	PrefillFields map[string]any
	// OnMalformed, if set, is called for each upstream event skipped
	// because it was not the JSON expected.
	OnMalformed func()
}

// The NonStream choices.
const (
	// NonStreamStream sends it as a stream: the watchdog sees every token,
	// so a long answer is never mistaken for a stall; the upstream sees
	// stream: true.
	NonStreamStream = "stream"
	// NonStreamJSON sends it as the client did and reads the upstream's own
	// JSON answer (its usage and fields exactly); the watchdog sees no
	// progress until the whole answer arrives, so the stall timeout must
	// exceed the longest answer.
	NonStreamJSON = "json"
)

func (p *Provider) malformed() {
	if p.cfg.OnMalformed != nil {
		p.cfg.OnMalformed()
	}
}

// Provider is an OpenAI-compatible provider. It is safe for concurrent use.
type Provider struct {
	cfg  Config
	base string // BaseURL without trailing slash
	root string // BaseURL without its /v1 suffix: where tunnel paths go
}

var (
	_ execution.Provider       = (*Provider)(nil)
	_ execution.Tunneler       = (*Provider)(nil)
	_ execution.ProviderProber = (*Provider)(nil)
)

// New returns a provider.
func New(cfg Config) *Provider {
	if cfg.Client == nil {
		cfg.Client = httpx.NewClient(0)
	}
	if cfg.Adapter == "" {
		cfg.Adapter = "openai"
	}
	base := strings.TrimRight(cfg.BaseURL, "/")
	return &Provider{cfg: cfg, base: base, root: strings.TrimSuffix(base, "/v1")}
}

// Tunnel implements [execution.Tunneler]. The request path (which starts
// with /v1) is appended to the base URL's root, so a BaseURL of
// https://host/openai/v1 sends /v1/chat/completions to
// https://host/openai/v1/chat/completions.
func (p *Provider) Tunnel(ctx context.Context, req *execution.ProviderTunnelRequest, emit *execution.FrameEmitter) error {
	if !strings.HasPrefix(req.Path, "/v1/") {
		return execution.NewFailure(execution.FailureCodeInvalidRequest, "tunnel paths start with /v1/")
	}
	hreq, err := httpx.NewRequest(ctx, req.Method, p.root+req.Path, req.Header, req.Body, p.cfg.Credentials)
	if err != nil {
		return execution.NewFailure(execution.FailureCodeInvalidRequest, err.Error())
	}
	return httpx.Tunnel(ctx, p.cfg.Client, hreq, emit)
}

// ProbeTarget implements [execution.ProviderProber]: GET /models, and the
// exact target is available when listed, unavailable when not.
func (p *Provider) ProbeTarget(ctx context.Context, req execution.ProbeRequest) (execution.ProbeResult, error) {
	res := execution.ProbeResult{Adapter: p.cfg.Adapter, InstanceKey: p.cfg.InstanceKey, Target: req.Target}
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := httpx.ProbeJSON(ctx, p.cfg.Client, p.base+"/models", p.cfg.Credentials, &list); err != nil {
		return res, err
	}
	res.Status = execution.HealthUnavailable
	for _, m := range list.Data {
		if m.ID == req.Target {
			res.Status = execution.HealthAvailable
		}
	}
	return res, nil
}
