package gateway

import (
	"encoding/json"
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

// ollamaVersionString is the Ollama API version iop's /api surface
// follows.
const ollamaVersionString = "0.12.0"

func (g *Gateway) ollamaRoot(c echo.Context) error {
	return c.String(http.StatusOK, "Ollama is running")
}

func (g *Gateway) ollamaVersion(c echo.Context) error {
	return c.JSON(http.StatusOK, map[string]string{"version": ollamaVersionString})
}

type ollamaModel struct {
	Name       string         `json:"name"`
	Model      string         `json:"model"`
	ModifiedAt time.Time      `json:"modified_at"`
	Size       int64          `json:"size"`
	Digest     string         `json:"digest"`
	Details    map[string]any `json:"details"`
	ExpiresAt  *time.Time     `json:"expires_at,omitempty"`
	SizeVRAM   *int64         `json:"size_vram,omitempty"`
}

func (g *Gateway) ollamaModels(c echo.Context, ps bool) []ollamaModel {
	out := []ollamaModel{}
	for _, m := range g.modelNames(c) {
		om := ollamaModel{Name: m, Model: m, ModifiedAt: g.started.UTC(), Digest: HashToken(m)[:12],
			Details: map[string]any{"format": "gguf", "family": "iop", "families": []string{"iop"}, "parameter_size": "", "quantization_level": ""}}
		if ps {
			exp := time.Now().Add(5 * time.Minute).UTC()
			zero := int64(0)
			om.ExpiresAt, om.SizeVRAM = &exp, &zero
		}
		out = append(out, om)
	}
	return out
}

func (g *Gateway) ollamaTags(c echo.Context) error {
	return c.JSON(http.StatusOK, map[string]any{"models": g.ollamaModels(c, false)})
}

func (g *Gateway) ollamaPS(c echo.Context) error {
	return c.JSON(http.StatusOK, map[string]any{"models": g.ollamaModels(c, true)})
}

func (g *Gateway) ollamaShow(c echo.Context) error {
	body, e := g.readBody(c)
	if e != nil {
		return writeError(c, e)
	}
	var req struct {
		Model string `json:"model"`
		Name  string `json:"name"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return writeError(c, openai.InvalidRequest("", "invalid JSON: %v", err))
	}
	if req.Model == "" {
		req.Model = req.Name
	}
	if req.Model == "" {
		return writeError(c, openai.InvalidRequest("model", "model is required"))
	}
	for _, m := range g.modelNames(c) {
		if m == req.Model {
			return c.JSON(http.StatusOK, map[string]any{
				"modelfile": "# served by iop", "parameters": "", "template": "",
				"details":      map[string]any{"format": "gguf", "family": "iop", "families": []string{"iop"}},
				"model_info":   map[string]any{},
				"capabilities": []string{"completion", "tools"},
				"modified_at":  g.started.UTC(),
			})
		}
	}
	nf := ollama.ModelNotFound(req.Model)
	return c.JSONBlob(nf.Status, nf.Body())
}

// ollamaRefusesModel answers, in Ollama's shapes (its own "model not
// found" for a 404), a model knownModel refuses, and reports whether it
// did; err is the answer's write error.
func (g *Gateway) ollamaRefusesModel(c echo.Context, model string) (refused bool, err error) {
	e := g.knownModel(c, model)
	switch {
	case e == nil:
		return false, nil
	case e.Status == http.StatusNotFound:
		nf := ollama.ModelNotFound(model)
		return true, c.JSONBlob(nf.Status, nf.Body())
	}
	return true, writeError(c, e)
}

func (g *Gateway) ollamaChat(c echo.Context) error     { return g.ollamaRun(c, false) }
func (g *Gateway) ollamaGenerate(c echo.Context) error { return g.ollamaRun(c, true) }

// ollamaRun serves /api/chat and /api/generate: native bytes from an
// Ollama provider, or any provider's normalized output rendered as
// Ollama NDJSON.
func (g *Gateway) ollamaRun(c echo.Context, generate bool) error {
	body, e := g.readBody(c)
	if e != nil {
		return writeError(c, e)
	}
	req, oe := ollama.Decode(body, generate, g.confOf(c).Limits.MaxDepth)
	if oe != nil {
		return c.JSONBlob(oe.Status, oe.Body())
	}
	if refused, err := g.ollamaRefusesModel(c, req.Model); refused {
		return err
	}
	surface, path := streamgate.SurfaceOllamaChat, "/api/chat"
	if generate {
		surface, path = streamgate.SurfaceOllamaGenerate, "/api/generate"
	}
	runID := "run_" + ids.New()
	chatBody, terr := ollama.ToChat(body, generate)
	run := &execution.RunRequest{RunID: runID, Model: req.Model, Messages: req.Messages, Params: req.Params, ChatBody: chatBody,
		Stream: req.Stream, Header: httphdr.Propagate(c.Request().Header)}
	native := &execution.CommandRequest{Command: execution.CommandOllamaAPI, Method: http.MethodPost, Path: path, Body: body, RunID: runID}
	refuse := func(adapter string) *openai.Error {
		if terr == nil || adapter != "openai" {
			return nil
		}
		return openai.InvalidRequest("", "%s", terr.Message)
	}
	sreq := &streamgate.Request{Surface: surface, Stream: req.Stream, Model: req.Model, Need: streamgate.NeedOllamaAware,
		Work: streamgate.Work{Run: run, Native: native, Refuse: refuse}, RequestID: access(c).RequestID, PromptEstimate: streamgate.EstimatePromptTokens(body)}
	if len(body) <= g.confOf(c).StreamGate.SnapshotMaxBytes {
		sreq.Snapshot = body
	}
	return g.serve(c, sreq)
}
