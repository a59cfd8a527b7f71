package streamgate

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/iopgw/iop/codec/ollama"
	"github.com/iopgw/iop/codec/openai"
	"github.com/iopgw/iop/execution"
)

// seqTracker follows the largest sequence_number in tunnelled Responses
// events, so a typed terminal can take the next one.
type seqTracker struct {
	max  int
	seen bool
	tail []byte
}

var seqKey = []byte(`"sequence_number":`)

func (s *seqTracker) observe(p []byte) {
	buf := append(s.tail, p...)
	for i := 0; ; {
		j := bytes.Index(buf[i:], seqKey)
		if j < 0 {
			break
		}
		k := i + j + len(seqKey)
		for k < len(buf) && buf[k] == ' ' {
			k++
		}
		start := k
		for k < len(buf) && buf[k] >= '0' && buf[k] <= '9' {
			k++
		}
		if k == len(buf) {
			break // the number may continue in the next chunk
		}
		if n, err := strconv.Atoi(string(buf[start:k])); err == nil && (!s.seen || n > s.max) {
			s.max, s.seen = n, true
		}
		i = k
	}
	keep := min(len(buf), 64)
	s.tail = append(s.tail[:0], buf[len(buf)-keep:]...)
}

// next is the sequence_number the next event takes.
func (s *seqTracker) next() int {
	if !s.seen {
		return 0
	}
	return s.max + 1
}

// upstreamFromTunnel reads an upstream error response.
func upstreamFromTunnel(status int, h http.Header, body []byte) *execution.UpstreamError {
	return openai.ParseError(status, h, body)
}

// tunnelTypedError is the in-band terminal for a committed tunnel stream
// of surface s, given the content type; nil when none can be written and
// the connection must be aborted.
func tunnelTypedError(s Surface, contentType string, seq *seqTracker, code, typ, msg string) []byte {
	switch {
	case isNDJSON(contentType):
		return (&ollama.Error{Message: code + ": " + msg}).Line()
	case !isSSE(contentType):
		return nil
	case s == SurfaceResponses:
		n := seq.next()
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

func isSSE(ct string) bool    { return bytes.Contains(bytes.ToLower([]byte(ct)), []byte("event-stream")) }
func isNDJSON(ct string) bool { return bytes.Contains(bytes.ToLower([]byte(ct)), []byte("ndjson")) }

// endTracker watches tunnelled stream bytes for the stream's own terminal:
// chat's data: [DONE] or a non-null finish_reason, a Responses terminal
// event (completed, incomplete, failed, error), or Ollama's "done":true.
type endTracker struct {
	found bool
	tail  []byte
}

var endMarks = [][]byte{
	[]byte("data: [DONE]"), []byte(`"finish_reason":"`), []byte(`"type":"response.completed"`), []byte(`"type":"response.incomplete"`),
	[]byte(`"type":"response.failed"`), []byte("event: error"), []byte(`"done":true`), []byte(`data: {"error":`), []byte(`{"error":"`),
}

func (e *endTracker) observe(p []byte) {
	if e.found {
		return
	}
	buf := append(e.tail, p...)
	for _, m := range endMarks {
		if bytes.Contains(buf, m) {
			e.found = true
			return
		}
	}
	keep := min(len(buf), 32)
	e.tail = append(e.tail[:0], buf[len(buf)-keep:]...)
}

func (e *endTracker) seen() bool { return e.found }
