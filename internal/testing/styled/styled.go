// Package styled is a fake OpenAI-compatible upstream that writes its
// answers the way servers other than iop's own fakes do: Python's
// json.dumps spacing and ASCII escaping, "data:" without its optional
// space, CRLF line ends, ": ping" keep-alive comments, role and
// finish_reason on content chunks, no usage in streams, text split inside
// UTF-16 surrogate pairs, and errors reported as events inside an HTTP 200
// stream. It shares no code with internal/wall, so the assumptions of one
// are not the other's. Tests only.
package styled

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"unicode/utf16"
)

// Style chooses how the server writes. The zero Style is compact JSON,
// "data: ", LF, usage in streams.
type Style struct {
	Python        bool // json.dumps defaults: ", " and ": " separators, non-ASCII as \u escapes
	NoDataSpace   bool // "data:{…}" rather than "data: {…}"
	CRLF          bool // CRLF line ends
	Pings         bool // ": ping" comments before and between events
	NoStreamUsage bool // streams never report usage
	FinishOnLast  bool // role on the first content chunk, finish_reason on the last (no empty finish chunk)
	NoDone        bool // no data: [DONE] at the end
}

// Answer is the text every successful answer carries: it has a character
// outside the BMP, which a UTF-16 splitting server cuts in two.
const Answer = "Hi 😀 from a server in another style."

// Server is the fake upstream.
type Server struct{ Style Style }

type request struct {
	Model         string `json:"model"`
	Stream        bool   `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
}

// ServeHTTP answers GET /v1/models and POST /v1/chat/completions. The
// model names the behaviour: "error-event" reports an invalid request
// (inside the stream when streaming), anything else answers Answer.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/v1/models":
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(s.encode(map[string]any{"object": "list", "data": []any{map[string]any{"id": "ok", "object": "model", "owned_by": "styled"}}}))
	case r.Method == http.MethodPost && r.URL.Path == "/v1/chat/completions":
		var req request
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, "bad json", http.StatusBadRequest)
			return
		}
		if req.Stream {
			s.stream(w, req)
			return
		}
		s.json(w, req)
	default:
		http.NotFound(w, r)
	}
}

var errorObject = map[string]any{"message": "This model's maximum context length is 8 tokens.", "type": "invalid_request_error",
	"param": "messages", "code": "context_length_exceeded"}

func (s *Server) json(w http.ResponseWriter, req request) {
	w.Header().Set("Content-Type", "application/json")
	if req.Model == "error-event" {
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write(s.encode(map[string]any{"error": errorObject}))
		return
	}
	_, _ = w.Write(s.encode(map[string]any{"id": "chatcmpl-styled", "object": "chat.completion", "created": 1700000001, "model": req.Model,
		"system_fingerprint": "fp_styled", "choices": []any{map[string]any{"index": 0, "message": map[string]any{"role": "assistant", "content": Answer},
			"finish_reason": "stop"}}, "usage": map[string]any{"prompt_tokens": 17, "completion_tokens": 23, "total_tokens": 40}}))
}

func (s *Server) stream(w http.ResponseWriter, req request) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("X-Request-Id", "req_styled")
	fl, _ := w.(http.Flusher)
	send := func(b []byte) {
		_, _ = w.Write(b)
		if fl != nil {
			fl.Flush()
		}
	}
	if s.Style.Pings {
		send(s.line(": ping", true))
	}
	if req.Model == "error-event" {
		send(s.event(map[string]any{"error": errorObject}))
		return
	}
	pieces := s.pieces()
	for i, p := range pieces {
		delta := map[string]any{"content": rawString(p)}
		if i == 0 {
			delta["role"] = "assistant"
		}
		choice := map[string]any{"index": 0, "delta": delta, "finish_reason": nil}
		if s.Style.FinishOnLast && i == len(pieces)-1 {
			choice["finish_reason"] = "stop"
		}
		send(s.event(s.chunk(req.Model, choice)))
		if s.Style.Pings && i == 1 {
			send(s.line(": ping", true))
		}
	}
	if !s.Style.FinishOnLast {
		send(s.event(s.chunk(req.Model, map[string]any{"index": 0, "delta": map[string]any{}, "finish_reason": "stop"})))
	}
	if !s.Style.NoStreamUsage && req.StreamOptions != nil && req.StreamOptions.IncludeUsage {
		c := s.chunk(req.Model)
		c["usage"] = map[string]any{"prompt_tokens": 17, "completion_tokens": 23, "total_tokens": 40}
		send(s.event(c))
	}
	if !s.Style.NoDone {
		send(s.data([]byte("[DONE]")))
	}
}

func (s *Server) chunk(model string, choices ...any) map[string]any {
	if choices == nil {
		choices = []any{}
	}
	return map[string]any{"id": "chatcmpl-styled", "object": "chat.completion.chunk", "created": 1700000001, "model": model,
		"system_fingerprint": "fp_styled", "choices": choices}
}

// pieces splits Answer into JSON string literals of four UTF-16 units
// each, as a server that cuts text by UTF-16 units does: with Python's
// escaping, the emoji's surrogates land in different pieces.
func (s *Server) pieces() []string {
	units := utf16.Encode([]rune(Answer))
	var out []string
	for i := 0; i < len(units); i += 4 {
		part := units[i:min(i+4, len(units))]
		if s.Style.Python {
			out = append(out, asciiLiteral(part))
			continue
		}
		b, _ := json.Marshal(string(utf16.Decode(part)))
		out = append(out, string(b))
	}
	return out
}

// asciiLiteral writes UTF-16 units as a JSON string with every non-ASCII
// unit as a \u escape (Python's ensure_ascii), lone surrogates included.
func asciiLiteral(units []uint16) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, u := range units {
		switch {
		case u == '"' || u == '\\':
			b.WriteByte('\\')
			b.WriteByte(byte(u))
		case u >= 0x20 && u < 0x7f:
			b.WriteByte(byte(u))
		default:
			fmt.Fprintf(&b, `\u%04x`, u)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// rawString is a pre-encoded JSON string literal.
type rawString string

func (r rawString) MarshalJSON() ([]byte, error) { return []byte(r), nil }

func (s *Server) event(v any) []byte { return s.data(s.encode(v)) }

func (s *Server) data(payload []byte) []byte {
	prefix := "data: "
	if s.Style.NoDataSpace {
		prefix = "data:"
	}
	return s.line(prefix+string(payload), true)
}

// line ends a line and, with blank, the event.
func (s *Server) line(l string, blank bool) []byte {
	eol := "\n"
	if s.Style.CRLF {
		eol = "\r\n"
	}
	if blank {
		return []byte(l + eol + eol)
	}
	return []byte(l + eol)
}

// encode marshals v compactly, or as Python's json.dumps would.
func (s *Server) encode(v any) []byte {
	b, _ := json.Marshal(v)
	if !s.Style.Python {
		return b
	}
	return pythonSpacing(b)
}

// pythonSpacing re-spaces compact JSON with ", " and ": " outside strings.
func pythonSpacing(b []byte) []byte {
	var out bytes.Buffer
	in := false
	for i := 0; i < len(b); i++ {
		c := b[i]
		out.WriteByte(c)
		switch {
		case in && c == '\\':
			i++
			out.WriteByte(b[i])
		case c == '"':
			in = !in
		case !in && (c == ',' || c == ':'):
			out.WriteByte(' ')
		}
	}
	return out.Bytes()
}
