package nodeagent

import (
	"context"
	"errors"
	"net"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/test/bufconn"

	"github.com/iopgw/iop/internal/testing/bubble"
	"github.com/iopgw/iop/wire"
)

// holeConn is a connection that can be black-holed: once frozen, writes
// vanish and reads never return — no FIN, no RST, like a dead link.
type holeConn struct {
	net.Conn
	frozen *atomic.Bool
	closed chan struct{}
	once   sync.Once
}

func (c *holeConn) Write(p []byte) (int, error) {
	if c.frozen.Load() {
		return len(p), nil
	}
	return c.Conn.Write(p)
}

func (c *holeConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if c.frozen.Load() {
		<-c.closed
		return 0, net.ErrClosed
	}
	return n, err
}

func (c *holeConn) Close() error {
	c.once.Do(func() { close(c.closed) })
	return c.Conn.Close()
}

func startAgent(t *testing.T, cfg Config, dial func(context.Context, string) (net.Conn, error)) (stop func()) {
	t.Helper()
	if err := cfg.Resolve(); err != nil {
		t.Fatal(err)
	}
	agent, err := New(cfg, Options{NoMetricsServer: true, Dialer: dial})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- agent.Run(ctx) }()
	return func() { cancel(); <-done }
}

// TestBlackHoledLinkDetected is RELIABILITY.md R11 in fake time with the
// production keepalive settings: after the link is black-holed, the edge
// closes the session within Time + Timeout + 1 s (≤ 16 s) and the node
// notices on its own and is back on a fresh connection within its ping
// interval + timeout + 1 s.
func TestBlackHoledLinkDetected(t *testing.T) {
	bubble.Test(t, func(t *testing.T) {
		lis := bufconn.Listen(1 << 16)
		edge := newFakeEdge()
		srv := grpc.NewServer(wire.EdgeServerOptions()...)
		wire.RegisterNodeLinkServer(srv, edge)
		go func() { _ = srv.Serve(lis) }()
		frozen := &atomic.Bool{}
		var dials atomic.Int32
		stop := startAgent(t, baseConfig(simProvider("sim-a", SimConfig{})), func(ctx context.Context, _ string) (net.Conn, error) {
			c, err := lis.DialContext(ctx)
			if err != nil || dials.Add(1) > 1 {
				return c, err
			}
			return &holeConn{Conn: c, frozen: frozen, closed: make(chan struct{})}, nil
		})
		first := <-edge.sessions
		select { // idle, kept alive by pings; then mid-interval
		case <-first.close:
			t.Fatal("the idle link died before the black hole")
		case <-time.After(time.Minute + 3*time.Second):
		}
		frozen.Store(true)
		start := time.Now()
		<-first.close
		edgeSaw := time.Since(start)
		second := <-edge.sessions
		nodeBack := time.Since(start)
		limit := wire.EdgeKeepalive.Time + wire.EdgeKeepalive.Timeout + time.Second
		if edgeSaw > limit {
			t.Fatalf("edge detected the black hole after %v, want ≤ %v", edgeSaw, limit)
		}
		if nodeLimit := wire.NodeKeepalive.Time + wire.NodeKeepalive.Timeout + time.Second; nodeBack > nodeLimit {
			t.Fatalf("node back on a new connection after %v, want ≤ %v", nodeBack, nodeLimit)
		}
		if second.gen <= first.gen {
			t.Fatalf("generation %d after %d", second.gen, first.gen)
		}
		t.Logf("black hole: edge closed the session after %v; node reconnected after %v", edgeSaw, nodeBack)
		stop()
		srv.Stop()
	})
}

// TestEdgeRestartReconnect is R13 in fake time: the edge stops and comes
// back after d ∈ {0.5 s, 5 s, 60 s}; all nodes are back within
// MaxDelay × 1.2 + 1 s of the edge being ready, each on a newer
// generation, and no 100 ms window holds more than 20 % of the
// reconnects after a long outage (30 % after short ones, where only the
// random first delay and the first backoffs spread them).
func TestEdgeRestartReconnect(t *testing.T) {
	const nodes = 100
	for _, d := range []time.Duration{500 * time.Millisecond, 5 * time.Second, 60 * time.Second} {
		t.Run(d.String(), func(t *testing.T) {
			bubble.Test(t, func(t *testing.T) {
				edge := newFakeEdge()
				var cur atomic.Pointer[bufconn.Listener]
				serve := func() *grpc.Server {
					lis := bufconn.Listen(1 << 16)
					srv := grpc.NewServer(wire.EdgeServerOptions()...)
					wire.RegisterNodeLinkServer(srv, edge)
					go func() { _ = srv.Serve(lis) }()
					cur.Store(lis)
					return srv
				}
				dial := func(ctx context.Context, _ string) (net.Conn, error) {
					if l := cur.Load(); l != nil {
						return l.DialContext(ctx)
					}
					return nil, errors.New("connection refused")
				}
				srv := serve()
				var stops []func()
				for i := range nodes {
					cfg := baseConfig(simProvider("sim-a", SimConfig{}))
					cfg.NodeID = "node-" + string(rune('A'+i/26)) + string(rune('a'+i%26))
					stops = append(stops, startAgent(t, cfg, dial))
				}
				oldGen := uint64(0)
				for range nodes {
					oldGen = max(oldGen, (<-edge.sessions).gen)
				}
				<-time.After(30 * time.Second) // the fleet runs a while on grpc-go's timers
				cur.Store(nil)
				srv.Stop()
				<-time.After(d) // the outage, on the nodes' reconnect backoff
				srv = serve()
				ready := time.Now()
				var at []time.Duration
				for range nodes {
					s := <-edge.sessions
					if s.gen <= oldGen {
						t.Fatalf("a reconnect took generation %d, not above %d", s.gen, oldGen)
					}
					at = append(at, time.Since(ready))
				}
				sort.Slice(at, func(i, j int) bool { return at[i] < at[j] })
				limit := time.Duration(float64(wire.NodeBackoff.MaxDelay)*1.2) + time.Second
				if last := at[len(at)-1]; last > limit {
					t.Fatalf("the last node reconnected %v after the edge was ready, want ≤ %v", last, limit)
				}
				peak := 0
				for i := range at {
					j := sort.Search(len(at), func(k int) bool { return at[k] >= at[i]+100*time.Millisecond })
					peak = max(peak, j-i)
				}
				t.Logf("outage %v: all %d nodes back within %v; at most %d (%d%%) in one 100 ms window", d, nodes, at[len(at)-1], peak, peak*100/nodes)
				// Short outages: the reconnects spread over the random first
				// delay and the first jittered backoffs only (measured peaks
				// 16–20 % at 0.5 s, 10–18 % at 5 s, 4–8 % at 60 s).
				if bound := map[bool]int{true: 20, false: 30}[d >= time.Minute]; peak*100 > nodes*bound {
					t.Fatalf("%d of %d reconnects in one 100 ms window", peak, nodes)
				}
				for _, stop := range stops {
					stop()
				}
				srv.Stop()
			})
		})
	}
}
