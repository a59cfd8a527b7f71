package gateway

import (
	"net/http"

	"github.com/labstack/echo/v4"
	"go.opentelemetry.io/otel/trace"

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
//     the request ends), recoverPanics, observe (route metrics),
//     headerLimit, cors, authenticate (the key).
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

// genKey is the echo context key of a request's configuration generation.
const genKey = "iop.generation"

// takeGeneration gives the request the running configuration generation,
// once, where it enters: everything the request does reads that one.
func (g *Gateway) takeGeneration(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		c.Set(genKey, g.gen.Load())
		// The request's id, from its entry: the access log names it on
		// every answer, refusals included.
		access(c).RequestID = "req_" + ids.New()
		return next(c)
	}
}

// genOf is the generation the request took (the running one outside a
// request, e.g. in handler tests).
func (g *Gateway) genOf(c echo.Context) *generation {
	if gen, ok := c.Get(genKey).(*generation); ok {
		return gen
	}
	return g.gen.Load()
}

// confOf is the configuration of the request's generation.
func (g *Gateway) confOf(c echo.Context) *Config { return g.genOf(c).cfg }

// serve runs a request through the runtime and records its summary for
// the access log.
func (g *Gateway) serve(c echo.Context, sreq *streamgate.Request) error {
	a := access(c)
	a.RequestID, a.Model = sreq.RequestID, sreq.Model
	sreq.ResponseHeader = http.Header{}
	adm, e := g.admit(c, a, sreq)
	if e != nil {
		for k, v := range sreq.ResponseHeader {
			c.Response().Header()[k] = v
		}
		g.keyRefused(a.KeyID, e)
		return writeError(c, e)
	}
	a.FallbacksSkipped = g.allowedFallbacks(a.KeyID, sreq)
	gen := g.genOf(c)
	g.withAlias(gen.cfg, sreq)
	g.withResume(gen.cfg, sreq)
	var sum streamgate.Summary
	defer func() { adm.End(sum.Usage, sum.UsageEstimated) }() // settled even if serving panics: the key's concurrency slot comes back
	sum = streamgate.Serve(c.Request().Context(), gen.sg, sreq, c.Response())
	g.keyUsed(a.KeyID, sreq.Model, sum.Usage, sum.UsageEstimated)
	traceSummary(trace.SpanFromContext(c.Request().Context()), sreq.Model, sum)
	a.Sum = &sum
	if g.knownName(sreq.Model) {
		g.models.record(sreq.Model, sum)
	}
	return nil
}
