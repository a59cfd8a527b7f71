package gateway

import (
	"cmp"
	"slices"

	"github.com/labstack/echo/v4"

	"github.com/iopgw/iop/codec/openai"
	"github.com/iopgw/iop/gateway/tenancy"
	"github.com/iopgw/iop/streamgate"
)

// admit admits a request whose body has been read: its key is checked
// again against the running configuration (a reload between its headers
// and its admission may have removed or changed it), then the key's
// limits with the request's reservation: its prompt estimate and its
// output limit (the request's own, else auth.default_max_tokens).
func (g *Gateway) admit(c echo.Context, a *accessInfo, sreq *streamgate.Request) (*tenancy.Admission, *openai.Error) {
	if result, keyID := g.auth.Verify(c.Request()); result != tenancy.AuthOK || keyID != a.KeyID {
		return nil, tenancy.RevokedKey()
	}
	return g.tenants.Admit(a.KeyID, sreq.Model, sreq.PromptEstimate+outputReserve(g.confOf(c), sreq), sreq.ResponseHeader)
}

// outputReserve is the output tokens a request reserves.
func outputReserve(cfg *Config, sreq *streamgate.Request) int64 {
	if sreq.Surface != nil && sreq.Surface.NoOutput {
		return 0 // an embedding, a token count: no output tokens
	}
	if sreq.OutputLimit > 0 {
		return sreq.OutputLimit
	}
	if r := sreq.Work.Run; r != nil && r.Params.MaxTokens != nil && *r.Params.MaxTokens > 0 {
		return *r.Params.MaxTokens
	}
	return cmp.Or(cfg.Auth.DefaultMaxTokens, 1024)
}

// allowedFallbacks drops from the request's fallback chain the models its
// key may not use (an allowlist applies to every model a request may be
// served by), and says how many it dropped.
func (g *Gateway) allowedFallbacks(key string, sreq *streamgate.Request) int {
	n := len(sreq.Fallbacks)
	sreq.Fallbacks = slices.DeleteFunc(slices.Clone(sreq.Fallbacks), func(m string) bool { return !g.tenants.Allows(key, m) })
	return n - len(sreq.Fallbacks)
}
