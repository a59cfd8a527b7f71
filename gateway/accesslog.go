package gateway

import (
	"log/slog"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/iopgw/iop/internal/ids"
	"github.com/iopgw/iop/streamgate"
)

// accessKey is the echo context key of a request's accessInfo.
const accessKey = "iop.access"

// accessInfo is what handlers tell the access log about a request.
type accessInfo struct {
	RequestID string
	KeyID     string
	Model     string // the model the client asked for
	Sum       *streamgate.Summary
	// FallbacksSkipped counts fallback models the key may not use.
	FallbacksSkipped int
}

// access is the request's access-log summary: its own (reqContext), or
// one kept in echo's store outside the middleware (handler tests).
func access(c echo.Context) *accessInfo {
	if rc, ok := c.(*reqContext); ok {
		return &rc.access
	}
	if a, ok := c.Get(accessKey).(*accessInfo); ok {
		return a
	}
	a := &accessInfo{}
	c.Set(accessKey, a)
	return a
}

// The access log modes (log.access).
const (
	AccessAll    = "all"
	AccessErrors = "errors"
	AccessOff    = "off"
)

// DefaultLogFlush is log.flush_interval's default: log lines (one per
// request with the access log on) are held this long at most and written
// together, not with a write each (slogx.Buffered); maxLogFlush bounds it.
const (
	DefaultLogFlush = 100 * time.Millisecond
	maxLogFlush     = 10 * time.Second
)

// accessLog writes one structured line per API request: request and key
// ids, route, models asked and answered, provider, status, outcome,
// attempts, fallbacks, time to first byte, duration and token usage —
// never prompt or response text, never a key.
// It also recovers a handler's panic (recovered), and logs the request
// that answered: one middleware frame, not two, under every held stream's
// wait.
func (g *Gateway) accessLog(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) (err error) {
		start := time.Now()
		defer func() {
			if r := recover(); r != nil {
				err = g.recovered(c, r, err)
			}
			g.logAccess(c, start, err)
		}()
		return next(c)
	}
}

// logAccess writes the access line of a request that ended with err. It
// is apart from the middleware so that its frame (the line's attributes)
// is not under every request's handler: a held stream's goroutine waits
// beneath the middleware, and keeps a small stack only while that wait
// is shallow (docs/performance.md).
func (g *Gateway) logAccess(c echo.Context, start time.Time, err error) {
	logCfg := g.confOf(c).Log
	mode := logCfg.Access
	if mode == AccessOff {
		return
	}
	status := c.Response().Status
	if he, ok := err.(*echo.HTTPError); ok {
		status = he.Code
	}
	a := access(c)
	outcome := "ok"
	if a.Sum != nil {
		outcome = a.Sum.Outcome
	} else if status >= 400 {
		outcome = "http_" + strconv.Itoa(status)
	}
	failed := status >= 400 || outcome != "ok"
	if !failed && (mode == AccessErrors || logCfg.AccessSample < 1 && rand.Float64() >= logCfg.AccessSample) {
		return
	}
	level := slog.LevelInfo
	if status >= 500 {
		level = slog.LevelWarn
	}
	if !g.log.Enabled(c.Request().Context(), level) {
		return // the log level drops the line: build nothing
	}
	attrs := append(make([]slog.Attr, 0, 24), // room for every attribute: one allocation
		slog.String("request_id", a.RequestID), slog.String("key_id", a.KeyID),
		slog.String("method", c.Request().Method), slog.String("route", c.Path()), slog.Int("status", status),
		slog.String("outcome", outcome), slog.String("model", g.loggedModel(a.Model)),
		slog.Int64("duration_ms", time.Since(start).Milliseconds()), slog.String("remote", g.auth.ClientAddr(c.Request())),
	)
	if a.FallbacksSkipped > 0 {
		attrs = append(attrs, slog.Int("fallbacks_not_allowed", a.FallbacksSkipped))
	}
	if s := a.Sum; s != nil {
		attrs = append(attrs, slog.String("model_answered", ids.Clip(s.Model)), slog.String("provider", s.Provider),
			slog.String("path", s.Path), slog.Int("attempts", s.Attempts), slog.Int("retries", s.Retries), slog.Int("fallbacks", s.Fallbacks), slog.Int("resumes", s.Resumes),
			slog.Int64("ttfb_ms", s.FirstByte.Milliseconds()))
		if u := s.Usage; u != nil {
			attrs = append(attrs, slog.Int64("prompt_tokens", u.PromptTokens), slog.Int64("completion_tokens", u.CompletionTokens),
				slog.Int64("total_tokens", u.TotalTokens), slog.String("usage_source", usageSource(s.UsageEstimated)))
		}
	}
	// The record is made here, not by LogAttrs: a line that names no
	// source needs no caller's frame (runtime.Callers, ~1 µs a request).
	// Its attributes go in as one group without a key, which handlers
	// write inline, as if added one by one: a record holds five
	// attributes in itself and copies more into a slice of its own.
	r := slog.NewRecord(time.Now(), level, "request", 0)
	r.AddAttrs(slog.Attr{Value: slog.GroupValue(attrs...)})
	_ = g.log.Handler().Handle(c.Request().Context(), r)
}

// loggedModel is how the access log names the model a request asked for:
// by name when the edge knows it (served, configured or granted — a
// bounded set), else "unknown": a name the caller made up never reaches a
// log line.
func (g *Gateway) loggedModel(model string) string {
	switch {
	case model == "":
		return ""
	case g.knownName(model):
		return ids.Clip(model)
	}
	return "unknown"
}
