package tracing

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/trace"
)

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		c    Config
		want string
	}{
		{Config{}, ""},
		{Config{Enabled: true, Endpoint: "http://collector:4318"}, ""},
		{Config{Enabled: true, Endpoint: "collector:4318"}, "tracing.endpoint"},
		{Config{Enabled: true, Endpoint: "http://c:4318", Sampling: 2}, "tracing.sampling"},
	} {
		err := tc.c.Validate("tracing")
		if (tc.want == "") != (err == nil) || err != nil && !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.c, err, tc.want)
		}
	}
}

// TestInject: without a span the client's own trace context passes
// untouched; with one, the copy carries it and the original is left alone.
func TestInject(t *testing.T) {
	h := map[string][]string{"Traceparent": {"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}, "X-Other": {"1"}}
	if got := Inject(context.Background(), h); got["Traceparent"][0] != h["Traceparent"][0] {
		t.Fatalf("no span: %v", got)
	}
	ctx := Extract(context.Background(), h)
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() || sc.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Fatalf("extracted %v", sc)
	}
	child := trace.NewSpanContext(trace.SpanContextConfig{TraceID: sc.TraceID(), SpanID: [8]byte{1, 2, 3, 4, 5, 6, 7, 8}, TraceFlags: trace.FlagsSampled})
	got := http.Header(Inject(trace.ContextWithSpanContext(context.Background(), child), h))
	if got.Get("Traceparent") != "00-4bf92f3577b34da6a3ce929d0e0e4736-0102030405060708-01" || got.Get("X-Other") != "1" {
		t.Fatalf("injected %v", got)
	}
	if h["Traceparent"][0] != "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01" {
		t.Fatal("the original headers changed")
	}
}
