package gateway

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/iopgw/iop/codec/ollama"
	"github.com/iopgw/iop/codec/openai"
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
