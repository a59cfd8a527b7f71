package streamgate

import (
	"encoding/json"
	"net/http"

	"github.com/iopgw/iop/codec/anthropic"
	"github.com/iopgw/iop/codec/eventstream"
	"github.com/iopgw/iop/codec/ollama"
	"github.com/iopgw/iop/codec/openai"
	"github.com/iopgw/iop/execution"
	"github.com/iopgw/iop/surface"
)

// upstreamFromTunnel reads an upstream error response.
func upstreamFromTunnel(status int, h http.Header, body []byte) *execution.UpstreamError {
	return openai.ParseError(status, h, body)
}

// tunnelTypedError is the in-band terminal for a committed tunnel stream
// of surface s, given the content type; nil when none can be written and
// the connection must be aborted.
func tunnelTypedError(s *surface.Surface, contentType string, seq int64, code, typ, msg string) []byte {
	switch {
	case isNDJSON(contentType):
		return (&ollama.Error{Message: code + ": " + msg}).Line()
	case !isSSE(contentType):
		return nil
	case s.Shape == surface.ShapeAnthropic:
		return anthropic.InBand(code, msg)
	case s.Dialect == eventstream.DialectResponses:
		n := seq
		ev1, _ := json.Marshal(map[string]any{"type": "error", "sequence_number": n, "code": code, "message": msg, "param": nil})
		ev2, _ := json.Marshal(map[string]any{"type": "response.failed", "sequence_number": n + 1,
			"response": map[string]any{"object": "response", "status": "failed", "error": map[string]any{"code": "server_error", "message": code + ": " + msg}}})
		out := append([]byte("event: error\ndata: "), ev1...)
		out = append(out, "\n\nevent: response.failed\ndata: "...)
		out = append(out, ev2...)
		return append(out, '\n', '\n')
	}
	return (&openai.Error{Type: typ, Code: code, Message: msg}).SSE()
}

// isSSE and isNDJSON classify a content type as the shared event reader
// does.
func isSSE(ct string) bool {
	f, stream := eventstream.FormatFor(ct)
	return stream && f == eventstream.FormatSSE
}

func isNDJSON(ct string) bool {
	f, stream := eventstream.FormatFor(ct)
	return stream && f == eventstream.FormatNDJSON
}
