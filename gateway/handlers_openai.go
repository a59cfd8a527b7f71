package gateway

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/iopgw/iop/codec/ollama"
	"github.com/iopgw/iop/codec/openai"
	"github.com/iopgw/iop/execution"
	"github.com/iopgw/iop/internal/httphdr"
	"github.com/iopgw/iop/internal/ids"
	"github.com/iopgw/iop/streamgate"
	"github.com/iopgw/iop/wire"
)

// chatCompletions serves POST /v1/chat/completions.
func (g *Gateway) chatCompletions(c echo.Context) error {
	body, e := g.readBody(c)
	if e != nil {
		return writeError(c, e)
	}
	req, e := openai.DecodeChatRequest(body, g.limits(c))
	if e != nil {
		return writeError(c, e)
	}
	if e := g.knownModel(c, req.Model); e != nil {
		return writeError(c, e)
	}
	run := req.RunRequest()
	run.ChatBody, run.Stream = body, req.Stream
	sreq := g.baseRequest(c, streamgate.SurfaceChat, req.Model, body, run, "/v1/chat/completions")
	sreq.Stream, sreq.IncludeUsage = req.Stream, req.IncludeUsage
	sreq.Work.Refuse = translationRefusal(nil, req.Neutral, body)
	if req.N > 1 {
		sreq.Need, sreq.Work.Run = streamgate.NeedTunnel, nil // n > 1 is tunnel-only
	}
	return g.serve(c, sreq)
}

// responses serves POST /v1/responses.
func (g *Gateway) responses(c echo.Context) error {
	body, e := g.readBody(c)
	if e != nil {
		return writeError(c, e)
	}
	req, e := openai.DecodeResponsesRequest(body, g.limits(c))
	if e != nil {
		return writeError(c, e)
	}
	if e := g.knownModel(c, req.Model); e != nil {
		return writeError(c, e)
	}
	run := req.RunRequest()
	chatBody, terr := openai.ResponsesToChat(body)
	run.ChatBody, run.Stream = chatBody, req.Stream
	sreq := g.baseRequest(c, streamgate.SurfaceResponses, req.Model, body, run, "/v1/responses")
	sreq.Stream, sreq.Echo, sreq.SideEffects = req.Stream, req.Echo(), req.ServerTools
	sreq.Echo.Store = new(false) // a translated response is not stored anywhere
	sreq.Work.Refuse = translationRefusal(terr, req.Neutral, chatBody)
	if terr != nil {
		// State, server tools and the like live upstream: only a provider
		// that serves the Responses API natively can take the request.
		if !g.pool.Tunnels(req.Model, wire.SurfaceResponses) {
			return writeError(c, terr)
		}
		sreq.Need, sreq.Work.Run = streamgate.NeedTunnel, nil
	}
	return g.serve(c, sreq)
}

// tunnelOnly serves OpenAI endpoints that only tunnel (embeddings, legacy
// completions), with the same admission, lease and cancellation.
func (g *Gateway) tunnelOnly(path string) echo.HandlerFunc {
	return func(c echo.Context) error {
		body, e := g.readBody(c)
		if e != nil {
			return writeError(c, e)
		}
		if e := openai.CheckBody(body, g.limits(c)); e != nil {
			return writeError(c, e)
		}
		var head struct {
			Model  *string `json:"model"`
			Stream *bool   `json:"stream"`
		}
		if err := json.Unmarshal(body, &head); err != nil {
			return writeError(c, openai.InvalidRequest("", "Invalid type in the request body: %v.", err))
		}
		if head.Model == nil || *head.Model == "" {
			return writeError(c, openai.InvalidRequest("model", "you must provide a model parameter"))
		}
		if e := g.knownModel(c, *head.Model); e != nil {
			return writeError(c, e)
		}
		if e := g.carried(c, *head.Model, path); e != nil {
			return writeError(c, e)
		}
		sreq := g.baseRequest(c, streamgate.SurfaceTunnelOnly, *head.Model, body, nil, path)
		sreq.Need, sreq.Stream = streamgate.NeedTunnel, head.Stream != nil && *head.Stream
		return g.serve(c, sreq)
	}
}

// baseRequest builds the runtime request shared by the /v1 endpoints:
// the normalized run (if any) and the tunnel form of the same request.
func (g *Gateway) baseRequest(c echo.Context, s streamgate.Surface, model string, body []byte, run *execution.RunRequest, path string) *streamgate.Request {
	runID := "run_" + ids.New()
	if run != nil {
		run.RunID, run.SessionID = runID, c.Request().Header.Get("X-Session-Id")
	}
	hdr := httphdr.ForUpstream(c.Request().Header, httphdr.CredentialScoped...)
	if run != nil {
		run.Header = httphdr.Propagate(c.Request().Header)
	}
	tunnel := &execution.ProviderTunnelRequest{RunID: runID, Model: model, Method: http.MethodPost, Path: path, Header: hdr, Body: body}
	cfg := g.confOf(c)
	sreq := &streamgate.Request{Surface: s, Model: model, Fallbacks: cfg.model(model).Fallbacks,
		Work: streamgate.Work{Run: run, Tunnel: tunnel}, RequestID: access(c).RequestID, PromptEstimate: streamgate.EstimatePromptTokens(body)}
	if len(body) <= cfg.StreamGate.SnapshotMaxBytes {
		sreq.Snapshot = body
	}
	sreq.RebuildForModel = func(m string) (streamgate.Work, error) {
		nb, err := openai.WithModel(body, m)
		if err != nil {
			return streamgate.Work{}, err
		}
		w := streamgate.Work{Tunnel: &execution.ProviderTunnelRequest{RunID: runID, Model: m, Method: http.MethodPost, Path: path, Header: hdr, Body: nb}}
		if sreq.Work.Run != nil {
			r := *sreq.Work.Run
			r.Model = m
			w.Run = &r
		}
		return w, nil
	}
	return sreq
}

// translationRefusal says why a request cannot take the translated path
// to a provider of a given adapter: terr, when the request could not be
// translated into a Chat body (OpenAI-compatible upstreams); for an
// Ollama-native upstream, also what its neutral form lost or a Chat field
// Ollama cannot honour.
func translationRefusal(terr, neutral *openai.Error, chatBody []byte) func(adapter string) *openai.Error {
	return func(adapter string) *openai.Error {
		if terr != nil {
			return terr
		}
		if adapter != "ollama" {
			return nil
		}
		if neutral != nil {
			return neutral
		}
		if f := ollama.ChatRefusal(chatBody); f != "" {
			return openai.InvalidRequest(f, "'%s' cannot be used with this model: its provider (Ollama) has no equivalent.", f)
		}
		return nil
	}
}

// starting reports whether the edge is still waiting for its nodes: within
// StartupGrace of start, until every configured node has connected once.
func (g *Gateway) starting() bool {
	return time.Since(g.started) < g.config().NodeLink.StartupGrace && !g.hub.AllSeen()
}

// knownModel answers a model no connected provider (nor a fallback's)
// serves: 503 model_unavailable with Retry-After when the model is
// configured or granted — its nodes are away, reconnecting or draining, so
// a retry will do — or was served by a node since the edge started (it is
// reconnecting), or while the edge is starting and its nodes have not all
// connected yet; 404 model_not_found only for a model nothing is
// configured to serve and no node ever served.
func (g *Gateway) knownModel(c echo.Context, model string) *openai.Error {
	access(c).Model = model // the access log names it, whatever the answer
	cfg := g.confOf(c)
	if g.pool.Known(model) {
		return nil
	}
	for _, f := range cfg.model(model).Fallbacks {
		if g.pool.Known(f) {
			return nil
		}
	}
	if cfg.configured(model) || g.starting() || g.pool.Served(model) {
		return openai.ModelUnavailable(model)
	}
	return openai.ModelNotFound(model)
}

type modelObject struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}

// listModels serves GET /v1/models: the union of models served by
// admissible providers.
func (g *Gateway) listModels(c echo.Context) error {
	out := struct {
		Object string        `json:"object"`
		Data   []modelObject `json:"data"`
	}{Object: "list", Data: []modelObject{}}
	for _, m := range g.modelNames(c) {
		out.Data = append(out.Data, modelObject{ID: m, Object: "model", Created: g.started.Unix(), OwnedBy: "iop"})
	}
	return c.JSON(http.StatusOK, out)
}

// getModel serves GET /v1/models/{model}.
func (g *Gateway) getModel(c echo.Context) error {
	id := c.Param("model")
	for _, m := range g.modelNames(c) {
		if m == id {
			return c.JSON(http.StatusOK, modelObject{ID: m, Object: "model", Created: g.started.Unix(), OwnedBy: "iop"})
		}
	}
	return writeError(c, openai.ModelNotFound(id))
}

// carried answers a request for an endpoint no connected provider of the
// model (nor of its fallbacks) serves: a 404 naming the model and the
// endpoint, rather than an upstream's "Invalid URL" or a 503 that a
// retry would not change.
func (g *Gateway) carried(c echo.Context, model, path string) *openai.Error {
	surface := wire.SurfaceOfPath(path)
	if !g.pool.Known(model) || g.pool.Carries(model, surface) {
		return nil
	}
	for _, f := range g.confOf(c).model(model).Fallbacks {
		if g.pool.Carries(f, surface) {
			return nil
		}
	}
	return &openai.Error{Status: http.StatusNotFound, Type: openai.TypeInvalidRequest, Code: "model_not_supported", Param: "model",
		Message: fmt.Sprintf("No provider of the model '%s' serves %s: its providers do not declare the %s surface.", ids.Clip(model), path, surface)}
}
