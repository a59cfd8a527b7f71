package gateway

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/iopgw/iop/codec/openai"
	"github.com/iopgw/iop/gateway/ollamameta"
	"github.com/iopgw/iop/gateway/stored"
	"github.com/iopgw/iop/gateway/tenancy"
	"github.com/iopgw/iop/internal/bodyio"
	"github.com/iopgw/iop/internal/httphdr"
	"github.com/iopgw/iop/internal/ids"
	"github.com/iopgw/iop/openapi"
	"github.com/iopgw/iop/surface"
)

// newEcho builds the public HTTP surface.
func (g *Gateway) newEcho() *echo.Echo {
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.HTTPErrorHandler = g.httpError
	e.Use(g.takeGeneration, g.traceRequest, g.accessLog, g.observe, g.cors, g.authenticate)

	for _, sf := range surface.All {
		e.POST(sf.Path, g.handle(sf))
	}
	e.GET("/v1/models", g.listModels)
	e.GET("/v1/models/:model", g.getModel)
	stored.Routes(e, g.storedResponse)

	(&ollamameta.Server{Models: g.modelNames, ReadBody: g.readBody, WriteError: writeError, Started: g.started, Show: g.showNative}).Routes(e)

	e.GET("/openapi.yaml", func(c echo.Context) error { return c.Blob(http.StatusOK, "application/yaml", openapi.Spec) })

	return e
}

// writeError writes a gateway-originated error in the surface's shape.
func writeError(c echo.Context, e *openai.Error) error {
	if e.Status == http.StatusServiceUnavailable || e.Status == http.StatusTooManyRequests {
		if c.Response().Header().Get("Retry-After") == "" {
			c.Response().Header().Set("Retry-After", "1")
		}
	}
	_, body := surface.ShapeOfRequest(c.Request().URL.Path, c.Request().Header).Render(e)
	return c.JSONBlob(e.Status, body)
}

// httpError renders echo's errors (unknown route, wrong method, panics)
// in the surface's native shape.
func (g *Gateway) httpError(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	var he *echo.HTTPError
	status := http.StatusInternalServerError
	msg := "The server had an error while processing your request."
	if errors.As(err, &he) {
		status = he.Code
		switch status {
		case http.StatusNotFound:
			msg = fmt.Sprintf("Invalid URL (%s %s)", c.Request().Method, ids.Clip(c.Request().URL.Path))
		case http.StatusMethodNotAllowed:
			msg = fmt.Sprintf("Method %s is not allowed for %s", c.Request().Method, ids.Clip(c.Request().URL.Path))
		default:
			msg = http.StatusText(status)
		}
	}
	typ := openai.TypeInvalidRequest
	if status >= 500 {
		typ = openai.TypeServer
	}
	_ = writeError(c, &openai.Error{Status: status, Type: typ, Message: msg})
}

// recovered answers a handler's panic r (accessLog recovers it) with a
// 500 in the native shape, unless the response was committed; the log
// line carries the stack but never the request. http.ErrAbortHandler (a
// deliberate abort) passes through. err is the handler's error so far.
func (g *Gateway) recovered(c echo.Context, r any, err error) error {
	if r == http.ErrAbortHandler {
		panic(r)
	}
	g.log.Error("handler panic", slog.String("route", c.Path()), slog.String("stack", string(debug.Stack())))
	if c.Response().Committed {
		return err
	}
	return writeError(c, &openai.Error{Status: http.StatusInternalServerError, Type: openai.TypeServer,
		Message: "The server had an error while processing your request."})
}

// observe counts requests by route and status class. It also answers a
// request whose headers are over the limit (headersTooLarge), here rather
// than in a middleware of its own: one frame fewer under every held
// stream's wait.
func (g *Gateway) observe(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		start := time.Now()
		var err error
		if n, limit := httphdr.Size(c.Request()), g.confOf(c).Limits.MaxHeaderBytes; n > limit {
			err = headersTooLarge(c, n, limit)
		} else {
			err = next(c)
		}
		g.count(c, start, err)
		return err
	}
}

// count records a request that ended with err (apart from the middleware,
// as logAccess is, to keep its frame off the handler's stack).
func (g *Gateway) count(c echo.Context, start time.Time, err error) {
	route := c.Path()
	if route == "" {
		route = "unmatched"
	}
	var sc trace.SpanContext
	if g.tracer.Enabled() { // off, the context holds no span: not looked for
		sc = trace.SpanContextFromContext(c.Request().Context())
	}
	observeDuration(g.metrics.durationOf(route), time.Since(start), sc)
	code := c.Response().Status
	if err != nil {
		var he *echo.HTTPError
		if errors.As(err, &he) {
			code = he.Code
		}
	}
	g.metrics.requestsOf(route, code).Inc()
}

// authenticate enforces client API keys on the API routes.
func (g *Gateway) authenticate(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		p := c.Request().URL.Path
		if p == "/openapi.yaml" {
			return next(c)
		}
		result, keyID := g.auth.Check(c.Request())
		access(c).KeyID = keyID
		if result == tenancy.AuthOK {
			return next(c)
		}
		return g.unauthenticated(c, result)
	}
}

// unauthenticated answers a request whose key did not pass (result).
func (g *Gateway) unauthenticated(c echo.Context, result tenancy.AuthResult) error {
	switch result {
	case tenancy.AuthThrottled:
		g.metrics.authFailures.Inc()
		c.Response().Header().Set("Retry-After", "60")
		return writeError(c, &openai.Error{Status: http.StatusTooManyRequests, Type: openai.TypeRateLimit, Code: "rate_limit_exceeded",
			Message: "Too many failed authentication attempts from this address. Retry in a minute."})
	case tenancy.AuthQueryKey:
		g.metrics.authFailures.Inc()
		return writeError(c, &openai.Error{Status: http.StatusUnauthorized, Type: openai.TypeInvalidRequest, Code: "invalid_api_key",
			Message: "API keys are not accepted in the query string. Send them in the Authorization header."})
	case tenancy.AuthMissing:
		g.metrics.authFailures.Inc()
		return writeError(c, &openai.Error{Status: http.StatusUnauthorized, Type: openai.TypeInvalidRequest, Code: "invalid_api_key",
			Message: "You didn't provide an API key. Send it as 'Authorization: Bearer <key>' (or 'x-api-key: <key>')."})
	default:
		g.metrics.authFailures.Inc()
		return writeError(c, &openai.Error{Status: http.StatusUnauthorized, Type: openai.TypeInvalidRequest, Code: "invalid_api_key",
			Message: "Incorrect API key provided."})
	}
}

// readBody reads a request body within the size limit and the body read
// deadline: 413 beyond the limit, 400 for a body that stalls or breaks.
// A failed read closes the connection after the answer: the rest of the
// body will never be read, and net/http would otherwise try to drain it
// before writing the answer.
func (g *Gateway) readBody(c echo.Context) ([]byte, *openai.Error) {
	r := c.Request()
	rc := http.NewResponseController(c.Response().Writer)
	lim := g.confOf(c).Limits
	if d := lim.BodyReadTimeout; d > 0 {
		_ = rc.SetReadDeadline(time.Now().Add(d))
	}
	body, err := bodyio.ReadAll(http.MaxBytesReader(c.Response().Writer, r.Body, lim.MaxBodyBytes), min(r.ContentLength, lim.MaxBodyBytes))
	if err != nil {
		c.Response().Header().Set("Connection", "close")
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, &openai.Error{Status: http.StatusRequestEntityTooLarge, Type: openai.TypeInvalidRequest, Code: "request_too_large",
				Message: fmt.Sprintf("The request body exceeds the limit of %d bytes.", lim.MaxBodyBytes)}
		}
		return nil, openai.InvalidRequest("", "The request body could not be read.")
	}
	_ = rc.SetReadDeadline(time.Time{})
	// Read to its end: closed, so that net/http does not try to read on
	// (to discard what is left) when it writes the response's header.
	_ = r.Body.Close()
	return body, nil
}

func (g *Gateway) limits(c echo.Context) openai.Limits {
	l := g.confOf(c).Limits
	return openai.Limits{MaxDepth: l.MaxDepth, MaxMessages: l.MaxMessages}
}

// headersTooLarge answers a request whose request line and headers exceed
// limits.max_header_bytes (n bytes over limit) with 431 in the surface's
// error shape (net/http would answer plain text; its own, larger bound
// stays as a backstop).
func headersTooLarge(c echo.Context, n, limit int) error {
	return writeError(c, &openai.Error{Status: http.StatusRequestHeaderFieldsTooLarge, Type: openai.TypeInvalidRequest,
		Code:    "request_header_fields_too_large",
		Message: fmt.Sprintf("The request's headers (%d bytes) are larger than this gateway accepts (limits.max_header_bytes = %d).", n, limit)})
}

// observeDuration records a request's duration, with its trace id as an
// exemplar when the request was sampled into a trace.
func observeDuration(o prometheus.Observer, d time.Duration, sc trace.SpanContext) {
	if eo, ok := o.(prometheus.ExemplarObserver); ok && sc.IsSampled() {
		eo.ObserveWithExemplar(d.Seconds(), prometheus.Labels{"trace_id": sc.TraceID().String()})
		return
	}
	o.Observe(d.Seconds())
}
