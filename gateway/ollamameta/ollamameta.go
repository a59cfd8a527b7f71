// Package ollamameta answers the Ollama API's routes about models rather
// than with them — the server check, version, tags, ps, show and pull —
// from the models the edge serves, without reaching a provider (show
// hands a model with a native Ollama provider back to the gateway); the
// routes that would change those models (create, copy, push, delete,
// blobs) are refused.
package ollamameta

import (
	"encoding/json"
	"net/http"
	"slices"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/iopgw/iop/codec/ollama"
	"github.com/iopgw/iop/codec/openai"
	"github.com/iopgw/iop/internal/ids"
)

// Version is the Ollama API version iop's /api surface follows.
const Version = "0.12.0"

// Server answers the routes from the gateway's models.
type Server struct {
	// Models are the model names the request's key may use, sorted.
	Models func(c echo.Context) []string
	// ReadBody reads a request's body within the gateway's limits.
	ReadBody func(c echo.Context) ([]byte, *openai.Error)
	// WriteError writes an error in the request's surface shape.
	WriteError func(c echo.Context, e *openai.Error) error
	// Started is when the gateway started: every model's modified_at.
	Started time.Time
	// Show, when set, answers /api/show for model from a provider that
	// speaks Ollama's API natively — the model's own details, parameters,
	// template, context length and capabilities — and reports false when
	// none serves the model, for the edge to answer.
	Show func(c echo.Context, model string, body []byte) (bool, error)
}

// Routes registers the routes on e.
func (s *Server) Routes(e *echo.Echo) {
	e.GET("/", s.root)
	e.HEAD("/", s.root)
	e.GET("/api/version", s.version)
	e.HEAD("/api/version", s.version)
	e.GET("/api/tags", s.tags)
	e.HEAD("/api/tags", s.tags)
	e.GET("/api/ps", s.ps)
	e.POST("/api/show", s.show)
	e.POST("/api/pull", s.pull)
	for _, r := range managing {
		e.Add(r.method, r.path, s.unmanaged)
	}
}

// managing are the Ollama routes that change the models a server holds;
// iop holds none of its own.
var managing = []struct{ method, path string }{
	{http.MethodPost, "/api/create"}, {http.MethodPost, "/api/copy"}, {http.MethodPost, "/api/push"},
	{http.MethodDelete, "/api/delete"}, {http.MethodPost, "/api/blobs/:digest"}, {http.MethodHead, "/api/blobs/:digest"},
}

// unmanaged answers a route that would change the models iop serves: a
// 403 saying where that is done, rather than a 404 "Invalid URL" that
// reads as a wrong address.
func (s *Server) unmanaged(c echo.Context) error {
	e := &ollama.Error{Status: http.StatusForbidden, Message: "iop serves the models of its nodes' providers and does not manage them: create, copy, push and delete models with the Ollama next to a node"}
	return c.JSONBlob(e.Status, e.Body())
}

func (s *Server) root(c echo.Context) error {
	return c.String(http.StatusOK, "Ollama is running")
}

func (s *Server) version(c echo.Context) error {
	return c.JSON(http.StatusOK, map[string]string{"version": Version})
}

type model struct {
	Name       string         `json:"name"`
	Model      string         `json:"model"`
	ModifiedAt time.Time      `json:"modified_at"`
	Size       int64          `json:"size"`
	Digest     string         `json:"digest"`
	Details    map[string]any `json:"details"`
	ExpiresAt  *time.Time     `json:"expires_at,omitempty"`
	SizeVRAM   *int64         `json:"size_vram,omitempty"`
}

func (s *Server) models(c echo.Context, ps bool) []model {
	out := []model{}
	for _, m := range s.Models(c) {
		om := model{Name: m, Model: m, ModifiedAt: s.Started.UTC(), Digest: ids.Hash(m)[:12],
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

func (s *Server) tags(c echo.Context) error {
	return c.JSON(http.StatusOK, map[string]any{"models": s.models(c, false)})
}

func (s *Server) ps(c echo.Context) error {
	return c.JSON(http.StatusOK, map[string]any{"models": s.models(c, true)})
}

// show answers /api/show: from the model's native Ollama provider when
// one serves it, else with what the edge knows (no details it would have
// to make up).
func (s *Server) show(c echo.Context) error {
	a, e := s.modelAsked(c)
	if e != nil {
		return s.WriteError(c, e)
	}
	name := a.Model
	if !slices.Contains(s.Models(c), name) {
		nf := ollama.ModelNotFound(name)
		return c.JSONBlob(nf.Status, nf.Body())
	}
	if s.Show != nil {
		if shown, err := s.Show(c, name, a.body); shown {
			return err
		}
	}
	return c.JSON(http.StatusOK, map[string]any{
		"modelfile": "# served by iop", "parameters": "", "template": "",
		"details":      map[string]any{"format": "gguf", "family": "iop", "families": []string{"iop"}},
		"model_info":   map[string]any{},
		"capabilities": []string{"completion", "tools"},
		"modified_at":  s.Started.UTC(),
	})
}

// asked is what a request about a model asks: the model (model, or the
// older name), the stream flag (nil when absent) and the body.
type asked struct {
	Model  string `json:"model"`
	Name   string `json:"name"`
	Stream *bool  `json:"stream"`
	body   []byte
}

// modelAsked reads what a request body asks about a model.
func (s *Server) modelAsked(c echo.Context) (asked, *openai.Error) {
	body, e := s.ReadBody(c)
	if e != nil {
		return asked{}, e
	}
	var a asked
	if err := json.Unmarshal(body, &a); err != nil {
		return asked{}, openai.InvalidRequest("", "invalid JSON: %v", err)
	}
	if a.Model == "" {
		a.Model = a.Name
	}
	if a.Model == "" {
		return asked{}, openai.InvalidRequest("model", "model is required")
	}
	a.body = body
	return a, nil
}

// pull answers /api/pull (`ollama pull`, a client's "download model"): a
// model the key may use is served by the gateway's providers already, so
// the answer is Ollama's for a model it has, "success" — one NDJSON line,
// or one JSON object with stream false — with no progress made up. iop
// does not pull models onto its nodes: any other model is a 404 saying so.
func (s *Server) pull(c echo.Context) error {
	a, e := s.modelAsked(c)
	if e != nil {
		return s.WriteError(c, e)
	}
	name := a.Model
	if !slices.Contains(s.Models(c), name) {
		nf := &ollama.Error{Status: http.StatusNotFound, Message: "model '" + ids.Clip(name) + "' is not served by this gateway, and iop does not pull models: pull it with the Ollama next to a node, or add it to a provider's models"}
		return c.JSONBlob(nf.Status, nf.Body())
	}
	if a.Stream != nil && !*a.Stream {
		return c.JSON(http.StatusOK, map[string]string{"status": "success"})
	}
	return c.Blob(http.StatusOK, "application/x-ndjson", []byte(`{"status":"success"}`+"\n"))
}
