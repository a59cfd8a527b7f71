package fleet

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/iopgw/iop/gateway/pool"
	"github.com/iopgw/iop/internal/clock"
	"github.com/iopgw/iop/internal/slogx"
	"github.com/iopgw/iop/wire"
)

// Hub is the edge's gRPC server for node links: it authenticates nodes,
// assigns connection generations, registers their providers with the
// pool, and carries dispatched attempts. The registry is compare-and-swap
// on (node_id, connection_generation): cleaning up an old connection
// never removes a newer one.
type Hub struct {
	wire.UnimplementedNodeLinkServer
	// probeOnConnect: probe a connecting node's providers (HubConfig).
	probeOnConnect bool
	// life ends when the hub stops (wait); background holds the hub's own
	// goroutines besides session readers (connect probes, retiring
	// connections), which wait waits for.
	life       context.Context
	endLife    context.CancelFunc
	background sync.WaitGroup
	// drainTimeout bounds how long a removed node's session may finish its
	// streams (drain_timeout; SetNodes sets it).
	drainTimeout atomic.Int64
	nodes        atomic.Pointer[map[string]NodeConfig] // by node id; replaced whole by SetNodes
	pool         *pool.Pool
	log          *slog.Logger
	metrics      *hubMetrics
	edgeID       string
	mtls         bool
	limits       NodeLimitsConfig
	link         NodeLinkConfig
	audit        *slogx.Sampled // refusals a stranger can cause at will
	gen          atomic.Uint64
	clock        clock.Clock // heartbeats, open and take-up deadlines, drains, probes

	mu       sync.Mutex // guards the following fields
	conns    map[string]*nodeConn
	pending  map[string]*pendingDispatch
	seen     map[string]bool // nodes that connected since start
	opening  map[string]int  // per node: dispatches waiting for their attempt stream
	reading  map[string]int  // per node: attempt streams not yet matched to one
	draining bool

	readers sync.WaitGroup // session reader goroutines; added to under mu while !stopped
	stopped bool           // guarded by mu: wait has begun
}

// HubConfig configures a Hub.
type HubConfig struct {
	Nodes []NodeConfig
	Pool  *pool.Pool
	Log   *slog.Logger
	// Registerer takes the hub's collectors (nil: a private registry).
	Registerer prometheus.Registerer
	// EdgeID is sent to nodes in Welcome; MTLS makes a verified client
	// certificate name the node.
	EdgeID string
	MTLS   bool
	// Limits, Link and DrainTimeout default to DefaultNodeLimits,
	// DefaultNodeLink and DefaultDrainTimeout.
	Limits       *NodeLimitsConfig
	Link         *NodeLinkConfig
	DrainTimeout time.Duration
	// Clock runs the hub's timers (nil: the wall clock).
	Clock clock.Clock
	// ProbeOnConnect sends a CAPABILITIES probe to each provider of a node
	// that connects (in a goroutine the hub owns, on its life context), so
	// status shows an unreachable upstream before a request fails on it.
	ProbeOnConnect bool
}

// NewHub returns a hub.
func NewHub(c HubConfig) *Hub {
	if c.Registerer == nil {
		c.Registerer = prometheus.NewRegistry()
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	h := &Hub{pool: c.Pool, clock: clock.Or(c.Clock), log: c.Log, metrics: newHubMetrics(c.Registerer), edgeID: c.EdgeID, mtls: c.MTLS,
		limits: DefaultNodeLimits(), link: DefaultNodeLink(), audit: slogx.NewSampled(c.Log, time.Second), conns: map[string]*nodeConn{}, pending: map[string]*pendingDispatch{},
		seen: map[string]bool{}, opening: map[string]int{}, reading: map[string]int{}}
	if c.Limits != nil {
		h.limits = *c.Limits
	}
	if c.Link != nil {
		h.link = *c.Link
	}
	if c.DrainTimeout == 0 {
		c.DrainTimeout = DefaultDrainTimeout
	}
	h.probeOnConnect = c.ProbeOnConnect
	h.life, h.endLife = context.WithCancel(context.Background())
	h.SetNodes(c.Nodes, c.DrainTimeout)
	// Generations start from the wall clock so a restarted edge never
	// reissues an old one.
	h.gen.Store(uint64(time.Now().UnixMilli()))
	return h
}

// NoteDispatchFailure counts a dispatch a node did not open in time or
// could not take.
func (h *Hub) NoteDispatchFailure() { h.metrics.dispatchFails.Inc() }

// ServerOptions are the gRPC options of the node listener, including the
// authentication interceptors.
func (h *Hub) ServerOptions(creds credentials.TransportCredentials) []grpc.ServerOption {
	opts := append(wire.EdgeServerOptions(), grpc.StreamInterceptor(h.authenticate))
	if creds != nil {
		opts = append(opts, grpc.Creds(creds))
	}
	return opts
}

// allSeen reports whether every configured node has connected since the
// edge started.
func (h *Hub) AllSeen() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.seen) >= len(*h.nodes.Load())
}

// Wait ends the remaining sessions and returns once every session reader
// and every goroutine the hub started has ended (call it after the gRPC
// server stopped).
func (h *Hub) Wait() {
	h.mu.Lock()
	h.stopped = true
	conns := h.connsLocked()
	h.mu.Unlock()
	// Sessions on the in-process channel end here (a network server's
	// Stop has already ended its own).
	for _, c := range conns {
		c.close()
	}
	h.endLife()
	h.readers.Wait()
	h.background.Wait()
}

// goOwned runs f in a goroutine the hub owns: f gets the hub's life
// context, and wait waits for it. After wait has begun nothing starts.
func (h *Hub) goOwned(f func(ctx context.Context)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.stopped {
		return
	}
	h.background.Go(func() { f(h.life) })
}

// unregister removes c — only if it is still the node's registered
// connection — and its providers of that generation.
func (h *Hub) unregister(c *nodeConn) {
	c.close()
	c.endAttempts()
	h.mu.Lock()
	if h.conns[c.nodeID] == c {
		delete(h.conns, c.nodeID)
	}
	h.mu.Unlock()
	h.pool.RemoveNode(c.nodeID, c.gen)
	h.metrics.nodesConnected.Dec()
	h.log.Info("node disconnected", "node_id", c.nodeID, "connection_generation", c.gen)
}

// NodeInfo describes a registered node connection.
type NodeInfo struct {
	NodeID               string    `json:"node_id"`
	ConnectionGeneration uint64    `json:"connection_generation"`
	ConnectedAt          time.Time `json:"connected_at"`
	Providers            int       `json:"providers"`
	// ParkedStreams are the attempt streams parked now, waiting for work;
	// ParkLimit how many the connection may park (node_link.parked_attempts,
	// at most the node's capacity). A pool often empty under steady load
	// sends attempts the slow way (a stream opened for each).
	ParkedStreams int `json:"parked_streams"`
	ParkLimit     int `json:"park_limit"`
}

// Nodes lists registered connections.
func (h *Hub) Nodes() []NodeInfo {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]NodeInfo, 0, len(h.conns))
	for _, c := range h.conns {
		out = append(out, NodeInfo{NodeID: c.nodeID, ConnectionGeneration: c.gen, ConnectedAt: c.since, Providers: c.providers,
			ParkedStreams: c.parkedCount(), ParkLimit: c.parkLimit})
	}
	return out
}

// Serving reports whether a connected node's providers are in the pool:
// a node is listed (Nodes) from its hello, a moment before requests can
// reach its providers.
func (h *Hub) Serving() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, c := range h.conns {
		if c.advertised.Load() {
			return true
		}
	}
	return false
}

// drain stops accepting sessions.
func (h *Hub) Drain() {
	h.mu.Lock()
	h.draining = true
	conns := h.connsLocked()
	h.mu.Unlock()
	for _, c := range conns {
		c.endParked()
	}
}

// connsLocked is the registered connections (h.mu held).
func (h *Hub) connsLocked() []*nodeConn {
	conns := make([]*nodeConn, 0, len(h.conns))
	for _, c := range h.conns {
		conns = append(conns, c)
	}
	return conns
}

// command runs one provider command on a connection and returns its
// result (capabilities, transport_status).
func (h *Hub) Command(ctx context.Context, owner pool.Reception, cmd *wire.Command) (*wire.CommandResult, error) {
	ctx, cancel := context.WithTimeout(ctx, h.link.OpenTimeout+10*time.Second)
	defer cancel()
	a, err := h.Open(ctx, owner, &wire.AttemptDown{Msg: &wire.AttemptDown_Command{Command: cmd}})
	if err != nil {
		return nil, err
	}
	defer a.End()
	m, err := a.Recv()
	if err != nil {
		return nil, err
	}
	r := m.GetCommandResult()
	if r == nil {
		return nil, errors.New("node answered a command with something else")
	}
	return r, nil
}
