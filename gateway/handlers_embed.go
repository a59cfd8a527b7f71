package gateway

import (
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/iopgw/iop/codec/ollama"
	"github.com/iopgw/iop/codec/openai"
	"github.com/iopgw/iop/execution"
	"github.com/iopgw/iop/internal/httphdr"
	"github.com/iopgw/iop/internal/ids"
	"github.com/iopgw/iop/streamgate"
)

func (g *Gateway) ollamaEmbed(c echo.Context) error      { return g.ollamaEmbedding(c, false) }
func (g *Gateway) ollamaEmbeddings(c echo.Context) error { return g.ollamaEmbedding(c, true) }

// ollamaEmbedding serves Ollama's /api/embed and the older
// /api/embeddings: the original body to a native Ollama provider, else
// the request as OpenAI embeddings (POST /v1/embeddings) with its answer
// reshaped into Ollama's (errors too, as {"error": …}).
func (g *Gateway) ollamaEmbedding(c echo.Context, legacy bool) error {
	body, e := g.readBody(c)
	if e != nil {
		return writeError(c, e)
	}
	req, e := ollama.DecodeEmbed(body, legacy)
	if e != nil {
		return writeError(c, e)
	}
	if refused, err := g.ollamaRefusesModel(c, req.Model); refused {
		return err
	}
	path := "/api/embed"
	if legacy {
		path = "/api/embeddings"
	}
	runID := "run_" + ids.New()
	native := &execution.CommandRequest{Command: execution.CommandOllamaAPI, Method: http.MethodPost, Path: path, Body: body, RunID: runID}
	tunnel := &execution.ProviderTunnelRequest{RunID: runID, Model: req.Model, Method: http.MethodPost, Path: "/v1/embeddings",
		Header: httphdr.ForUpstream(c.Request().Header, httphdr.CredentialScoped...), Body: req.OpenAIBody()}
	sreq := &streamgate.Request{Surface: streamgate.SurfaceOllamaEmbed, Model: req.Model, Need: streamgate.NeedOllamaAware,
		Work: streamgate.Work{Native: native, Tunnel: tunnel}, RequestID: access(c).RequestID, PromptEstimate: streamgate.EstimatePromptTokens(body)}
	if len(body) <= g.confOf(c).StreamGate.SnapshotMaxBytes {
		sreq.Snapshot = body
	}
	sreq.Reshape = embedReshape(req, time.Now())
	return g.serve(c, sreq)
}

// embedReshape turns an OpenAI embeddings answer (or error) into the
// Ollama answer of req; an answer that does not translate is a 502 in
// Ollama's error shape, never a made-up vector.
func embedReshape(req ollama.EmbedRequest, start time.Time) func(int, http.Header, []byte) (int, http.Header, []byte) {
	return func(status int, h http.Header, body []byte) (int, http.Header, []byte) {
		out := http.Header{"Content-Type": {"application/json; charset=utf-8"}}
		if id := h.Get("X-Request-Id"); id != "" {
			out.Set("X-Request-Id", id)
		}
		if status >= 400 {
			ue := openai.ParseError(status, h, body)
			return status, out, (&ollama.Error{Status: status, Message: ue.Message}).Body()
		}
		b, err := req.FromOpenAI(body, time.Since(start))
		if err != nil {
			return http.StatusBadGateway, out, (&ollama.Error{Status: http.StatusBadGateway, Message: err.Error()}).Body()
		}
		return status, out, b
	}
}
