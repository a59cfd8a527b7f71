package fleet

import (
	"context"
	"net"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"

	"github.com/iopgw/iop/gateway/pool"
	"github.com/iopgw/iop/internal/ids"
	"github.com/iopgw/iop/internal/testing/wait"
	"github.com/iopgw/iop/wire"
)

type hubEnv struct {
	hub  *Hub
	pool *pool.Pool
	m    *hubMetrics
	lis  *bufconn.Listener
}

func startHub(t *testing.T, nodes ...NodeConfig) *hubEnv {
	t.Helper()
	pool := pool.NewPool(pool.PoolConfig{})
	h := NewHub(HubConfig{Nodes: nodes, Pool: pool, EdgeID: "edge-test"})
	m := h.metrics
	lis := bufconn.Listen(1 << 20)
	srv := grpc.NewServer(h.ServerOptions(nil)...)
	wire.RegisterNodeLinkServer(srv, h)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return &hubEnv{hub: h, pool: pool, m: m, lis: lis}
}

func (e *hubEnv) client(t *testing.T) wire.NodeLinkClient {
	t.Helper()
	conn, err := grpc.NewClient("passthrough:///bufconn", grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return e.lis.DialContext(ctx) }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return wire.NewNodeLinkClient(conn)
}

func withToken(ctx context.Context, token string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
}

func hello(nodeID string, ads ...*wire.ProviderAdvertisement) *wire.NodeMessage {
	return &wire.NodeMessage{Msg: &wire.NodeMessage_Hello{Hello: &wire.Hello{NodeId: nodeID, Advertisement: &wire.Advertisement{NodeId: nodeID, Providers: ads}}}}
}

// ad is a sim provider advertisement serving models.
func ad(id string, capacity int32, models ...string) *wire.ProviderAdvertisement {
	return &wire.ProviderAdvertisement{ProviderId: id, Adapter: "sim", Target: models[0], InstanceKey: "sim/" + id, Models: models,
		Capacity: capacity, ResponseStallTimeoutMs: 300000, ExecutionPath: "normalized", SupportsTunnel: true}
}

// session opens a session and returns it with its generation.
func session(t *testing.T, ctx context.Context, c wire.NodeLinkClient, token, nodeID string, ads ...*wire.ProviderAdvertisement) (wire.NodeLink_SessionClient, uint64, error) {
	t.Helper()
	st, err := c.Session(withToken(ctx, token))
	if err != nil {
		return nil, 0, err
	}
	if err := st.Send(hello(nodeID, ads...)); err != nil {
		// The server may already have refused the stream: its status
		// comes with Recv.
		_, rerr := st.Recv()
		return nil, 0, rerr
	}
	m, err := st.Recv()
	if err != nil {
		return nil, 0, err
	}
	return st, m.GetWelcome().GetConnectionGeneration(), nil
}

func TestHubAuthentication(t *testing.T) {
	e := startHub(t, NodeConfig{ID: "n1", TokenSHA256: ids.Hash("secret-1"), Models: []string{"m"}}, NodeConfig{ID: "n2", Token: "secret-2"})
	c := e.client(t)
	ctx := context.Background()
	if _, _, err := session(t, ctx, c, "wrong", "n1"); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("wrong token: %v", err)
	}
	if _, _, err := session(t, ctx, c, "secret-2", "n1"); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("n2's token claiming n1: %v", err)
	}
	if _, _, err := session(t, ctx, c, "secret-1", "n1", ad("p", 1, "forbidden-model")); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("advertising outside the grant: %v", err)
	}
	if _, gen, err := session(t, ctx, c, "secret-1", "n1", ad("p", 1, "m")); err != nil || gen == 0 {
		t.Fatalf("valid session: %v", err)
	}
}

// TestReconnectRace is RELIABILITY.md R14: a node reconnects while its
// old stream is still open; the old stream's close arrives 200 ms later.
func TestReconnectRace(t *testing.T) {
	e := startHub(t, NodeConfig{ID: "n1", Token: "tok"})
	if e.hub.Serving() {
		t.Fatal("serving with no node connected")
	}
	c := e.client(t)
	ctx1, closeOld := context.WithCancel(context.Background())
	_, g1, err := session(t, ctx1, c, "tok", "n1", ad("p", 4, "m"))
	if err != nil {
		t.Fatal(err)
	}
	st2, g2, err := session(t, context.Background(), c, "tok", "n1", ad("p", 4, "m"))
	if err != nil || g2 <= g1 {
		t.Fatalf("second session gen %d after %d: %v", g2, g1, err)
	}
	// The welcome goes out before the pool learns of the new generation.
	var snap []pool.ProviderSnapshot
	wait.Until(t, func() bool {
		snap = e.pool.Snapshot()
		return len(snap) == 1 && snap[0].ConnectionGeneration == g2
	})
	if len(snap) != 1 || snap[0].ConnectionGeneration != g2 {
		t.Fatalf("snapshot after reconnect %+v", snap)
	}
	// Work goes to the new generation; the old connection trying to take
	// it is dropped and counted.
	l, err := e.pool.Acquire(context.Background(), pool.ProviderPoolDispatchRequest{Model: "m"})
	if err != nil || l.ConnectionGeneration != g2 {
		t.Fatalf("lease %+v %v", l, err)
	}
	opened := make(chan error, 1)
	go func() {
		_, err := e.hub.Open(context.Background(), pool.Reception{NodeID: l.NodeID, ConnectionGeneration: l.ConnectionGeneration},
			&wire.AttemptDown{Msg: &wire.AttemptDown_Command{Command: &wire.Command{Command: "transport_status"}}})

		opened <- err
	}()
	m, err := st2.Recv()
	if err != nil {
		t.Fatal(err)
	}
	id := m.GetDispatch().GetDispatchId()
	stale, _ := c.Attempt(withToken(context.Background(), "tok"))
	_ = stale.Send(&wire.AttemptUp{Msg: &wire.AttemptUp_Open{Open: &wire.AttemptOpen{DispatchId: id, ConnectionGeneration: g1}}})
	if _, err := stale.Recv(); status.Code(err) != codes.NotFound {
		t.Fatalf("stale-generation open: %v", err)
	}
	if got := testutil.ToFloat64(e.m.staleGeneration); got != 1 {
		t.Fatalf("stale_generation_messages_total %v", got)
	}
	good, _ := c.Attempt(withToken(context.Background(), "tok"))
	_ = good.Send(&wire.AttemptUp{Msg: &wire.AttemptUp_Open{Open: &wire.AttemptOpen{DispatchId: id, ConnectionGeneration: g2}}})
	if err := <-opened; err != nil {
		t.Fatalf("current-generation open: %v", err)
	}
	closeOld()                                                                        // the old stream's close arrives late: after the new one took over and got work
	wait.Until(t, func() bool { return testutil.ToFloat64(e.m.nodesConnected) == 1 }) // its cleanup ran
	nodes := e.hub.Nodes()
	if len(nodes) != 1 || nodes[0].ConnectionGeneration != g2 {
		t.Fatalf("registry %+v", nodes)
	}
	if snap := e.pool.Snapshot(); len(snap) != 1 || snap[0].ConnectionGeneration != g2 {
		t.Fatalf("the old cleanup removed the new generation: %+v", snap)
	}
	if !e.hub.Serving() { // what /readyz reports
		t.Fatal("the connected node's providers are in the pool, but the hub is not serving")
	}
	l.Release()
}

// TestLateAdvertisementNeverWipesANewerConnection is issue 18's defect 2:
// an advertisement of a superseded connection, or of an older generation,
// never replaces the newer connection's providers.
func TestLateAdvertisementNeverWipesANewerConnection(t *testing.T) {
	e := startHub(t, NodeConfig{ID: "n1", Token: "tok"})
	c := e.client(t)
	_, g1, err := session(t, context.Background(), c, "tok", "n1", ad("p", 4, "m"))
	if err != nil {
		t.Fatal(err)
	}
	e.hub.mu.Lock()
	old := e.hub.conns["n1"]
	e.hub.mu.Unlock()
	_, g2, err := session(t, context.Background(), c, "tok", "n1", ad("q", 4, "m"))
	if err != nil || g2 <= g1 {
		t.Fatal(err)
	}
	// The hub sends Welcome before it registers the providers: the late
	// advertisements come after the newer connection's are in the pool.
	wait.Until(t, func() bool {
		snap := e.pool.Snapshot()
		return len(snap) == 1 && snap[0].ConnectionGeneration == g2
	})
	e.hub.readvertise(old, []*wire.ProviderAdvertisement{ad("stale", 4, "m")}, nil)
	if e.pool.SetNode("n1", g1, []*wire.ProviderAdvertisement{ad("stale", 4, "m")}) {
		t.Fatal("the pool took an older generation")
	}
	snap := e.pool.Snapshot()
	if len(snap) != 1 || snap[0].LocalProviderID != "q" || snap[0].ConnectionGeneration != g2 {
		t.Fatalf("pool after late advertisements: %+v", snap)
	}
}

// TestAbandonedAttemptIsEnded: an attempt stream delivered to a dispatch
// that open already gave up on is ended at once, not left waiting for the
// session to die.
func TestAbandonedAttemptIsEnded(t *testing.T) {
	e := startHub(t, NodeConfig{ID: "n1", Token: "tok"})
	owner := pool.Reception{NodeID: "n1", ConnectionGeneration: 7}
	pd := &pendingDispatch{owner: owner, ch: make(chan *AttemptConn, 1)}
	e.hub.mu.Lock()
	e.hub.pending["d1"], e.hub.opening["n1"] = pd, 1
	e.hub.mu.Unlock()
	a := testAttemptConn(owner)
	if err := e.hub.deliver("d1", a); err != nil {
		t.Fatal(err)
	}
	e.hub.abandon("d1", pd) // open timed out just before reading pd.ch
	if !a.ended() {
		t.Fatal("the abandoned attempt stream was not ended")
	}
	if err := e.hub.deliver("d1", testAttemptConn(owner)); status.Code(err) != codes.NotFound {
		t.Fatalf("delivery after abandon: %v", err)
	}
	if e.hub.opening["n1"] != 0 {
		t.Fatalf("opening count %d", e.hub.opening["n1"])
	}
}

// testAttemptConn is an attempt of owner with no stream.
func testAttemptConn(owner pool.Reception) *AttemptConn {
	return &AttemptConn{reception: owner}
}
