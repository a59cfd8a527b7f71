// Package tracing sets up OpenTelemetry tracing for the edge and the node:
// an OTLP/HTTP exporter, a parent-based ratio sampler and W3C trace
// context propagation. Off by default; spans carry identifiers of iop's
// own (providers, nodes, models, outcomes), never prompt or response text.
package tracing

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Config configures tracing.
type Config struct {
	// Enabled turns tracing on; default off.
	Enabled bool `koanf:"enabled"`
	// Endpoint is the OTLP/HTTP collector, e.g. http://otel-collector:4318
	// (spans go to <endpoint>/v1/traces).
	Endpoint string `koanf:"endpoint"`
	// Sampling is the fraction of new traces sampled (a sampled parent's
	// decision is kept); default 1.
	Sampling float64 `koanf:"sampling"`
	// ServiceName names the process in traces; default iop-edge / iop-node.
	ServiceName string `koanf:"service_name"`
}

// Validate reports the first mistake, naming the key under prefix.
func (c Config) Validate(prefix string) error {
	if !c.Enabled {
		return nil
	}
	if u, err := url.Parse(c.Endpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%s.endpoint: an http(s) URL of an OTLP/HTTP collector is required, e.g. http://otel-collector:4318", prefix)
	}
	if c.Sampling < 0 || c.Sampling > 1 {
		return fmt.Errorf("%s.sampling: must be between 0 and 1", prefix)
	}
	return nil
}

// Propagator is W3C trace context (traceparent, tracestate).
var Propagator propagation.TextMapPropagator = propagation.TraceContext{}

// Tracer is a process's tracing: its tracer and how to flush it.
type Tracer struct {
	trace.Tracer
	provider *sdktrace.TracerProvider // nil when off
}

// New sets up tracing as c says; off, a no-op tracer.
func New(c Config, defaultService string) (*Tracer, error) {
	if !c.Enabled {
		return &Tracer{Tracer: noop.NewTracerProvider().Tracer("iop")}, nil
	}
	exp, err := otlptracehttp.New(context.Background(), otlptracehttp.WithEndpointURL(strings.TrimRight(c.Endpoint, "/")+"/v1/traces"))
	if err != nil {
		return nil, fmt.Errorf("tracing: %w", err)
	}
	name := c.ServiceName
	if name == "" {
		name = defaultService
	}
	sampling := c.Sampling
	if sampling == 0 {
		sampling = 1
	}
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp, sdktrace.WithBatchTimeout(2*time.Second)),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(sampling))),
		sdktrace.WithResource(resource.NewSchemaless(semconv.ServiceName(name))),
	)
	return &Tracer{Tracer: tp.Tracer("github.com/iopgw/iop"), provider: tp}, nil
}

// Enabled reports whether spans are recorded (tracing.enabled).
func (t *Tracer) Enabled() bool { return t != nil && t.provider != nil }

// NoSpan is the span of a context that holds none: it records nothing.
// With tracing off no context holds a span, so code that knows tracing is
// off takes it instead of looking one up (a look-up that finds nothing
// walks the context's every layer).
var NoSpan = trace.SpanFromContext(context.Background())

// Shutdown flushes and stops the exporter (bounded by ctx).
func (t *Tracer) Shutdown(ctx context.Context) error {
	if t == nil || t.provider == nil {
		return nil
	}
	return t.provider.Shutdown(ctx)
}

// Extract returns ctx with the trace context carried by h.
func Extract(ctx context.Context, h map[string][]string) context.Context {
	return Propagator.Extract(ctx, propagation.HeaderCarrier(http.Header(h)))
}

// Inject returns a copy of h carrying ctx's trace context (h itself is
// left alone: requests are shared by attempts).
func Inject(ctx context.Context, h map[string][]string) map[string][]string {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return h // tracing off: the client's own trace context passes as it came
	}
	out := make(http.Header, len(h)+2)
	for k, v := range h {
		out[k] = v
	}
	out.Del("Traceparent")
	out.Del("Tracestate")
	Propagator.Inject(ctx, propagation.HeaderCarrier(out))
	return out
}
