package httpx

import (
	"strings"

	"github.com/iopgw/iop/codec/eventstream"
	"github.com/iopgw/iop/execution"
)

// maxSniffBody bounds what the sniffer buffers of a whole JSON body; past
// it, usage is simply not observed (bytes still pass untouched).
const maxSniffBody = 4 << 20

// UsageSniffer observes token usage in a response body as it passes by,
// without changing it: a stream's events are read with the shared event
// reader and their JSON decoded (the last usage reported wins); a whole
// JSON body is decoded at the end. Usage is observation data only, and
// absent — never zero — when the upstream reported none.
type UsageSniffer struct {
	obs  *eventstream.Observer // streams
	json bool                  // a whole JSON body
	body []byte
	over bool
}

// NewUsageSniffer returns a sniffer for a body of the given content type
// answering a request to path (/v1/responses streams are Responses
// events, /api/* Ollama lines). Compressed or unknown bodies are not
// sniffed.
func NewUsageSniffer(contentType, path string) *UsageSniffer {
	format, stream := eventstream.FormatFor(contentType)
	if stream {
		d := eventstream.DialectChat
		switch {
		case strings.HasPrefix(path, "/v1/responses"):
			d = eventstream.DialectResponses
		case strings.HasPrefix(path, "/api/"):
			d = eventstream.DialectOllama
		}
		return &UsageSniffer{obs: eventstream.NewObserver(d, format)}
	}
	return &UsageSniffer{json: strings.Contains(strings.ToLower(contentType), "json")}
}

// Write observes p.
func (s *UsageSniffer) Write(p []byte) {
	switch {
	case s.obs != nil:
		s.obs.Feed(p)
	case s.json && !s.over:
		if len(s.body)+len(p) > maxSniffBody {
			s.over, s.body = true, nil
			return
		}
		s.body = append(s.body, p...)
	}
}

// Usage returns the observed usage, or nil. Call it once, at the end.
func (s *UsageSniffer) Usage() *execution.TokenUsage {
	switch {
	case s.obs != nil:
		s.obs.Close()
		return s.obs.Usage
	case s.json && !s.over && len(s.body) > 0:
		return eventstream.BodyUsage(s.body)
	}
	return nil
}
