package surface

import (
	"fmt"
	"net/http"

	"github.com/iopgw/iop/codec/anthropic"
	"github.com/iopgw/iop/codec/ollama"
	"github.com/iopgw/iop/codec/openai"
	"github.com/iopgw/iop/internal/ids"
)

// Shape is the shape of a surface's errors.
type Shape int

// The error shapes.
const (
	// ShapeOpenAI is {"error":{"message","type","param","code"}}.
	ShapeOpenAI Shape = iota
	// ShapeOllama is {"error":"…"}.
	ShapeOllama
	// ShapeAnthropic is {"type":"error","error":{"type","message"}}.
	ShapeAnthropic
)

// Render is the header and body of an error answer in the shape.
func (sh Shape) Render(e *openai.Error) (http.Header, []byte) {
	switch sh {
	case ShapeAnthropic:
		return http.Header{"Content-Type": {"application/json"}}, anthropic.New(e.Status, e.Message).Body()
	case ShapeOllama:
		return http.Header{"Content-Type": {"application/json; charset=utf-8"}}, (&ollama.Error{Status: e.Status, Message: e.Message}).Body()
	}
	return http.Header{"Content-Type": {"application/json"}}, e.Body()
}

// ModelNotFound is the shape's answer for a model nothing serves, from
// the gateway's e: Ollama clients recognise their own wording.
func (sh Shape) ModelNotFound(model string, e *openai.Error) *openai.Error {
	if sh != ShapeOllama {
		return e
	}
	nf := ollama.ModelNotFound(model)
	return &openai.Error{Status: nf.Status, Type: e.Type, Code: e.Code, Param: e.Param, Message: nf.Message}
}

// NotServed is the 404 for a model whose providers (and fallbacks') do
// not declare the surface: it names the model and the route, rather than
// an upstream's "Invalid URL" or a 503 a retry would not change.
func (s *Surface) NotServed(model string) *openai.Error {
	return &openai.Error{Status: http.StatusNotFound, Type: openai.TypeInvalidRequest, Code: "model_not_supported", Param: "model",
		Message: fmt.Sprintf("No provider of the model '%s' serves %s: its providers do not declare the %s surface.", ids.Clip(model), s.Path, s.Serves)}
}
