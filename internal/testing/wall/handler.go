package wall

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// ServeHTTP implements http.Handler.
func (w *Wall) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 32<<20))
	var req struct {
		Model         string `json:"model"`
		Stream        *bool  `json:"stream"`
		StreamOptions *struct {
			IncludeUsage bool `json:"include_usage"`
		} `json:"stream_options"`
	}
	_ = json.Unmarshal(body, &req)
	a := &Attempt{Path: r.URL.Path, Model: req.Model, Start: time.Now(), Header: r.Header.Clone(), Body: body, done: make(chan struct{})}
	f := parseFault(req.Model)
	if fault := w.currentFault(); fault != "" {
		f = parseFault(fault)
	}
	a.Fault = f.name
	n := 0
	if req.Model != "" {
		n = w.record(a)
	}
	defer func() {
		// The server cancels the request context only after ServeHTTP
		// returns, so an error here means the client went away.
		a.cancelled.Store(r.Context().Err() != nil)
		a.endedAt.Store(time.Now().UnixNano())
		close(a.done)
	}()
	out := &counter{ResponseWriter: rw, a: a}
	x := &exchange{w: w, rw: out, r: r, a: a, f: f, nth: n, model: req.Model,
		stream: req.Stream != nil && *req.Stream, usage: req.StreamOptions != nil && req.StreamOptions.IncludeUsage}
	x.route()
}

// counter counts and flushes what the wall writes.
type counter struct {
	http.ResponseWriter
	a *Attempt
}

func (c *counter) Write(p []byte) (int, error) {
	n, err := c.ResponseWriter.Write(p)
	c.a.sentBytes.Add(int64(n))
	return n, err
}

func (c *counter) Flush() { http.NewResponseController(c.ResponseWriter).Flush() }

// exchange is one request being answered.
type exchange struct {
	w      *Wall
	rw     *counter
	r      *http.Request
	a      *Attempt
	f      fault
	nth    int
	model  string
	stream bool
	usage  bool
}

func (x *exchange) route() {
	p := x.r.URL.Path
	switch {
	case p == "/" || p == "/api/version" || p == "/api/tags" || p == "/api/ps" || p == "/api/show":
		x.ollamaInfo()
	case p == "/v1/models":
		x.models()
	case strings.HasPrefix(p, "/api/chat") || strings.HasPrefix(p, "/api/generate"):
		x.ollamaStream(strings.HasPrefix(p, "/api/generate"))
	case !x.preamble():
		// The fault answered already.
	case p == "/v1/chat/completions":
		x.chat()
	case p == "/v1/responses":
		x.responses()
	case p == "/v1/embeddings":
		x.embeddings()
	case p == "/v1/completions":
		x.chat()
	default:
		x.openAIError(http.StatusNotFound, "invalid_request_error", "", fmt.Sprintf("Invalid URL (%s %s)", x.r.Method, p))
	}
}

// headers sets the headers OpenAI sends with every answer.
func (x *exchange) headers(contentType string) {
	h := x.rw.Header()
	h.Set("Content-Type", contentType)
	h.Set("X-Request-Id", "req_wall_"+x.f.name)
	h.Set("Openai-Processing-Ms", "7")
	h.Set("Openai-Version", "2020-10-01")
	h.Set("X-Ratelimit-Limit-Requests", "10000")
	h.Set("X-Ratelimit-Remaining-Requests", "9999")
	h.Set("X-Ratelimit-Reset-Requests", "6ms")
	h.Set("X-Ratelimit-Limit-Tokens", "1000000")
	h.Set("X-Ratelimit-Remaining-Tokens", "999990")
	h.Set("X-Ratelimit-Reset-Tokens", "1ms")
}

func (x *exchange) openAIError(status int, typ, code, msg string) {
	x.headers("application/json")
	if status == http.StatusTooManyRequests {
		x.rw.Header().Set("Retry-After", "1")
		x.rw.Header().Set("Retry-After-Ms", "20")
	}
	x.rw.WriteHeader(status)
	var c any
	if code != "" {
		c = code
	}
	b, _ := json.Marshal(map[string]any{"error": map[string]any{"message": msg, "type": typ, "param": nil, "code": c}})
	_, _ = x.rw.Write(b)
}

// preamble applies the faults that act before any answer. It reports
// whether the normal answer should follow.
func (x *exchange) preamble() bool {
	ctx := x.r.Context()
	switch x.f.name {
	case "accept-silent":
		<-ctx.Done()
		return false
	case "reset-before-headers":
		x.reset()
		return false
	case "html-502":
		x.rw.Header().Set("Content-Type", "text/html")
		x.rw.WriteHeader(http.StatusBadGateway)
		_, _ = io.WriteString(x.rw, "<html><head><title>502 Bad Gateway</title></head><body><center><h1>502 Bad Gateway</h1></center><hr><center>nginx</center></body></html>\n")
		return false
	case "ctx-length-400":
		x.openAIError(http.StatusBadRequest, "invalid_request_error", "context_length_exceeded", "This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens.")
		return false
	case "content-filter-400":
		x.openAIError(http.StatusBadRequest, "invalid_request_error", "content_policy_violation", "Your request was rejected as a result of our safety system.")
		return false
	case "429-retry-after":
		x.openAIError(http.StatusTooManyRequests, "requests", "rate_limit_exceeded", "Rate limit reached for requests.")
		return false
	case "429-bare":
		// A 429 without Retry-After (many self-hosted servers).
		x.headers("application/json")
		x.rw.WriteHeader(http.StatusTooManyRequests)
		_, _ = io.WriteString(x.rw, `{"error":{"message":"Too many requests.","type":"requests","param":null,"code":"rate_limit_exceeded"}}`)
		return false
	case "500-once":
		if x.nth == 1 {
			x.openAIError(http.StatusInternalServerError, "server_error", "", "The server had an error while processing your request.")
			return false
		}
	case "503-persist":
		x.openAIError(http.StatusServiceUnavailable, "service_unavailable_error", "server_is_overloaded", "The engine is currently overloaded, please try again later.")
		return false
	case "status":
		x.status(x.f.n)
		return false
	case "headers-then-silent":
		x.headers("text/event-stream; charset=utf-8")
		x.rw.WriteHeader(http.StatusOK)
		x.rw.Flush()
		<-ctx.Done()
		return false
	}
	return true
}

func (x *exchange) status(code int) {
	switch code {
	case 400:
		x.openAIError(code, "invalid_request_error", "", "Invalid 'messages': empty array.")
	case 401:
		x.openAIError(code, "invalid_request_error", "invalid_api_key", "Incorrect API key provided: sk-wall.")
	case 404:
		x.openAIError(code, "invalid_request_error", "model_not_found", "The model `status-404` does not exist or you do not have access to it.")
	case 429:
		x.openAIError(code, "requests", "rate_limit_exceeded", "Rate limit reached for requests.")
	case 503:
		x.openAIError(code, "service_unavailable_error", "server_is_overloaded", "The engine is currently overloaded, please try again later.")
	default:
		x.openAIError(code, "server_error", "", "The server had an error while processing your request.")
	}
}

// reset closes the connection without an HTTP answer.
func (x *exchange) reset() {
	if hj, ok := x.rw.ResponseWriter.(http.Hijacker); ok {
		if conn, _, err := hj.Hijack(); err == nil {
			_ = conn.Close()
			return
		}
	}
	panic(http.ErrAbortHandler)
}

// abort ends a response abruptly (no terminating chunk).
func (x *exchange) abort() { panic(http.ErrAbortHandler) }

// sleep waits d; it reports false when the client went away.
func (x *exchange) sleep(d time.Duration) bool {
	if d <= 0 {
		return x.r.Context().Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-x.r.Context().Done():
		return false
	}
}

// stall blocks until the client goes away.
func (x *exchange) stall() { <-x.r.Context().Done() }
