package gateway

import (
	"github.com/labstack/echo/v4"

	"github.com/iopgw/iop/codec/anthropic"
	"github.com/iopgw/iop/codec/openai"
	"github.com/iopgw/iop/streamgate"
)

// messages serves POST /v1/messages and /v1/messages/count_tokens:
// Anthropic's Messages API, passed through byte for byte to providers
// that declare the messages surface (vLLM, llama.cpp, Ollama and the sim
// serve it), with the pipeline every surface has — keys (Authorization
// or x-api-key), limits, budgets and usage, failover before commit,
// typed terminals and errors in Anthropic's shape. anthropic-version and
// anthropic-beta are forwarded. A model whose providers do not serve the
// surface is a 404 naming it (no translation to Chat yet).
func (g *Gateway) messages(path string) echo.HandlerFunc {
	return func(c echo.Context) error {
		body, e := g.readBody(c)
		if e == nil {
			e = openai.CheckBody(body, g.limits(c)) // strict JSON, as on every surface
		}
		if e != nil {
			return writeError(c, e)
		}
		decode := anthropic.Decode
		if path != "/v1/messages" {
			decode = anthropic.DecodeCount
		}
		req, ae := decode(body)
		if ae != nil {
			return c.JSONBlob(ae.Status, ae.Body())
		}
		if e := g.knownModel(c, req.Model); e != nil {
			return writeError(c, e)
		}
		if e := g.carried(c, req.Model, path); e != nil {
			return writeError(c, e)
		}
		sreq := g.baseRequest(c, streamgate.SurfaceMessages, req.Model, body, nil, path)
		sreq.Need, sreq.Stream, sreq.OutputLimit = streamgate.NeedTunnel, req.Stream, req.MaxTokens
		return g.serve(c, sreq)
	}
}
