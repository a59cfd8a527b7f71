package gateway

import (
	"net/http"

	"github.com/labstack/echo/v4"
	"go.opentelemetry.io/otel/trace"

	"github.com/iopgw/iop/codec/openai"
	"github.com/iopgw/iop/gateway/tenancy"
	"github.com/iopgw/iop/internal/ids"
	"github.com/iopgw/iop/streamgate"
)

// The request pipeline, in the order a request meets it (server.go
// builds it):
//
//  1. takeGeneration: the request takes the running configuration
//     generation, once, and its request id; everything below reads that
//     generation.
//  2. traceRequest, accessLog (one line with the summary, written when
//     the request ends; it recovers a handler's panic first), observe
//     (route metrics, and the header size limit), cors, authenticate (the
//     key).
//  3. The surface's handler (handlers_*.go): read and decode the body in
//     its surface's codec, check the model, build the streamgate.Request.
//  4. serve (here): admission against the key's limits with its token
//     reservation, the key's fallback allowlist, aliases and resume, the
//     runtime (streamgate.Serve), then settlement with the usage charged.

// generation is one configuration as it runs: the validated
// configuration and the request runtime's configuration built from it.
// Immutable; a request takes one at its entry and keeps it to its end
// (admission, dispatch, failover, resume, settlement), so a reload never
// changes a request in flight.
type generation struct {
	n   uint64 // 1 at start, +1 per applied reload
	cfg *Config
	sg  *streamgate.Config
}

// reqContext is a request's echo context with what the request takes at
// its entry: its configuration generation and its access-log summary, as
// fields of its own rather than entries of echo's store (a map made for
// every request and read under a lock).
type reqContext struct {
	echo.Context
	gen    *generation
	access accessInfo
}

// takeGeneration gives the request the running configuration generation,
// once, where it enters: everything the request does reads that one.
func (g *Gateway) takeGeneration(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		return next(g.enter(c))
	}
}

// enter is c with the running generation and the request's id, from its
// entry: the access log names it on every answer, refusals included.
func (g *Gateway) enter(c echo.Context) echo.Context {
	rc := &reqContext{Context: c, gen: g.gen.Load()}
	rc.access.RequestID = ids.NewWith("req_")
	return rc
}

// genOf is the generation the request took (the running one outside a
// request, e.g. in handler tests).
func (g *Gateway) genOf(c echo.Context) *generation {
	if rc, ok := c.(*reqContext); ok {
		return rc.gen
	}
	return g.gen.Load()
}

// confOf is the configuration of the request's generation.
func (g *Gateway) confOf(c echo.Context) *Config { return g.genOf(c).cfg }

// serve runs a request through the runtime and records its summary for
// the access log.
func (g *Gateway) serve(c echo.Context, sreq *streamgate.Request) error {
	a, adm, err := g.begin(c, sreq)
	if adm == nil {
		return err
	}
	a.FallbacksSkipped = g.allowedFallbacks(a.KeyID, sreq)
	gen := g.genOf(c)
	g.withAlias(gen.cfg, sreq)
	g.withResume(gen.cfg, sreq)
	var sum *streamgate.Summary
	defer func() { // settled even if serving panics (sum nil): the key's concurrency slot comes back
		if sum == nil {
			adm.End(nil, false)
			return
		}
		adm.End(sum.Usage, sum.UsageEstimated)
	}()
	sum = streamgate.Serve(c.Request().Context(), gen.sg, sreq, c.Response())
	g.served(c, a, sreq, sum)
	return nil
}

// answer serves a request answered by the runtime itself, dispatched nowhere.
func (g *Gateway) answer(c echo.Context, sreq *streamgate.Request) error {
	a, adm, err := g.begin(c, sreq)
	if adm == nil {
		return err
	}
	defer adm.End(nil, false)
	g.served(c, a, sreq, streamgate.Answer(g.genOf(c).sg, sreq, c.Response()))
	return nil
}

// The steps before and after serving are apart from serve, whose frame is
// under every held stream's wait (a shallow stack stays small).

// begin names and admits a request; a nil admission: refused, answered (err).
func (g *Gateway) begin(c echo.Context, sreq *streamgate.Request) (*accessInfo, *tenancy.Admission, error) {
	a := access(c)
	a.RequestID, a.Model = sreq.RequestID, sreq.Model
	sreq.ResponseHeader = http.Header{}
	adm, e := g.admit(c, a, sreq)
	if e != nil {
		return a, nil, g.notAdmitted(c, a, sreq, e)
	}
	return a, adm, nil
}

// notAdmitted answers a request admission refused with e.
func (g *Gateway) notAdmitted(c echo.Context, a *accessInfo, sreq *streamgate.Request, e *openai.Error) error {
	for k, v := range sreq.ResponseHeader {
		c.Response().Header()[k] = v
	}
	g.keyRefused(a.KeyID, e)
	return writeError(c, e)
}

// served records what a request came to: the key's usage, the trace, the
// access log's summary and the model's statistics.
func (g *Gateway) served(c echo.Context, a *accessInfo, sreq *streamgate.Request, sum *streamgate.Summary) {
	g.keyUsed(a.KeyID, sreq.Model, sum.Usage, sum.UsageEstimated)
	g.stored.Settle(a.KeyID, sreq, sum)
	if g.tracer.Enabled() { // off, the context holds no span: not looked for
		traceSummary(trace.SpanFromContext(c.Request().Context()), sreq.Model, *sum)
	}
	a.Sum = sum
	if g.knownName(sreq.Model) {
		g.models.record(sreq.Model, *sum)
	}
}
