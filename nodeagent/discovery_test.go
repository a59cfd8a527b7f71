package nodeagent

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/test/bufconn"

	"github.com/iopgw/iop/wire"
)

// TestDNSDiscoveryOneSessionPerEdge: an edge name that resolves to several
// addresses gets one session per address; an address that disappears
// loses its session.
func TestDNSDiscoveryOneSessionPerEdge(t *testing.T) {
	edges := map[string]*fakeEdge{}
	lis := map[string]*bufconn.Listener{}
	for _, ip := range []string{"10.0.0.1", "10.0.0.2", "10.0.0.3"} {
		e, l := newFakeEdge(), bufconn.Listen(1<<16)
		edges[ip], lis[ip] = e, l
		srv := grpc.NewServer(wire.EdgeServerOptions()...)
		wire.RegisterNodeLinkServer(srv, e)
		go func() { _ = srv.Serve(l) }()
		t.Cleanup(srv.Stop)
	}
	var mu sync.Mutex
	answer := []string{"10.0.0.1", "10.0.0.2", "10.0.0.3"}
	old := lookupHost
	lookupHost = func(context.Context, string) ([]string, error) {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), answer...), nil
	}
	t.Cleanup(func() { lookupHost = old })

	cfg := baseConfig(simProvider("sim-a", SimConfig{}))
	cfg.Edges = []EdgeConfig{{Address: "edges.iop.svc:9090", Resolve: "dns", ResolveInterval: 50 * time.Millisecond}}
	if err := cfg.Resolve(); err != nil {
		t.Fatal(err)
	}
	a, err := New(cfg, Options{NoMetricsServer: true, Dialer: func(ctx context.Context, addr string) (net.Conn, error) {
		host, _, _ := net.SplitHostPort(addr)
		return lis[host].DialContext(ctx)
	}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	defer func() { cancel(); <-done }()
	var third *edgeSession
	for ip, e := range edges {
		select {
		case s := <-e.sessions:
			if ip == "10.0.0.3" {
				third = s
			}
		case <-time.After(defaultTestTimeout):
			t.Fatalf("no session to %s", ip)
		}
	}
	mu.Lock()
	answer = answer[:2]
	mu.Unlock()
	select {
	case <-third.close:
	case <-time.After(defaultTestTimeout):
		t.Fatal("the session to a vanished edge was kept")
	}
}
