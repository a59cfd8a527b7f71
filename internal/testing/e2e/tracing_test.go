package e2e

import (
	"compress/gzip"
	"encoding/hex"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/iopgw/iop/gateway"
	"github.com/iopgw/iop/internal/testing/logbuf"
	"github.com/iopgw/iop/internal/tracing"
	"github.com/iopgw/iop/nodeagent"
)

// otlpReceiver is an in-process OTLP/HTTP trace receiver.
type otlpReceiver struct {
	mu    sync.Mutex
	spans []*tracepb.Span
	names map[*tracepb.Span]string // span → service name
}

func (o *otlpReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		body = zr
	}
	b, _ := io.ReadAll(body)
	var req coltrace.ExportTraceServiceRequest
	if err := proto.Unmarshal(b, &req); err != nil {
		http.Error(w, err.Error(), 400)
		return
	}
	o.mu.Lock()
	for _, rs := range req.GetResourceSpans() {
		service := ""
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.GetKey() == "service.name" {
				service = kv.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				o.spans = append(o.spans, s)
				o.names[s] = service
			}
		}
	}
	o.mu.Unlock()
	out, _ := proto.Marshal(&coltrace.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

func (o *otlpReceiver) find(name string) *tracepb.Span {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, s := range o.spans {
		if strings.HasPrefix(s.GetName(), name) {
			return s
		}
	}
	return nil
}

// TestTracesAcrossEdgeAndNode: with tracing on, a request carrying a
// traceparent yields, in the client's trace, the edge's request span, an
// attempt span under it, the node's span under that, and the upstream
// receives a traceparent naming the node's span. No prompt text is in any
// attribute.
func TestTracesAcrossEdgeAndNode(t *testing.T) {
	rcv := &otlpReceiver{names: map[*tracepb.Span]string{}}
	collector := httptest.NewServer(rcv)
	defer collector.Close()
	on := tracing.Config{Enabled: true, Endpoint: collector.URL}
	logs := &logbuf.Buffer{}
	c := Start(t, Options{Log: slog.New(slog.NewJSONHandler(logs, nil)), Gateway: func(g *gateway.Config) { g.Tracing = on }}, func(c *Cluster) []NodeSpec {
		c.Wall.Models = []string{"ok"}
		return []NodeSpec{{ID: "n", Providers: []nodeagent.ProviderConfig{c.WallProvider("w", "openai", "", "ok")},
			Configure: func(n *nodeagent.Config) { n.Tracing = on }}}
	})
	const traceID, parentID = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	for _, stream := range []bool{false, true} {
		body := `{"model":"ok","stream":` + map[bool]string{true: "true", false: "false"}[stream] +
			`,"messages":[{"role":"user","content":"sentinel-prompt-text"}]}`
		req, _ := http.NewRequest(http.MethodPost, c.URL+"/v1/chat/completions", strings.NewReader(body))
		req.Header.Set("Traceparent", "00-"+traceID+"-"+parentID+"-01")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if b := readAll(t, resp); resp.StatusCode != 200 {
			t.Fatalf("status %d %s\n%s", resp.StatusCode, b, logs.String())
		}
	}
	// The latency histogram carries the trace id as an exemplar (OpenMetrics).
	mreq, _ := http.NewRequest(http.MethodGet, c.AdminURL+"/metrics", nil)
	mreq.Header.Set("Accept", "application/openmetrics-text; version=1.0.0")
	mresp, err := http.DefaultClient.Do(mreq)
	if err != nil {
		t.Fatal(err)
	}
	if m := readAll(t, mresp); !strings.Contains(m, `iop_edge_http_request_duration_seconds_bucket{route="/v1/chat/completions"`) ||
		!strings.Contains(m, `trace_id="`+traceID+`"`) {
		t.Fatal("no trace exemplar on the request duration histogram")
	}
	c.Stop() // flushes both processes' spans
	server, attempt, node := rcv.find("iop POST"), rcv.find("iop attempt"), rcv.find("iop node attempt")
	if server == nil || attempt == nil || node == nil {
		t.Fatalf("spans missing: server %v attempt %v node %v (got %d)", server != nil, attempt != nil, node != nil, len(rcv.spans))
	}
	hexOf := func(b []byte) string { return hex.EncodeToString(b) }
	for _, s := range []*tracepb.Span{server, attempt, node} {
		if hexOf(s.GetTraceId()) != traceID {
			t.Fatalf("span %s is not in the client's trace", s.GetName())
		}
	}
	if hexOf(server.GetParentSpanId()) != parentID || hexOf(attempt.GetParentSpanId()) != hexOf(server.GetSpanId()) ||
		hexOf(node.GetParentSpanId()) != hexOf(attempt.GetSpanId()) {
		t.Fatal("spans are not parent and child: client → edge request → attempt → node")
	}
	if rcv.names[server] != "iop-edge" || rcv.names[node] != "iop-node" {
		t.Fatalf("service names %q, %q", rcv.names[server], rcv.names[node])
	}
	up := c.Wall.Attempts()[0].Header.Get("Traceparent")
	if !strings.Contains(up, traceID) || !strings.Contains(up, hexOf(node.GetSpanId())) {
		t.Fatalf("the upstream got traceparent %q, want the node span's", up)
	}
	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	for _, s := range rcv.spans {
		for _, kv := range s.GetAttributes() {
			if strings.Contains(kv.GetValue().String(), "sentinel") {
				t.Fatalf("prompt text in span %s attribute %s", s.GetName(), kv.GetKey())
			}
		}
	}
}
