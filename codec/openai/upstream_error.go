package openai

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/iopgw/iop/codec/eventstream"
	"github.com/iopgw/iop/execution"
)

// ParseError reads an error answer: the OpenAI shape
// {"error":{"message","type","code","param"}}, Ollama's {"error":"..."},
// or any other body (an HTML error page from a proxy) as text.
func ParseError(status int, h http.Header, body []byte) *execution.UpstreamError {
	ue := &execution.UpstreamError{Status: status, RetryAfterMS: RetryAfterMS(h)}
	var oai struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(body, &oai) == nil && len(oai.Error) > 0 && string(oai.Error) != "null" {
		e := eventstream.ParseErrorObject(oai.Error)
		ue.Type, ue.Code, ue.Param = e.Type, e.Code, e.Param
		if e.Message != eventstream.NoMessage {
			ue.Message = e.Message
		}
	}
	if ue.Message == "" {
		ue.Message = strings.TrimSpace(clip(string(body), 512))
		if ue.Message == "" {
			ue.Message = http.StatusText(status)
		}
	}
	return ue
}

// RetryAfterMS reads retry-after-ms, then retry-after (seconds), in ms.
func RetryAfterMS(h http.Header) int64 {
	if v, err := strconv.ParseFloat(h.Get("Retry-After-Ms"), 64); err == nil && v > 0 {
		return int64(v)
	}
	if v, err := strconv.ParseFloat(h.Get("Retry-After"), 64); err == nil && v > 0 {
		return int64(v * 1000)
	}
	if t, err := http.ParseTime(h.Get("Retry-After")); err == nil {
		if d := time.Until(t); d > 0 {
			return d.Milliseconds()
		}
	}
	return 0
}
