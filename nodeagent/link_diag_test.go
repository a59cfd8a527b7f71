package nodeagent

import (
	"context"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/iopgw/iop/internal/testing/logbuf"
	"github.com/iopgw/iop/internal/testing/wait"
)

// TestWrongEdgeAddressIsDiagnosed: a node pointed at an address nothing
// listens on logs the cause within one backoff period, counts it by
// cause, and shows its session down — never a silent wait.
func TestWrongEdgeAddressIsDiagnosed(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now: connection refused
	cfg := baseConfig(simProvider("sim-a", SimConfig{}))
	cfg.Edges = []EdgeConfig{{Address: addr}}
	buf := &logbuf.Buffer{}
	reg := prometheus.NewRegistry()
	agent, err := New(cfg, Options{NoMetricsServer: true, Log: slog.New(slog.NewJSONHandler(buf, nil)), Registerer: reg, Gatherer: reg})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- agent.Run(ctx) }()
	defer func() { cancel(); <-done }()
	// within a backoff period (the first is ~1 s)
	wait.UntilWithin(t, 2*time.Second, func() bool { return strings.Contains(buf.String(), `"cause":"refused"`) })
	if !strings.Contains(buf.String(), "cannot open a session with the edge") || !strings.Contains(buf.String(), addr) {
		t.Fatalf("log lacks the message or the edge:\n%s", buf.String())
	}
	if n := testutil.ToFloat64(agent.links.failures.WithLabelValues(addr, "refused")); n < 1 {
		t.Fatalf("iop_node_edge_connect_failures_total{cause=refused} = %v", n)
	}
	if up := testutil.ToFloat64(agent.links.up.WithLabelValues(addr)); up != 0 {
		t.Fatalf("iop_node_edge_session_up = %v", up)
	}
}
