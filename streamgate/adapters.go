package streamgate

import (
	"net/http"
	"time"

	"github.com/iopgw/iop/codec/anthropic"
	"github.com/iopgw/iop/codec/ollama"
	"github.com/iopgw/iop/codec/openai"
	"github.com/iopgw/iop/execution"
)

// Surface is the client-facing API a request came in on.
type Surface int

// The surfaces.
const (
	SurfaceChat Surface = iota
	SurfaceResponses
	SurfaceOllamaChat
	SurfaceOllamaGenerate
	// SurfaceTunnelOnly is an OpenAI endpoint served only by tunnelling
	// (embeddings, legacy completions).
	SurfaceTunnelOnly
	// SurfaceOllamaEmbed is Ollama's /api/embed and /api/embeddings:
	// native to an Ollama upstream, else OpenAI embeddings reshaped.
	SurfaceOllamaEmbed
	// SurfaceMessages is Anthropic's Messages API (/v1/messages and
	// count_tokens), tunnelled to providers that serve it natively; its
	// errors and in-band terminals are in Anthropic's shape.
	SurfaceMessages
)

// IsOllama reports whether s answers in Ollama's shapes.
func (s Surface) IsOllama() bool {
	return s == SurfaceOllamaChat || s == SurfaceOllamaGenerate || s == SurfaceOllamaEmbed
}

// encoder renders normalized events for one surface. A fresh encoder is
// made for every attempt: nothing of a failed, uncommitted attempt
// survives into its replay.
type encoder interface {
	// event returns the bytes ev produces for a streaming response (nil for
	// JSON responses, which accumulate).
	event(ev execution.RunEvent) []byte
	// body returns a JSON response's body after the complete event.
	body(ev execution.RunEvent) []byte
	contentType() string
	// typedError returns the in-band terminal of a committed stream.
	typedError(code, typ, msg string) []byte
}

// newEncoder returns the encoder for req's surface.
func newEncoder(req *Request, model string) encoder {
	now := time.Now()
	switch req.Surface {
	case SurfaceResponses:
		if req.Stream {
			return &responsesSSE{s: openai.NewResponsesStream(openai.NewResponseID(), model, now.Unix(), req.Echo)}
		}
		return &responsesJSON{a: openai.NewResponseAccumulator(openai.NewResponseID(), model, now.Unix(), req.Echo)}
	case SurfaceOllamaChat, SurfaceOllamaGenerate:
		return &ollamaEnc{s: ollama.NewStream(model, req.Surface == SurfaceOllamaGenerate, now), stream: req.Stream}
	}
	if req.Stream {
		return &chatSSE{s: openai.NewChatStream(openai.NewChatID(), model, now.Unix(), req.IncludeUsage)}
	}
	return &chatJSON{a: openai.NewChatAccumulator(openai.NewChatID(), model, now.Unix())}
}

type chatSSE struct{ s *openai.ChatStream }

func (e *chatSSE) event(ev execution.RunEvent) []byte { return e.s.Append(nil, ev) }
func (e *chatSSE) body(execution.RunEvent) []byte     { return nil }
func (e *chatSSE) contentType() string                { return "text/event-stream; charset=utf-8" }
func (e *chatSSE) typedError(code, typ, msg string) []byte {
	return (&openai.Error{Type: typ, Code: code, Message: msg}).SSE()
}

type chatJSON struct{ a *openai.ChatAccumulator }

func (e *chatJSON) event(ev execution.RunEvent) []byte {
	e.a.Add(ev)
	return nil
}
func (e *chatJSON) body(ev execution.RunEvent) []byte { e.a.Add(ev); return e.a.Body() }
func (e *chatJSON) contentType() string               { return "application/json" }
func (e *chatJSON) typedError(string, string, string) []byte {
	return nil
}

type responsesSSE struct{ s *openai.ResponsesStream }

func (e *responsesSSE) event(ev execution.RunEvent) []byte { return e.s.Append(nil, ev) }
func (e *responsesSSE) body(execution.RunEvent) []byte     { return nil }
func (e *responsesSSE) contentType() string                { return "text/event-stream; charset=utf-8" }
func (e *responsesSSE) typedError(code, _ string, msg string) []byte {
	return e.s.AppendFailed(nil, code, msg)
}

type responsesJSON struct{ a *openai.ResponseAccumulator }

func (e *responsesJSON) event(ev execution.RunEvent) []byte {
	e.a.Add(ev)
	return nil
}
func (e *responsesJSON) body(ev execution.RunEvent) []byte { e.a.Add(ev); return e.a.Body() }
func (e *responsesJSON) contentType() string               { return "application/json" }
func (e *responsesJSON) typedError(string, string, string) []byte {
	return nil
}

type ollamaEnc struct {
	s      *ollama.Stream
	stream bool
}

func (e *ollamaEnc) event(ev execution.RunEvent) []byte {
	if !e.stream {
		e.s.Add(ev)
		return nil
	}
	return e.s.Append(nil, ev)
}
func (e *ollamaEnc) body(ev execution.RunEvent) []byte { return e.s.Final(ev) }
func (e *ollamaEnc) contentType() string {
	if e.stream {
		return "application/x-ndjson"
	}
	return "application/json; charset=utf-8"
}
func (e *ollamaEnc) typedError(code, _ string, msg string) []byte {
	return (&ollama.Error{Message: code + ": " + msg}).Line()
}

// errorResponse renders a gateway-originated error in the surface's
// native shape.
func errorResponse(s Surface, e *openai.Error) (http.Header, []byte) {
	if s == SurfaceMessages {
		return http.Header{"Content-Type": {"application/json"}}, anthropic.New(e.Status, e.Message).Body()
	}
	if s.IsOllama() {
		return http.Header{"Content-Type": {"application/json; charset=utf-8"}}, (&ollama.Error{Status: e.Status, Message: e.Message}).Body()
	}
	return http.Header{"Content-Type": {"application/json"}}, e.Body()
}
