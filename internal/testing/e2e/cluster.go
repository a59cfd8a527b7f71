// Package e2e starts an edge, nodes and fake providers in one process for
// integration tests: real TCP for the client side (so official SDKs can
// connect), bufconn or TCP for the node link, and the fault wall as the
// upstream of the HTTP-speaking providers.
package e2e

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http/httptest"
	"os"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/test/bufconn"

	"github.com/iopgw/iop/gateway"
	"github.com/iopgw/iop/gateway/fleet"
	"github.com/iopgw/iop/gateway/pool"
	"github.com/iopgw/iop/internal/testing/wall"
	"github.com/iopgw/iop/nodeagent"
)

// NodeSpec describes one node of a cluster.
type NodeSpec struct {
	ID        string
	Providers []nodeagent.ProviderConfig
	// Configure adjusts the node config after defaults.
	Configure func(*nodeagent.Config)
}

// Options configure a cluster.
type Options struct {
	Nodes []NodeSpec
	// Gateway adjusts the gateway config after defaults.
	Gateway func(*gateway.Config)
	// TCPNodeLink uses real TCP for the node link instead of bufconn.
	TCPNodeLink bool
	// Link is how nodes reach the edge: LinkNetwork (gRPC over bufconn, or
	// TCP with TCPNodeLink) or LinkInProcess (the edge's in-process
	// channel, as iop dev's bundled node). Default: the IOP_TEST_NODE_LINK
	// environment variable, else LinkNetwork; TCPNodeLink forces the
	// network. make test runs the e2e and conformance suites on both.
	Link string
	// WallDelay is the wall's token delay (default 2ms).
	WallDelay time.Duration
	// Log receives the edge's and the nodes' logs (default: discarded).
	Log *slog.Logger
}

// The node links a cluster can run on.
const (
	LinkNetwork   = "network"
	LinkInProcess = "in-process"
)

// linkOf is the link opts ask for.
func linkOf(opts Options) string {
	switch {
	case opts.TCPNodeLink:
		return LinkNetwork
	case opts.Link != "":
		return opts.Link
	case os.Getenv("IOP_TEST_NODE_LINK") == LinkInProcess:
		return LinkInProcess
	}
	return LinkNetwork
}

// Cluster is a running edge with nodes.
type Cluster struct {
	Gateway  *gateway.Gateway
	Nodes    map[string]*nodeagent.Agent
	URL      string // http://host:port of the public API
	AdminURL string
	Wall     *wall.Wall
	WallURL  string

	nodeLis   *bufconn.Listener
	nodeAddr  string
	stopEdge  context.CancelFunc
	edgeStop  sync.Once
	edgeDone  chan error
	nodeStops map[string]context.CancelFunc
	nodeDone  map[string]chan error

	t    testing.TB
	link string // LinkNetwork or LinkInProcess

	connMu sync.Mutex
	conns  map[string][]net.Conn // node id → its link connections
	log    *slog.Logger
}

// WallProvider returns a provider config for the cluster's wall.
func (c *Cluster) WallProvider(id, adapter, path string, models ...string) nodeagent.ProviderConfig {
	base := c.WallURL
	if adapter == "openai" {
		base += "/v1"
	}
	return nodeagent.ProviderConfig{ID: id, Adapter: adapter, Path: path, BaseURL: base, Models: models, Capacity: 64}
}

// AddWall starts another wall (with fault, if non-empty, applied to every
// request) and returns it with its URL.
func (c *Cluster) AddWall(t testing.TB, fault string) (*wall.Wall, string) {
	t.Helper()
	w := wall.New()
	w.TokenDelay, w.Fault = c.Wall.TokenDelay, fault
	ws := httptest.NewServer(w)
	t.Cleanup(ws.Close)
	return w, ws.URL
}

// newCluster starts the default wall.
func newCluster(t testing.TB, opts Options) *Cluster {
	t.Helper()
	w := wall.New()
	w.TokenDelay = opts.WallDelay
	if w.TokenDelay == 0 {
		w.TokenDelay = 2 * time.Millisecond
	}
	ws := httptest.NewServer(w)
	t.Cleanup(ws.Close)
	return &Cluster{t: t, link: linkOf(opts), Wall: w, WallURL: ws.URL, Nodes: map[string]*nodeagent.Agent{}, conns: map[string][]net.Conn{},
		nodeStops: map[string]context.CancelFunc{}, nodeDone: map[string]chan error{}}
}

// Start starts an edge and the given nodes, and waits until every node's
// providers are registered.
func Start(t testing.TB, opts Options, build func(c *Cluster) []NodeSpec) *Cluster {
	t.Helper()
	c := newCluster(t, opts)
	specs := opts.Nodes
	if build != nil {
		specs = append(specs, build(c)...)
	}
	cfg := gateway.DefaultConfig()
	cfg.Listen, cfg.NodeListen, cfg.AdminListen = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"
	cfg.DrainTimeout = 2 * time.Second
	for _, s := range specs {
		cfg.Nodes = append(cfg.Nodes, fleet.NodeConfig{ID: s.ID, Token: "token-" + s.ID})
	}
	if opts.Gateway != nil {
		opts.Gateway(&cfg)
	}
	gopts := gateway.Options{Log: opts.Log}
	c.log = opts.Log
	if !opts.TCPNodeLink {
		c.nodeLis = bufconn.Listen(1 << 20)
		gopts.NodeListener = c.nodeLis
	}
	g, err := gateway.New(cfg, gopts)
	if err != nil {
		t.Fatal(err)
	}
	httpLn, nodeLn, adminLn, err := g.Listen()
	if err != nil {
		t.Fatal(err)
	}
	c.Gateway, c.URL, c.AdminURL, c.nodeAddr = g, "http://"+httpLn.Addr().String(), "http://"+adminLn.Addr().String(), nodeLn.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	c.stopEdge, c.edgeDone = cancel, make(chan error, 1)
	go func() { c.edgeDone <- g.Serve(ctx, httpLn, nodeLn, adminLn) }()
	t.Cleanup(c.Stop)
	// Runs before Stop (cleanups are last in, first out): no lease was
	// ever released twice, whatever the test did.
	t.Cleanup(func() {
		if n := gatheredValue(c.Gateway.Gatherer(), "iop_edge_lease_double_release_total"); n != 0 {
			t.Errorf("iop_edge_lease_double_release_total = %v after the test", n)
		}
	})
	for _, s := range specs {
		c.StartNode(t, s)
	}
	c.WaitProviders(t, countProviders(specs))
	return c
}

func countProviders(specs []NodeSpec) int {
	n := 0
	for _, s := range specs {
		n += len(s.Providers)
	}
	return n
}

// DialNodePort connects to the edge's node listener as a node would
// (bufconn or TCP).
func (c *Cluster) DialNodePort(ctx context.Context) (net.Conn, error) {
	if c.nodeLis != nil {
		return c.nodeLis.DialContext(ctx)
	}
	return (&net.Dialer{}).DialContext(ctx, "tcp", c.nodeAddr)
}

// StartNode starts (or restarts) a node agent.
func (c *Cluster) StartNode(t testing.TB, s NodeSpec) *nodeagent.Agent {
	t.Helper()
	nc := nodeagent.DefaultConfig()
	nc.NodeID, nc.Token, nc.Metrics.Listen = s.ID, "token-"+s.ID, ""
	nc.Edges = []nodeagent.EdgeConfig{{Address: c.nodeAddr}}
	if c.link == LinkInProcess {
		nc.Edges = []nodeagent.EdgeConfig{{Address: LinkInProcess}}
	}
	nc.Providers = append([]nodeagent.ProviderConfig(nil), s.Providers...)
	if s.Configure != nil {
		s.Configure(&nc)
	}
	if err := nc.Resolve(); err != nil {
		t.Fatal(err)
	}
	opts := nodeagent.Options{NoMetricsServer: true, Log: c.log}
	if c.link == LinkInProcess {
		opts.Channels = map[string]grpc.ClientConnInterface{LinkInProcess: c.Gateway.Hub().InProcess()}
	}
	opts.Dialer = func(ctx context.Context, addr string) (net.Conn, error) {
		var conn net.Conn
		var err error
		if c.nodeLis != nil {
			conn, err = c.nodeLis.DialContext(ctx)
		} else {
			conn, err = (&net.Dialer{}).DialContext(ctx, "tcp", addr)
		}
		if err == nil {
			fc := &freezable{Conn: conn}
			conn = fc
			c.connMu.Lock()
			c.conns[s.ID] = append(c.conns[s.ID], fc)
			c.connMu.Unlock()
		}
		return conn, err
	}
	a, err := nodeagent.New(nc, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	c.Nodes[s.ID], c.nodeStops[s.ID], c.nodeDone[s.ID] = a, cancel, done
	return a
}

// KillNodeLink closes the node's link connections abruptly, as a node
// process dying would.
func (c *Cluster) KillNodeLink(id string) {
	c.networkOnly("killing a node's link connections")
	c.connMu.Lock()
	conns := c.conns[id]
	c.conns[id] = nil
	c.connMu.Unlock()
	for _, conn := range conns {
		_ = conn.Close()
	}
}

// FreezeNodeLink makes the node's link connections stop moving bytes in
// either direction, as a node process stopped with SIGSTOP (or a silent
// partition) would; ThawNodeLink lets them move again.
func (c *Cluster) FreezeNodeLink(id string) {
	c.networkOnly("freezing a node's link connections")
	c.eachFreezable(id, (*freezable).freeze)
}

// Link is the link the cluster's nodes run on.
func (c *Cluster) Link() string { return c.link }

// networkOnly skips the test when the nodes are in process: a fault of
// the link's network has nothing to act on there.
func (c *Cluster) networkOnly(fault string) {
	if c.link == LinkInProcess {
		c.t.Skipf("%s is a network fault; the in-process link has no network", fault)
	}
}

// ThawNodeLink undoes FreezeNodeLink.
func (c *Cluster) ThawNodeLink(id string) { c.eachFreezable(id, (*freezable).thaw) }

func (c *Cluster) eachFreezable(id string, f func(*freezable)) {
	c.connMu.Lock()
	defer c.connMu.Unlock()
	for _, conn := range c.conns[id] {
		if fc, ok := conn.(*freezable); ok {
			f(fc)
		}
	}
}

// freezable is a connection that can be frozen: reads and writes block
// while it is.
type freezable struct {
	net.Conn
	mu     sync.Mutex
	frozen chan struct{} // closed on thaw; nil when not frozen
}

func (f *freezable) freeze() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.frozen == nil {
		f.frozen = make(chan struct{})
	}
}

func (f *freezable) thaw() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.frozen != nil {
		close(f.frozen)
		f.frozen = nil
	}
}

func (f *freezable) wait() {
	f.mu.Lock()
	ch := f.frozen
	f.mu.Unlock()
	if ch != nil {
		<-ch
	}
}

func (f *freezable) Read(p []byte) (int, error) {
	f.wait()
	n, err := f.Conn.Read(p)
	f.wait()
	return n, err
}

func (f *freezable) Write(p []byte) (int, error) {
	f.wait()
	return f.Conn.Write(p)
}

func (f *freezable) Close() error {
	f.thaw()
	return f.Conn.Close()
}

// StopNode stops a node agent and waits for it.
func (c *Cluster) StopNode(id string) {
	if stop := c.nodeStops[id]; stop != nil {
		stop()
		select {
		case <-c.nodeDone[id]:
		case <-time.After(10 * time.Second):
		}
		delete(c.nodeStops, id)
	}
}

// WaitProviders waits until n providers are registered.
func (c *Cluster) WaitProviders(t testing.TB, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for len(c.Gateway.Pool().Snapshot()) != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d providers registered, want %d", len(c.Gateway.Pool().Snapshot()), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// WaitParked waits until every node connection's pool of parked attempt
// streams has settled — at least half its limit (what a node keeps) and
// unchanged for 200 ms — and fails otherwise: a goroutine or memory
// baseline taken before that counts pool streams still opening as
// growth. (A pool may settle one short of its limit: the connect probe's
// stream is not replaced while the pool is above half.)
func (c *Cluster) WaitParked(t testing.TB) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	var last string
	stable := time.Now()
	for {
		nodes := c.Gateway.Hub().Nodes()
		settled := len(nodes) > 0
		for _, n := range nodes {
			settled = settled && 2*n.ParkedStreams >= n.ParkLimit
		}
		now := fmt.Sprint(nodes)
		if now != last {
			last, stable = now, time.Now()
		}
		if settled && time.Since(stable) >= 200*time.Millisecond {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("parked streams never settled: %+v", nodes)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// WaitIdle waits until no lease is held, and fails otherwise.
func (c *Cluster) WaitIdle(t testing.TB) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for c.Gateway.Pool().InUse() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d leases still held", c.Gateway.Pool().InUse())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// StopEdge stops the edge gracefully (nodes keep running) and waits. It
// is idempotent and safe to call concurrently with Stop.
func (c *Cluster) StopEdge() {
	c.edgeStop.Do(func() {
		if c.stopEdge == nil {
			return
		}
		c.stopEdge()
		select {
		case <-c.edgeDone:
		case <-time.After(30 * time.Second):
		}
	})
}

// Stop stops nodes and the edge.
func (c *Cluster) Stop() {
	for id := range c.nodeStops {
		c.StopNode(id)
	}
	c.StopEdge()
}

// Sim returns a sim provider config.
func Sim(id string, sim nodeagent.SimConfig) nodeagent.ProviderConfig {
	if sim.TokenLatency == 0 {
		sim.TokenLatency = time.Millisecond
	}
	return nodeagent.ProviderConfig{ID: id, Adapter: "sim", Models: []string{"iop-sim"}, Capacity: 16, Sim: sim}
}

// String describes the cluster.
func (c *Cluster) String() string { return fmt.Sprintf("edge %s, %d nodes", c.URL, len(c.Nodes)) }

// flaky describes a recovering provider: it stalls on its first attempt,
// then its probe reports it unhealthy for unhealthyFor.
type flaky struct {
	id           string
	stallMS      int64
	closeGrace   time.Duration
	unhealthyFor time.Duration
	recovery     time.Duration // the edge's first recovery probe delay (the max is twice it)
}

// flakyCluster is node-a with the flaky provider (preferred) and a steady
// one, both serving iop-sim.
func flakyCluster(t testing.TB, f flaky) *Cluster {
	t.Helper()
	return Start(t, Options{Gateway: func(g *gateway.Config) {
		g.Providers = []pool.ProviderPolicy{{ID: "node-a/" + f.id, Priority: 10}}
		g.Overlay = pool.OverlayConfig{RecoveryInterval: f.recovery, RecoveryMaxInterval: 2 * f.recovery}
	}}, func(*Cluster) []NodeSpec {
		p := Sim(f.id, nodeagent.SimConfig{StallBeforeFirst: true, StallAttempts: 1, UnhealthyAfterStall: f.unhealthyFor})
		p.ResponseStallTimeoutMS = f.stallMS
		return []NodeSpec{{ID: "node-a", Providers: []nodeagent.ProviderConfig{p, Sim("steady", nodeagent.SimConfig{})},
			Configure: func(n *nodeagent.Config) { n.Liveness.CloseGrace = f.closeGrace }}}
	})
}
