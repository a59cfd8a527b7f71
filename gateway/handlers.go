package gateway

import (
	"fmt"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/iopgw/iop/codec/openai"
	"github.com/iopgw/iop/execution"
	"github.com/iopgw/iop/internal/httphdr"
	"github.com/iopgw/iop/internal/ids"
	"github.com/iopgw/iop/streamgate"
	"github.com/iopgw/iop/surface"
)

// handle serves one surface's route, for every surface alike: read the
// body, decode it in the surface's codec, check the model (and, for a
// surface that only tunnels, that a provider of it serves the surface),
// build the runtime request and serve it. Refusals are in the surface's
// error shape (writeError finds it by the path).
func (g *Gateway) handle(s *surface.Surface) echo.HandlerFunc {
	return func(c echo.Context) error {
		sreq, e := g.accept(c, s)
		if e != nil {
			return writeError(c, e)
		}
		if sreq.Answer != nil {
			return g.answer(c, sreq)
		}
		return g.serve(c, sreq)
	}
}

// accept reads and decodes a surface's request and builds its runtime
// request, or refuses it. It is apart from the handler, whose frame is
// under every held stream's wait.
func (g *Gateway) accept(c echo.Context, s *surface.Surface) (*streamgate.Request, *openai.Error) {
	body, e := g.readBody(c)
	if e != nil {
		return nil, e
	}
	call, e := s.Decode(body, c.Request().Header.Get("Content-Type"), g.limits(c))
	if e != nil {
		return nil, e
	}
	if e := g.knownModel(c, call.Model); e != nil {
		if e.Status == http.StatusNotFound {
			e = s.Shape.ModelNotFound(call.Model, e)
			if call.DefaultModel {
				e.Message = fmt.Sprintf("The request names no model, and the API's default, `%s`, is not served here: name a model, or serve `%[1]s` (an alias of the model you run).", call.Model)
			}
		}
		return nil, e
	}
	if s.TunnelOnly {
		if e := g.carried(c, call.Model, s); e != nil {
			return nil, e
		}
	}
	if call.Untranslated != nil && !g.pool.Tunnels(call.Model, s.Serves) {
		return nil, call.Untranslated
	}
	return g.request(c, s, call, body), nil
}

// promptEstimate estimates the prompt tokens of a call's body, which its
// decode may have checked already.
func promptEstimate(call *surface.Call, body []byte) int64 {
	if call.Checked {
		return streamgate.EstimateCheckedPromptTokens(body)
	}
	return streamgate.EstimatePromptTokens(body)
}

// request builds the runtime request of a decoded call: its normalized
// run (if any), its tunnel form (the body, or the OpenAI request the
// surface sends instead), its native Ollama form, and how each is rebuilt
// for a fallback model — the one rewrite, of the model's bytes only.
func (g *Gateway) request(c echo.Context, s *surface.Surface, call *surface.Call, body []byte) *streamgate.Request {
	runID := ids.NewWith("run_")
	cfg := g.confOf(c)
	in := c.Request().Header
	sreq := &streamgate.Request{Surface: s, Model: call.Model, Stream: call.Stream, IncludeUsage: call.IncludeUsage,
		Fallbacks: cfg.model(call.Model).Fallbacks, Echo: call.Echo, SideEffects: call.SideEffects, OutputLimit: call.OutputLimit,
		Reshape: call.Reshape, RequestID: access(c).RequestID, PromptEstimate: promptEstimate(call, body), Answer: call.Answer, Prefill: call.Prefill, Uncharged: s.Counts}
	sreq.Work.Refuse = call.Refuse
	switch {
	case s.Native:
		sreq.Need = streamgate.NeedOllamaAware
	case call.Run == nil:
		sreq.Need = streamgate.NeedTunnel
	}
	if len(body) <= cfg.StreamGate.SnapshotMaxBytes {
		sreq.Snapshot = body
	}
	if run := call.Run; run != nil {
		run.RunID, run.SessionID, run.Header = runID, in.Get("X-Session-Id"), httphdr.Propagate(in)
		sreq.Work.Run = run
	}
	var tunnel *execution.ProviderTunnelRequest
	if s.Tunnels {
		path, tbody := s.Path, body
		if call.TunnelPath != "" {
			path = call.TunnelPath
		}
		if call.TunnelBody != nil {
			tbody = call.TunnelBody
		}
		tunnel = &execution.ProviderTunnelRequest{RunID: runID, Model: call.Model, Method: http.MethodPost, Path: path,
			Header: httphdr.ForUpstream(in, httphdr.CredentialScoped...), Body: tbody}
		sreq.Work.Tunnel = tunnel
	}
	if s.Native {
		sreq.Work.Native = &execution.CommandRequest{Command: execution.CommandOllamaAPI, Method: http.MethodPost, Path: s.Path, Body: body, RunID: runID}
	}
	g.stored.Pin(sreq, call.Echo.PreviousResponseID, access(c).KeyID)
	base := sreq.Work
	sreq.RebuildForModel = func(m string) (streamgate.Work, error) { return forModel(base, m) }
	return sreq
}

// showNative answers an Ollama /api/show from a provider of the model
// speaking Ollama's API natively, as any request to it is served (keys,
// limits, failover before commit), charged nothing and without fallback
// models: another model's details are not this one's. False when no such
// provider is admissible.
func (g *Gateway) showNative(c echo.Context, model string, body []byte) (bool, error) {
	if !g.pool.SpeaksOllama(model) {
		return false, nil
	}
	show := &execution.CommandRequest{Command: execution.CommandOllamaAPI, Method: http.MethodPost, Path: surface.OllamaShow.Path, Body: body, RunID: ids.NewWith("run_")}
	sreq := &streamgate.Request{Surface: surface.OllamaShow, Model: model, Need: streamgate.NeedOllamaAPI, Uncharged: true,
		RequestID: access(c).RequestID, Work: streamgate.Work{Native: show}}
	return true, g.serve(c, sreq)
}

// forModel is w for model m: each form's body with the model's bytes
// replaced (every other byte as the client sent it; a multipart form's
// model field, for the tunnel).
func forModel(w streamgate.Work, m string) (streamgate.Work, error) {
	out := streamgate.Work{Refuse: w.Refuse}
	if t := w.Tunnel; t != nil {
		nb, err := openai.WithBodyModel(t.Body, http.Header(t.Header).Get("Content-Type"), m)
		if err != nil {
			return streamgate.Work{}, err
		}
		nt := *t
		nt.Model, nt.Body = m, nb
		out.Tunnel = &nt
	}
	if n := w.Native; n != nil {
		nb, err := openai.WithModel(n.Body, m)
		if err != nil {
			return streamgate.Work{}, err
		}
		nn := *n
		nn.Body = nb
		out.Native = &nn
	}
	if w.Run != nil {
		r := *w.Run
		r.Model = m
		out.Run = &r
	}
	return out, nil
}

// carried answers a request for a surface no connected provider of the
// model (nor of its fallbacks) serves: a 404 naming the model and the
// route, rather than an upstream's "Invalid URL" or a 503 that a retry
// would not change.
func (g *Gateway) carried(c echo.Context, model string, s *surface.Surface) *openai.Error {
	if !g.pool.Known(model) || g.pool.Carries(model, s.Serves) {
		return nil
	}
	for _, f := range g.confOf(c).model(model).Fallbacks {
		if g.pool.Carries(f, s.Serves) {
			return nil
		}
	}
	return s.NotServed(model)
}
