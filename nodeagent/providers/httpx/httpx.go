// Package httpx holds what the HTTP-speaking providers (ollama, openai)
// share: the upstream HTTP client, the tunnel pump that carries an
// upstream response as frames, usage sniffing, and upstream error parsing.
package httpx

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/iopgw/iop/execution"
	"github.com/iopgw/iop/internal/httphdr"
)

// NewClient returns the client providers use upstream. It sets no overall
// timeout — a stream may legitimately last long, and the node watchdog
// owns liveness — but bounds dialing and TLS handshakes.
func NewClient() *http.Client {
	t := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          256,
		MaxIdleConnsPerHost:   64,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
	return &http.Client{Transport: t}
}

// Credentials are what a node injects into every upstream request.
type Credentials struct {
	APIKey  string            // sent as Authorization: Bearer <APIKey>
	Headers map[string]string // extra configured headers
}

// Apply sets the node's credentials on h, replacing any client value.
func (c Credentials) Apply(h http.Header) {
	h.Del("Authorization")
	for k, v := range c.Headers {
		h.Set(k, v)
	}
	if c.APIKey != "" {
		h.Set("Authorization", "Bearer "+c.APIKey)
	}
}

// NewRequest builds an upstream request: the client's end-to-end headers
// (filtered again here, so no client credential can reach a provider)
// plus the node's credentials.
func NewRequest(ctx context.Context, method, url string, clientHeader map[string][]string, body []byte, cred Credentials) (*http.Request, error) {
	var rd io.Reader
	if len(body) > 0 {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return nil, err
	}
	req.Header = httphdr.ForUpstream(http.Header(clientHeader))
	if len(body) > 0 && req.Header.Get("Content-Type") == "" {
		req.Header.Set("Content-Type", "application/json")
	}
	cred.Apply(req.Header)
	return req, nil
}

// ParseUpstreamError reads an error answer: the OpenAI shape
// {"error":{"message","type","code","param"}}, Ollama's {"error":"..."},
// or any other body (an HTML error page from a proxy) as text.
func ParseUpstreamError(status int, h http.Header, body []byte) *execution.UpstreamError {
	ue := &execution.UpstreamError{Status: status, RetryAfterMS: RetryAfterMS(h)}
	var oai struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(body, &oai) == nil && len(oai.Error) > 0 {
		var obj struct {
			Message string `json:"message"`
			Type    string `json:"type"`
			Code    any    `json:"code"`
			Param   any    `json:"param"`
		}
		var s string
		switch {
		case json.Unmarshal(oai.Error, &obj) == nil:
			ue.Message, ue.Type, ue.Code, ue.Param = obj.Message, obj.Type, stringOf(obj.Code), stringOf(obj.Param)
		case json.Unmarshal(oai.Error, &s) == nil:
			ue.Message = s
		}
	}
	if ue.Message == "" {
		ue.Message = strings.TrimSpace(string(clip(body, 512)))
		if ue.Message == "" {
			ue.Message = http.StatusText(status)
		}
	}
	return ue
}

func stringOf(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	}
	return ""
}

func clip(b []byte, n int) []byte {
	if len(b) > n {
		return b[:n]
	}
	return b
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

// ReadErrorBody reads at most 64 KiB of an error body.
func ReadErrorBody(r io.Reader) []byte {
	b, _ := io.ReadAll(io.LimitReader(r, 64<<10))
	return b
}

// Unreachable describes a failure to get any answer from the upstream.
func Unreachable(err error) *execution.ExecutionFailure {
	return execution.UpstreamFailure(&execution.UpstreamError{Message: sanitizeErr(err)})
}

// sanitizeErr renders a transport error without the request URL, which
// may hold a credential in its query (Go's url.Error includes it).
func sanitizeErr(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Op + " upstream: " + ue.Err.Error()
	}
	return err.Error()
}
