package nodeagent

import (
	"context"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/test/bufconn"

	"github.com/iopgw/iop/internal/testing/bubble"
	"github.com/iopgw/iop/wire"
)

// TestKeepaliveIdleThirtyMinutes runs the production node keepalive
// against an edge enforcing MinTime 5 s for 30 fake minutes of idleness:
// the connection is never closed for too_many_pings (RELIABILITY.md R12;
// the misconfiguration, MinTime above the node's Time, reproduces at 31 s).
func TestKeepaliveIdleThirtyMinutes(t *testing.T) {
	for _, tc := range []struct {
		name     string
		minTime  time.Duration
		wantLive bool
	}{
		{"production settings", wire.EdgeEnforcement.MinTime, true},
		{"misconfigured edge", 20 * time.Second, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bubble.Test(t, func(t *testing.T) {
				lis := bufconn.Listen(1 << 16)
				edge := newFakeEdge()
				srv := grpc.NewServer(grpc.KeepaliveParams(wire.EdgeKeepalive),
					grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: tc.minTime, PermitWithoutStream: true}))
				wire.RegisterNodeLinkServer(srv, edge)
				go func() { _ = srv.Serve(lis) }()
				cfg := baseConfig(simProvider("sim-a", SimConfig{}))
				if err := cfg.Resolve(); err != nil {
					t.Fatal(err)
				}
				agent, err := New(cfg, Options{NoMetricsServer: true, Dialer: func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }})
				if err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan error)
				go func() { done <- agent.Run(ctx) }()
				start := time.Now()
				first := <-edge.sessions
				// Idle until the session closes or 30 minutes of the bubble's
				// time have passed on grpc-go's own keepalive timers.
				select {
				case <-first.close:
					if tc.wantLive {
						t.Fatalf("the idle session was closed after %v", time.Since(start))
					}
				case <-time.After(30 * time.Minute):
					if !tc.wantLive {
						t.Fatal("a misconfigured edge kept the session: the test cannot detect too_many_pings")
					}
				}
				cancel()
				<-done
				srv.Stop()
			})
		})
	}
}
