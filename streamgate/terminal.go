package streamgate

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/iopgw/iop/codec/openai"
)

// fail ends the request with a typed error. Before commit that is an
// error response: e, or — when e is nil — the outcome's own (the
// upstream's error answer passed through unchanged, 504 response_stalled
// for a stall, 502 otherwise). After commit it is the surface's in-band
// terminal, preceded by a blank line when the cut fell mid-event; where no
// in-band terminal exists the connection is aborted. Never a tidy end.
func (rt *runtime) fail(ctx context.Context, e *openai.Error, o *outcome) {
	if ctx.Err() != nil {
		rt.cfg.Metrics.clientCancelled.Inc()
		rt.sum.Outcome = "client_cancelled"
		return
	}
	defer func() {
		if rt.sum.Outcome == "" {
			rt.sum.Outcome = "error"
		}
	}()
	switch rt.resp.State() {
	case TerminalCommitted:
		return
	case TransportUncommitted:
		rt.failUncommitted(e, o)
		return
	}
	code, typ, msg := inBand(e, o)
	rt.sum.Outcome = closedCode(code)
	rt.cfg.Metrics.terminals.WithLabelValues(string(StreamOpen), closedCode(code)).Inc()
	var b []byte
	boundary := "\n\n"
	if ar := rt.cur; ar != nil && ar.enc != nil {
		b = ar.enc.TypedError(code, typ, msg)
		if rt.req.Surface.Ollama() {
			boundary = "\n"
		}
	} else if ar != nil && ar.tun != nil {
		ct := ar.tun.contentType
		b = tunnelTypedError(rt.req.Surface, ct, ar.tun.nextSeq(), code, typ, msg)
		if isNDJSON(ct) {
			boundary = "\n"
		}
	}
	if b == nil {
		abort()
	}
	if !rt.resp.endsOn(boundary) {
		b = append([]byte(boundary), b...)
	}
	if err := rt.resp.write(b); err != nil {
		abort()
	}
	rt.resp.terminal()
}

func (rt *runtime) failUncommitted(e *openai.Error, o *outcome) {
	if e == nil && o != nil && o.errBody != nil && !strings.Contains(strings.ToLower(o.errHead.Get("Content-Type")), "json") {
		// Not an API error but, say, a proxy's HTML page: a typed error in
		// the surface's shape with the upstream's status.
		e = &openai.Error{Status: o.upstream.Status, Type: openai.TypeUpstream, Code: codeUpstreamError,
			Message: fmt.Sprintf("The provider answered HTTP %d with a non-JSON body.", o.upstream.Status)}
	}
	if e == nil && o != nil && o.errBody != nil {
		// The upstream's own error answer, verbatim.
		rt.cfg.Metrics.terminals.WithLabelValues(string(TransportUncommitted), "upstream_passthrough").Inc()
		rt.sum.Outcome = codeUpstreamError
		_ = rt.resp.respond(o.upstream.Status, o.errHead, o.errBody)
		return
	}
	if e == nil {
		e = outcomeError(o)
	}
	rt.cfg.Metrics.terminals.WithLabelValues(string(TransportUncommitted), closedCode(e.Code)).Inc()
	rt.sum.Outcome = closedCode(e.Code)
	h, body := errorResponse(rt.req.Surface, e)
	if rt.req.RequestID != "" {
		h.Set("X-Request-Id", rt.req.RequestID)
	}
	if o != nil && o.upstream != nil && o.upstream.RetryAfterMS > 0 {
		h.Set("Retry-After", strconv.FormatInt(max(1, o.upstream.RetryAfterMS/1000), 10))
		h.Set("Retry-After-Ms", strconv.FormatInt(o.upstream.RetryAfterMS, 10))
	} else if e.Status == http.StatusTooManyRequests || e.Status == http.StatusServiceUnavailable {
		h.Set("Retry-After", "1")
	}
	_ = rt.resp.respond(e.Status, h, body)
}

// outcomeError is the pre-commit error response for an outcome.
func outcomeError(o *outcome) *openai.Error {
	if o == nil {
		return &openai.Error{Status: http.StatusBadGateway, Type: openai.TypeUpstream, Code: codeUpstreamError, Message: "The provider failed."}
	}
	switch {
	case o.kind == outStall || o.cause == causeBackstop:
		return stalledError()
	case o.cause == causeDispatch:
		return dispatchError(ErrDispatchFailed)
	case o.kind == outFirstToken:
		return firstTokenError()
	case o.upstream != nil && o.upstream.Status == 0 && unreachableCause[o.upstream.Code] != "":
		return &openai.Error{Status: http.StatusBadGateway, Type: openai.TypeUpstream, Code: codeUpstreamUnavailable,
			Message: "The provider's upstream could not be reached: " + unreachableCause[o.upstream.Code] + "."}
	case o.kind == outUpstream && o.upstream != nil:
		u := o.upstream
		typ := u.Type
		if typ == "" {
			typ = openai.TypeUpstream
		}
		return &openai.Error{Status: u.Status, Type: typ, Code: u.Code, Param: u.Param, Message: u.Message}
	}
	return &openai.Error{Status: http.StatusBadGateway, Type: openai.TypeUpstream, Code: codeUpstreamError,
		Message: "The provider's response ended abnormally before it completed."}
}

// prefillError refuses a request ending with an assistant prefill on a
// model none of whose providers continues one.
func prefillError() *openai.Error {
	return openai.InvalidRequest("messages", "The last message is an assistant prefill, which this model's providers cannot continue: "+
		"they serve the OpenAI Chat API, which has no prefill. Declare `prefill` on a provider whose upstream continues a trailing "+
		"assistant message (llama.cpp, Ollama, vLLM with prefill_fields), or use a model whose provider serves the messages surface.")
}

// unreachableCause names the cause classes a node reports for an
// upstream it could not reach (never its address).
var unreachableCause = map[string]string{"upstream_refused": "connection refused", "upstream_dns": "its host name did not resolve",
	"upstream_tls": "the TLS handshake failed", "upstream_timeout": "the connection timed out",
	"upstream_reset": "the connection was reset", "upstream_unreachable": "the network failed"}

// inBand is the code, type and message of an in-band terminal.
func inBand(e *openai.Error, o *outcome) (code, typ, msg string) {
	if e != nil {
		return e.Code, e.Type, e.Message
	}
	switch {
	case o.kind == outStall || o.cause == causeBackstop:
		return codeResponseStalled, openai.TypeUpstream, "The provider stopped producing output; the response is incomplete."
	case o.kind == outFirstToken:
		e := firstTokenError()
		return e.Code, e.Type, e.Message
	case o.upstream != nil && o.upstream.Message != "":
		code := o.upstream.Code
		if code == "" {
			code = codeUpstreamError
		}
		return code, openai.TypeUpstream, o.upstream.Message
	}
	return codeUpstreamError, openai.TypeUpstream, "The provider's response ended abnormally; the response is incomplete."
}

// The error codes the runtime answers with itself.
const (
	codeUpstreamError       = "upstream_error"
	codeUpstreamUnavailable = "upstream_unavailable"
	codeResponseStalled     = "response_stalled"
	codeFirstTokenTimeout   = "first_token_timeout"
	codeShuttingDown        = "server_shutting_down"
	codeContentFilter       = "content_filter"
	codeBudgetExhausted     = "retry_budget_exhausted"
	codeMaxAttempts         = "max_attempts_exceeded"
	codeQueueFull           = "queue_full"
	codeQueueTimeout        = "queue_timeout"
	codeNoProvider          = "no_provider_available"
	codeResumeDiverged      = "resume_diverged"
)

// knownCodes label the terminals metric (a closed set).
var knownCodes = set(codeResponseStalled, codeShuttingDown, codeUpstreamError, codeQueueFull, codeQueueTimeout, codeNoProvider, codeUpstreamUnavailable,
	codeBudgetExhausted, codeMaxAttempts, codeFirstTokenTimeout, codeContentFilter, codeResumeDiverged, "context_length_exceeded", "rate_limit_exceeded")

func closedCode(c string) string { return closed(knownCodes, c, "other") }

// head is the header of a response the gateway renders.
func (rt *runtime) head(contentType string) http.Header {
	h := http.Header{"Content-Type": {contentType}}
	if rt.req.RequestID != "" {
		h.Set("X-Request-Id", rt.req.RequestID)
	}
	if rt.req.Stream {
		h.Set("Cache-Control", "no-cache")
	}
	return h
}
