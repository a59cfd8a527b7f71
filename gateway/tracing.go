package gateway

import (
	"github.com/labstack/echo/v4"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/iopgw/iop/internal/tracing"
	"github.com/iopgw/iop/streamgate"
)

// traceRequest opens the request's server span, continuing the client's
// trace when it sent a traceparent. Attempts are its children (the
// dispatcher's "iop attempt" spans), and so are the nodes' spans. With
// tracing off it is not in the chain: nothing is read or built per
// request, and the client's own trace context passes upstream as it came
// (the propagated headers).
func (g *Gateway) traceRequest(next echo.HandlerFunc) echo.HandlerFunc {
	if !g.tracer.Enabled() {
		return next
	}
	return func(c echo.Context) error {
		r := c.Request()
		ctx, span := g.tracer.Start(tracing.Extract(r.Context(), r.Header), "iop "+r.Method+" "+c.Path(),
			trace.WithSpanKind(trace.SpanKindServer),
			trace.WithAttributes(attribute.String("http.request.method", r.Method), attribute.String("http.route", c.Path())))
		defer span.End()
		c.SetRequest(r.WithContext(ctx))
		err := next(c)
		status := c.Response().Status
		span.SetAttributes(attribute.Int("http.response.status_code", status))
		if status >= 500 {
			span.SetStatus(codes.Error, "")
		}
		return err
	}
}

// traceSummary records what a request came to on its span: models,
// provider, attempts, retries, fallbacks, resumes, outcome, time to first
// byte, usage — identifiers of iop's own, never text.
func traceSummary(span trace.Span, asked string, s streamgate.Summary) {
	if !span.IsRecording() {
		return // tracing off or not sampled: build nothing
	}
	attrs := []attribute.KeyValue{attribute.String("iop.model.requested", asked), attribute.String("iop.model.answered", s.Model),
		attribute.String("iop.provider", s.Provider), attribute.String("iop.path", s.Path), attribute.String("iop.outcome", s.Outcome),
		attribute.Int("iop.attempts", s.Attempts), attribute.Int("iop.retries", s.Retries), attribute.Int("iop.fallbacks", s.Fallbacks),
		attribute.Int("iop.resumes", s.Resumes), attribute.Int64("iop.ttfb_ms", s.FirstByte.Milliseconds())}
	if u := s.Usage; u != nil {
		attrs = append(attrs, attribute.Int64("gen_ai.usage.input_tokens", u.PromptTokens),
			attribute.Int64("gen_ai.usage.output_tokens", u.CompletionTokens))
	}
	span.SetAttributes(attrs...)
}
