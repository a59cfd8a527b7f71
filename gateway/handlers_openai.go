package gateway

import (
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/iopgw/iop/codec/anthropic"
	"github.com/iopgw/iop/codec/openai"
	"github.com/iopgw/iop/internal/ids"
)

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
// admissible providers (in Anthropic's shape to an Anthropic client).
func (g *Gateway) listModels(c echo.Context) error {
	if anthropicClient(c) {
		return g.listAnthropicModels(c)
	}
	out := struct {
		Object string        `json:"object"`
		Data   []modelObject `json:"data"`
	}{Object: "list", Data: []modelObject{}}
	for _, m := range g.modelNames(c) {
		out.Data = append(out.Data, modelObject{ID: m, Object: "model", Created: g.started.Unix(), OwnedBy: "iop"})
	}
	return c.JSON(http.StatusOK, out)
}

// getModel serves GET /v1/models/{model} (in Anthropic's shape to an
// Anthropic client).
func (g *Gateway) getModel(c echo.Context) error {
	id := ids.PathParam(c.Param("model"))
	for _, m := range g.modelNames(c) {
		switch {
		case m != id:
		case anthropicClient(c):
			return c.JSON(http.StatusOK, anthropic.ModelInfoOf(m))
		default:
			return c.JSON(http.StatusOK, modelObject{ID: m, Object: "model", Created: g.started.Unix(), OwnedBy: "iop"})
		}
	}
	return writeError(c, openai.ModelNotFound(id))
}

// storedResponse serves a request naming a stored response where it is kept.
func (g *Gateway) storedResponse(c echo.Context) error {
	body, e := g.readBody(c)
	if e != nil {
		return writeError(c, e)
	}
	sreq, e := g.stored.Request(c.Request(), body, ids.PathParam(c.Param("id")), access(c).KeyID, access(c).RequestID)
	if e != nil {
		return writeError(c, e)
	}
	return g.serve(c, sreq)
}
