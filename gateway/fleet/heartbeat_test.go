package fleet

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/test/bufconn"

	"github.com/iopgw/iop/gateway/pool"
	"github.com/iopgw/iop/internal/testing/clocktest"
	"github.com/iopgw/iop/internal/testing/wait"
	"github.com/iopgw/iop/wire"
)

// startHubOn is startHub with the hub's timers on clk.
func startHubOn(t *testing.T, clk *clocktest.Manual, nodes ...NodeConfig) *hubEnv {
	t.Helper()
	p := pool.NewPool(pool.PoolConfig{})
	h := NewHub(HubConfig{Nodes: nodes, Pool: p, EdgeID: "edge-test", Clock: clk})
	lis := bufconn.Listen(1 << 20)
	srv := grpc.NewServer(h.ServerOptions(nil)...)
	wire.RegisterNodeLinkServer(srv, h)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return &hubEnv{hub: h, pool: p, m: h.metrics, lis: lis}
}

// tickHeartbeat advances clk by one heartbeat interval once the session's
// heartbeat has armed its next tick, and returns the ping it sent.
func tickHeartbeat(t *testing.T, clk *clocktest.Manual, st wire.NodeLink_SessionClient) *wire.Ping {
	t.Helper()
	wait.Until(t, func() bool { return clk.Pending() > 0 })
	clk.Advance(DefaultNodeLink().HeartbeatInterval)
	m, err := st.Recv()
	if err != nil {
		t.Fatalf("session ended: %v", err)
	}
	return m.GetPing()
}

// TestHeartbeatOnTheHubsClock: the hub's heartbeat runs on its injected
// clock — a node that answers its pings stays connected however long the
// clock runs; one that stops answering is dropped once it has been
// silent for heartbeat_timeout, not a tick earlier.
func TestHeartbeatOnTheHubsClock(t *testing.T) {
	clk := clocktest.New()
	e := startHubOn(t, clk, NodeConfig{ID: "n1", Token: "tok"})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	st, err := e.client(t).Session(withToken(ctx, "tok"))
	if err != nil {
		t.Fatal(err)
	}
	h := hello("n1", ad("p", 1, "m"))
	h.GetHello().Heartbeats = true // a node that answers pings
	if err := st.Send(h); err != nil {
		t.Fatal(err)
	}
	if m, err := st.Recv(); err != nil || m.GetWelcome() == nil {
		t.Fatalf("no welcome: %v %v", m, err)
	}
	for range 10 { // 10 s of clock, every ping answered
		p := tickHeartbeat(t, clk, st)
		if p == nil {
			t.Fatal("the heartbeat sent no ping")
		}
		if err := st.Send(&wire.NodeMessage{Msg: &wire.NodeMessage_Pong{Pong: &wire.Pong{Seq: p.GetSeq()}}}); err != nil {
			t.Fatal(err)
		}
		// The pong is recorded before the clock moves on.
		wait.Until(t, func() bool {
			e.hub.mu.Lock()
			defer e.hub.mu.Unlock()
			return time.Unix(0, e.hub.conns["n1"].lastPong.Load()).Equal(clk.Now())
		})
	}
	timeout := DefaultNodeLink().HeartbeatTimeout
	for silent := time.Duration(0); silent < timeout; {
		tickHeartbeat(t, clk, st) // not answered
		silent += DefaultNodeLink().HeartbeatInterval
	}
	if got := testutil.ToFloat64(e.m.heartbeatDrops); got != 0 {
		t.Fatalf("dropped after exactly heartbeat_timeout of silence (drops %v)", got)
	}
	wait.Until(t, func() bool { return clk.Pending() > 0 })
	clk.Advance(DefaultNodeLink().HeartbeatInterval)
	wait.Until(t, func() bool { return testutil.ToFloat64(e.m.heartbeatDrops) == 1 })
	if _, err := st.Recv(); err == nil {
		t.Fatal("the silent node's session is still open")
	}
}
