package wire

import "strings"

// The client surfaces a provider may serve natively: what nodes
// advertise (ProviderAdvertisement.surfaces), what provider configs name
// (surfaces:) and what the edge routes by.
const (
	SurfaceChat        = "chat"
	SurfaceResponses   = "responses"
	SurfaceCompletions = "completions"
	SurfaceEmbeddings  = "embeddings"
	SurfaceModerations = "moderations"
	SurfaceImages      = "images"
	SurfaceRerank      = "rerank"
	SurfaceOllama      = "ollama"
	// SurfaceMessages is Anthropic's Messages API (/v1/messages,
	// /v1/messages/count_tokens), which vLLM, llama.cpp and Ollama serve.
	SurfaceMessages = "messages"
	// SurfaceAudio is OpenAI's audio API: transcriptions, translations
	// and speech.
	SurfaceAudio = "audio"
)

// Surfaces are every surface, in the order configs list them.
var Surfaces = []string{SurfaceChat, SurfaceResponses, SurfaceCompletions, SurfaceEmbeddings, SurfaceModerations, SurfaceImages, SurfaceRerank, SurfaceOllama,
	SurfaceMessages, SurfaceAudio}

// tunnelPaths are the OpenAI request paths of the surfaces a tunnel
// carries.
var tunnelPaths = map[string]string{
	"/v1/chat/completions":      SurfaceChat,
	"/v1/responses":             SurfaceResponses,
	"/v1/completions":           SurfaceCompletions,
	"/v1/embeddings":            SurfaceEmbeddings,
	"/v1/moderations":           SurfaceModerations,
	"/v1/images/generations":    SurfaceImages,
	"/v1/images/edits":          SurfaceImages,
	"/v1/audio/transcriptions":  SurfaceAudio,
	"/v1/audio/translations":    SurfaceAudio,
	"/v1/audio/speech":          SurfaceAudio,
	"/v1/rerank":                SurfaceRerank,
	"/v1/messages":              SurfaceMessages,
	"/v1/messages/count_tokens": SurfaceMessages,
}

// SurfaceOfPath names the surface of a tunnelled OpenAI request path (""
// for any other path); the paths naming a stored response
// (/v1/responses/{id}, its cancel and input items) are the Responses
// API's.
func SurfaceOfPath(path string) string {
	path, _, _ = strings.Cut(path, "?")
	if s, ok := tunnelPaths[path]; ok {
		return s
	}
	if strings.HasPrefix(path, "/v1/responses/") {
		return SurfaceResponses
	}
	return ""
}
