package surface

import (
	"net/http"
	"strings"

	"github.com/iopgw/iop/codec/eventstream"
	"github.com/iopgw/iop/codec/openai"
	"github.com/iopgw/iop/wire"
)

// Surface is one client route: POST Path, in the format of its API.
type Surface struct {
	// Name names the surface in logs and tests ("chat", "ollama.embed").
	Name string
	// Path is its route (always POST).
	Path string
	// Serves is the wire surface a provider declares to take the request
	// natively, through the tunnel (wire.Surface*).
	Serves string
	// Dialect is the event dialect of its streams.
	Dialect eventstream.Dialect
	// Shape is the shape of its errors.
	Shape Shape
	// TunnelOnly: the request has no translated form; a model whose
	// providers do not serve the surface is refused up front.
	TunnelOnly bool
	// Native: the request also has a native Ollama form (the body, sent
	// as an Ollama API command to providers that speak it).
	Native bool
	// Tunnels: the request has a tunnel form (the body to an
	// OpenAI-compatible upstream; see Call.TunnelPath).
	Tunnels bool
	// NoOutput: the answer generates no output tokens (an embedding, a
	// token count), so none are reserved.
	NoOutput bool
	// Counts: the answer is a token count, not usage: nothing is charged
	// for it (the APIs that define counts do not bill them either).
	Counts bool

	decode func(body []byte, lim openai.Limits) (*Call, *openai.Error)
	// form, for a multipart/form-data surface, decodes by the body's
	// content type instead of decode.
	form   func(body []byte, contentType string) (*Call, *openai.Error)
	encode func(o EncodeOptions) Encoder
}

func (s *Surface) String() string { return s.Name }

// Decode reads a request body of the surface (of contentType) into a
// Call; a refusal is an error to render in the surface's Shape.
func (s *Surface) Decode(body []byte, contentType string, lim openai.Limits) (*Call, *openai.Error) {
	if s.form != nil {
		return s.form(body, contentType)
	}
	return s.decode(body, lim)
}

// Encoder returns a fresh encoder rendering normalized events in the
// surface's format. Surfaces without a translated form render as Chat
// (they never run one).
func (s *Surface) Encoder(o EncodeOptions) Encoder {
	if s.encode == nil {
		return Chat.encode(o)
	}
	return s.encode(o)
}

// Ollama reports whether the surface answers in Ollama's shapes.
func (s *Surface) Ollama() bool { return s.Shape == ShapeOllama }

// The surfaces.
var (
	Chat = &Surface{Name: "chat", Path: "/v1/chat/completions", Serves: wire.SurfaceChat, Dialect: eventstream.DialectChat,
		Tunnels: true, decode: decodeChat, encode: encodeChat}
	Responses = &Surface{Name: "responses", Path: "/v1/responses", Serves: wire.SurfaceResponses, Dialect: eventstream.DialectResponses,
		Tunnels: true, decode: decodeResponses, encode: encodeResponses}
	// InputTokens is the Responses API's token count: native only (no
	// Chat equivalent), to the provider keeping a previous response it
	// names, like a new response.
	InputTokens = &Surface{Name: "responses.input_tokens", Path: "/v1/responses/input_tokens", Serves: wire.SurfaceResponses,
		Dialect: eventstream.DialectResponses, TunnelOnly: true, Tunnels: true, NoOutput: true, Counts: true, decode: decodeInputTokens}
	Completions = tunnelOnly("completions", "/v1/completions", wire.SurfaceCompletions, false)
	Embeddings  = tunnelOnly("embeddings", "/v1/embeddings", wire.SurfaceEmbeddings, true)
	// Moderations' model is optional: OpenAI's API defaults it to
	// omni-moderation-latest, and so does the route.
	Moderations = withDefaultModel(tunnelOnly("moderations", "/v1/moderations", wire.SurfaceModerations, false), "omni-moderation-latest")
	Images      = media(tunnelOnly("images", "/v1/images/generations", wire.SurfaceImages, false))
	Rerank      = tunnelOnly("rerank", "/v1/rerank", wire.SurfaceRerank, false)
	// Speech answers with audio bytes (or SSE), streamed as they come.
	Speech = media(tunnelOnly("audio.speech", "/v1/audio/speech", wire.SurfaceAudio, true))
	// The multipart surfaces: routed by their form's model field.
	Transcriptions = media(formOnly("audio.transcriptions", "/v1/audio/transcriptions", wire.SurfaceAudio))
	Translations   = media(formOnly("audio.translations", "/v1/audio/translations", wire.SurfaceAudio))
	ImageEdits     = media(formOnly("images.edits", "/v1/images/edits", wire.SurfaceImages))

	Messages = &Surface{Name: "messages", Path: "/v1/messages", Serves: wire.SurfaceMessages, Dialect: eventstream.DialectAnthropic,
		Shape: ShapeAnthropic, Tunnels: true, decode: decodeMessages, encode: encodeMessages}
	CountTokens = &Surface{Name: "messages.count_tokens", Path: "/v1/messages/count_tokens", Serves: wire.SurfaceMessages,
		Dialect: eventstream.DialectAnthropic, Shape: ShapeAnthropic, TunnelOnly: true, Tunnels: true, NoOutput: true, Counts: true, decode: decodeCountTokens}

	OllamaChat = &Surface{Name: "ollama.chat", Path: "/api/chat", Serves: wire.SurfaceOllama, Dialect: eventstream.DialectOllama,
		Shape: ShapeOllama, Native: true, decode: decodeOllamaRun(false), encode: encodeOllama(false)}
	OllamaGenerate = &Surface{Name: "ollama.generate", Path: "/api/generate", Serves: wire.SurfaceOllama, Dialect: eventstream.DialectOllama,
		Shape: ShapeOllama, Native: true, decode: decodeOllamaRun(true), encode: encodeOllama(true)}
	OllamaEmbed = &Surface{Name: "ollama.embed", Path: "/api/embed", Serves: wire.SurfaceOllama, Dialect: eventstream.DialectOllama,
		Shape: ShapeOllama, Native: true, Tunnels: true, decode: decodeOllamaEmbed(false)}
	OllamaEmbeddings = &Surface{Name: "ollama.embeddings", Path: "/api/embeddings", Serves: wire.SurfaceOllama, Dialect: eventstream.DialectOllama,
		Shape: ShapeOllama, Native: true, Tunnels: true, decode: decodeOllamaEmbed(true)}
)

// OllamaShow is /api/show sent to a provider speaking Ollama's API
// natively, for the model's own details; not a decoded route (the edge
// answers it itself when no such provider serves the model).
var OllamaShow = &Surface{Name: "ollama.show", Path: "/api/show", Serves: wire.SurfaceOllama, Dialect: eventstream.DialectOllama,
	Shape: ShapeOllama, Native: true, NoOutput: true}

// All are the surfaces, in the order the routes are listed.
var All = []*Surface{Chat, Responses, InputTokens, Embeddings, Completions, Moderations, Images, ImageEdits, Rerank, Speech, Transcriptions, Translations,
	Messages, CountTokens,
	OllamaChat, OllamaGenerate, OllamaEmbed, OllamaEmbeddings}

func tunnelOnly(name, path, serves string, noOutput bool) *Surface {
	return &Surface{Name: name, Path: path, Serves: serves, Dialect: eventstream.DialectChat, TunnelOnly: true, Tunnels: true,
		NoOutput: noOutput, decode: decodeTunnelOnly}
}

// media gives s the event dialect of OpenAI's media streams.
func media(s *Surface) *Surface {
	s.Dialect = eventstream.DialectAudio
	return s
}

// withDefaultModel routes s's requests that name no model to model.
func withDefaultModel(s *Surface, model string) *Surface {
	s.decode = decodeTunnelOnlyOr(model)
	return s
}

func formOnly(name, path, serves string) *Surface {
	s := tunnelOnly(name, path, serves, true)
	s.decode, s.form = nil, decodeForm
	return s
}

var byPath = func() map[string]*Surface {
	m := make(map[string]*Surface, len(All))
	for _, s := range All {
		m[s.Path] = s
	}
	return m
}()

// ForPath is the surface of a route; nil for a path that is none.
func ForPath(path string) *Surface { return byPath[path] }

// ShapeOfRequest is ShapeOfPath, but for the model list both APIs serve
// at one path (/v1/models and /v1/models/{id}), whose shape is the
// client's: Anthropic's, when the request carries anthropic-version, as
// Anthropic's SDKs send on every request.
func ShapeOfRequest(p string, h http.Header) Shape {
	if (p == "/v1/models" || strings.HasPrefix(p, "/v1/models/")) && h.Get("Anthropic-Version") != "" {
		return ShapeAnthropic
	}
	return ShapeOfPath(p)
}

// ShapeOfPath is the error shape of any request path: its surface's, and
// for other paths that of the API family the path belongs to (Ollama's
// /api/ and its root, Anthropic's /v1/messages/, else OpenAI's).
func ShapeOfPath(p string) Shape {
	if s := ForPath(p); s != nil {
		return s.Shape
	}
	switch {
	case strings.HasPrefix(p, "/api/") || p == "/":
		return ShapeOllama
	case p == "/v1/messages" || strings.HasPrefix(p, "/v1/messages/"):
		return ShapeAnthropic
	}
	return ShapeOpenAI
}
