package fleet

import (
	"context"
	"crypto/subtle"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/iopgw/iop/gateway/pool"
	"github.com/iopgw/iop/internal/clock"
	"github.com/iopgw/iop/internal/ids"
	"github.com/iopgw/iop/internal/inproc"
	"github.com/iopgw/iop/internal/slogx"
	"github.com/iopgw/iop/internal/syncx"
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

// nodeConn is one registered node connection.
type nodeConn struct {
	nodeID     string
	gen        uint64
	stream     wire.NodeLink_SessionServer
	sendMu     sync.Mutex
	done       *syncx.Event // the connection ended or was superseded
	since      time.Time
	providers  int
	advertised atomic.Bool  // its providers are in the pool: work can reach it
	heartbeats bool         // the node answers Ping
	lastPong   atomic.Int64 // unix nanos of the last answer (or of the welcome)

	attemptsMu sync.Mutex
	attempts   map[*AttemptConn]struct{} // open attempt streams, ended with the connection
	idle       chan struct{}             // signalled (capacity 1) when the last open attempt ends
	parked     []*AttemptConn            // streams opened ahead of work, ended with the connection
	parkLimit  int                       // how many may be parked (the Welcome's parked_attempts)
}

// track adds a to c's open attempts; false when c has ended.
func (c *nodeConn) track(a *AttemptConn) bool {
	c.attemptsMu.Lock()
	defer c.attemptsMu.Unlock()
	select {
	case <-c.done.Done():
		return false
	default:
	}
	c.attempts[a] = struct{}{}
	return true
}

func (c *nodeConn) untrack(a *AttemptConn) {
	c.attemptsMu.Lock()
	defer c.attemptsMu.Unlock()
	delete(c.attempts, a)
	if len(c.attempts) == 0 && c.idle != nil {
		select {
		case c.idle <- struct{}{}:
		default:
		}
	}
}

// open is how many attempt streams of c are open.
func (c *nodeConn) open() int {
	c.attemptsMu.Lock()
	defer c.attemptsMu.Unlock()
	return len(c.attempts)
}

// endAttempts ends every open attempt stream of c: a dropped session (a
// frozen node) takes its streams with it, so their requests get a replay
// or a typed terminal now rather than when the transport notices.
func (c *nodeConn) endAttempts() {
	c.attemptsMu.Lock()
	defer c.attemptsMu.Unlock()
	for a := range c.attempts {
		a.End()
	}
	clear(c.attempts)
	for _, a := range c.parked {
		a.End()
	}
	c.parked = nil
}

func (c *nodeConn) close() { c.done.Fire() }

func (c *nodeConn) send(m *wire.EdgeMessage) error {
	c.sendMu.Lock()
	defer c.sendMu.Unlock()
	return c.stream.Send(m)
}

type pendingDispatch struct {
	owner pool.Reception // the connection that must open the attempt
	ch    chan *AttemptConn
}

// attemptConn is the edge end of an Attempt stream.
type AttemptConn struct {
	stream    wire.NodeLink_AttemptServer
	reception pool.Reception
	endState  attemptEnd // the attempt's end (End, Finish), apart from its stream's
	// work sent on a parked stream: armed until the first message back
	// (see watchTakeUp); owned by the receiving goroutine once armed.
	takeUp   clock.Timer
	notTaken atomic.Bool // the node did not take the work up in time
	reusable bool        // the node parks the stream again after the attempt (AttemptOpen.reusable)
	unasked  bool        // ... and does so after its terminal without Reparked (AttemptOpen.parks_after_terminal)
	finished atomic.Bool // the attempt's terminal was taken: the stream may be parked again
}

// errNotTakenUp ends work a frozen node received on a parked stream.
var errNotTakenUp = errors.New("the node did not take up the attempt in time")

// recv is the next message from the node.
func (a *AttemptConn) Recv() (*wire.AttemptUp, error) {
	// RecvMsg, not the generated Recv (the same call, two frames deeper
	// under every held stream's wait).
	m := new(wire.AttemptUp)
	err := a.stream.RecvMsg(m)
	if err != nil {
		m = nil
	}
	if a.takeUp != nil {
		a.takeUp.Stop()
		a.takeUp = nil
	}
	if err != nil && a.notTaken.Load() {
		return nil, notTakenUp(err)
	}
	return m, err
}

// notTakenUp is the receive error err of work the node did not take up.
func notTakenUp(err error) error { return fmt.Errorf("%w: %w", errNotTakenUp, err) }

// End ends the attempt: its stream ends, which cancels the work on the
// node.
func (a *AttemptConn) End() { a.end(false) }

// Finish ends the attempt after its terminal was taken: a reusable
// stream is parked again for the next attempt instead of ending — on the
// in-process channel, on the caller's goroutine when the node's open
// again is there already, so the caller holds no lock of the hub's.
func (a *AttemptConn) Finish() {
	a.finished.Store(true)
	a.end(true)
}

// Owner is the connection the attempt stream was received on.
func (a *AttemptConn) Owner() pool.Reception { return a.reception }

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

type nodeIDKey struct{}

// authenticate binds the bearer token of every RPC to a configured
// node_id (constant-time comparison of hashes) and, with mTLS, requires
// the client certificate's identity to be that node_id.
func (h *Hub) authenticate(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	return h.authenticateStream(srv, ss, handler, h.mtls)
}

// authenticateStream checks a stream's token and, when mtls, its client
// certificate.
func (h *Hub) authenticateStream(srv any, ss grpc.ServerStream, handler grpc.StreamHandler, mtls bool) error {
	md, _ := metadata.FromIncomingContext(ss.Context())
	token := ""
	if v := md.Get("authorization"); len(v) == 1 {
		token, _ = strings.CutPrefix(v[0], "Bearer ")
	}
	nodeID, ok := h.nodeForToken(token)
	if !ok {
		h.audit.Warn("node refused: invalid token", "peer", peerAddr(ss.Context()), "token_present", token != "")
		return status.Error(codes.Unauthenticated, "invalid node token")
	}
	if mtls && !peerIsNode(ss.Context(), nodeID) {
		h.audit.Warn("node refused: client certificate does not match the node id", "node_id", nodeID, "peer", peerAddr(ss.Context()))
		return status.Error(codes.PermissionDenied, "client certificate does not match the node id")
	}
	return handler(srv, &authedStream{ServerStream: ss, ctx: context.WithValue(ss.Context(), nodeIDKey{}, nodeID)})
}

func (h *Hub) nodeForToken(token string) (string, bool) {
	if token == "" {
		return "", false
	}
	sum := ids.Hash(token)
	found := ""
	for id, n := range *h.nodes.Load() {
		// SetNodes stored every node's hash, lower-case.
		if subtle.ConstantTimeCompare([]byte(sum), []byte(n.TokenSHA256)) == 1 {
			found = id
		}
	}
	return found, found != ""
}

// peerIsNode reports whether the verified client certificate names nodeID
// (as its common name or a DNS SAN).
func peerIsNode(ctx context.Context, nodeID string) bool {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return false
	}
	ti, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok || len(ti.State.VerifiedChains) == 0 {
		return false
	}
	return certNames(ti.State.VerifiedChains[0][0], nodeID)
}

// peerAddr is the remote address of an RPC, for audit lines.
func peerAddr(ctx context.Context) string {
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		return p.Addr.String()
	}
	return ""
}

func certNames(c *x509.Certificate, nodeID string) bool {
	if c.Subject.CommonName == nodeID {
		return true
	}
	for _, n := range c.DNSNames {
		if n == nodeID {
			return true
		}
	}
	return false
}

type authedStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *authedStream) Context() context.Context { return s.ctx }

func nodeIDFrom(ctx context.Context) string { v, _ := ctx.Value(nodeIDKey{}).(string); return v }

// Session implements the node's control stream.
func (h *Hub) Session(stream wire.NodeLink_SessionServer) error {
	nodeID := nodeIDFrom(stream.Context())
	m, err := stream.Recv()
	if err != nil {
		return err
	}
	hello := m.GetHello()
	if hello == nil || hello.GetNodeId() != nodeID {
		return status.Error(codes.PermissionDenied, "hello must name the authenticated node")
	}
	ads, clamped, err := h.granted(nodeID, hello.GetAdvertisement().GetProviders())
	if err != nil {
		h.audit.Warn("node refused: advertisement rejected", "node_id", nodeID, "peer", peerAddr(stream.Context()), "reason", err.Error())
		return status.Error(codes.PermissionDenied, err.Error())
	}
	h.mu.Lock()
	if h.draining {
		h.mu.Unlock()
		return status.Error(codes.Unavailable, "edge is shutting down")
	}
	c := &nodeConn{nodeID: nodeID, gen: h.gen.Add(1), stream: stream, done: syncx.NewEvent(), since: h.clock.Now(), providers: len(ads),
		heartbeats: hello.GetHeartbeats(), attempts: map[*AttemptConn]struct{}{}, idle: make(chan struct{}, 1)}
	if c.heartbeats {
		// Parked work is checked against heartbeats (watchTakeUp): a node
		// that does not answer them parks nothing.
		c.parkLimit = parkLimit(h.link.ParkedAttempts, ads)
	}
	c.lastPong.Store(h.clock.Now().UnixNano())
	prev := h.conns[nodeID]
	h.conns[nodeID] = c
	h.seen[nodeID] = true
	h.mu.Unlock()
	if prev != nil {
		prev.close() // superseded: the old connection takes no new work
		h.log.Warn("node session replaced by a new connection with the node's credentials", "node_id", nodeID,
			"old_connection_generation", prev.gen, "connection_generation", c.gen, "peer", peerAddr(stream.Context()))
	}
	h.metrics.nodesConnected.Inc()
	if err := c.send(&wire.EdgeMessage{Msg: &wire.EdgeMessage_Welcome{Welcome: &wire.Welcome{ConnectionGeneration: c.gen, EdgeId: h.edgeID,
		ParkedAttempts: uint32(c.parkLimit)}}}); err != nil {
		h.unregister(c)
		return err
	}
	h.pool.SetNode(nodeID, c.gen, ads)
	c.advertised.Store(true)
	h.noteClamps(nodeID, c.gen, clamped)
	h.log.Info("node connected", "node_id", nodeID, "connection_generation", c.gen, "providers", len(ads))
	if h.probeOnConnect {
		owner := pool.Reception{NodeID: nodeID, ConnectionGeneration: c.gen}
		h.goOwned(func(ctx context.Context) { h.probeProviders(ctx, owner, ads) })
	}
	defer h.unregister(c)
	return h.serveSession(c)
}

// serveSession reads advertisement updates until the stream ends or the
// connection is superseded.
func (h *Hub) serveSession(c *nodeConn) error {
	errc := make(chan error, 1)
	h.mu.Lock()
	if h.stopped {
		h.mu.Unlock()
		return status.Error(codes.Unavailable, "edge is shutting down")
	}
	h.readers.Add(1)
	if c.heartbeats {
		h.readers.Go(func() { h.heartbeat(c) })
	}
	h.mu.Unlock()
	go func() {
		defer h.readers.Done()
		for {
			m, err := c.stream.Recv()
			if err != nil {
				errc <- err
				return
			}
			switch msg := m.Msg.(type) {
			case *wire.NodeMessage_Advertisement:
				if ads, clamped, err := h.granted(c.nodeID, msg.Advertisement.GetProviders()); err == nil {
					h.readvertise(c, ads, clamped)
				}
			case *wire.NodeMessage_Pong:
				c.lastPong.Store(h.clock.Now().UnixNano())
				h.answered(c)
			case *wire.NodeMessage_Draining:
				h.pool.SetNodeState(c.nodeID, c.gen, pool.NodeDraining)
				h.log.Info("node draining: no new work is dispatched to it", "node_id", c.nodeID, "connection_generation", c.gen)
			}
		}
	}()
	select {
	case err := <-errc:
		return err
	case <-c.done.Done():
		return status.Error(codes.Aborted, "connection superseded or unresponsive")
	}
}

// heartbeat pings c every HeartbeatInterval and drops it when it has not
// answered for HeartbeatTimeout: a frozen node stops receiving work and
// its streams end within that bound.
func (h *Hub) heartbeat(c *nodeConn) {
	for seq := uint64(1); ; seq++ {
		tick, t := clock.After(h.clock, h.link.HeartbeatInterval)
		select {
		case <-c.done.Done():
			t.Stop()
			return
		case <-tick:
		}
		if silent := clock.Since(h.clock, time.Unix(0, c.lastPong.Load())); silent > h.link.HeartbeatTimeout {
			h.log.Warn("node missed heartbeats; dropping its session", "node_id", c.nodeID, "connection_generation", c.gen,
				"silent_for", silent.Round(time.Millisecond))
			h.metrics.heartbeatDrops.Inc()
			c.close()
			return
		}
		if err := c.send(&wire.EdgeMessage{Msg: &wire.EdgeMessage_Ping{Ping: &wire.Ping{Seq: seq}}}); err != nil {
			return
		}
	}
}

// answered clears a suspect mark once the node shows it is alive.
func (h *Hub) answered(c *nodeConn) {
	h.pool.SetNodeState(c.nodeID, c.gen, "")
}

// granted checks an advertisement against the edge's limits and the
// node's grant, and clamps what the node claims of the edge's resources:
// capacity into [1, max_capacity], the stall timeout to
// max_stall_timeout. Everything a node sends is untrusted input.
//
// A capacity clamped to max_capacity is never silent: the clamped
// providers' advertised capacities are returned, for the pool's status
// (and logged by noteClamps).
func (h *Hub) granted(nodeID string, ads []*wire.ProviderAdvertisement) ([]*wire.ProviderAdvertisement, map[string]int, error) {
	n := (*h.nodes.Load())[nodeID]
	if len(ads) > h.limits.MaxProviders {
		return nil, nil, fmt.Errorf("%d providers advertised; at most %d are accepted", len(ads), h.limits.MaxProviders)
	}
	var clamped map[string]int
	for _, ad := range ads {
		advertised, err := h.bounded(ad)
		if err != nil {
			return nil, nil, err
		}
		if advertised > 0 {
			if clamped == nil {
				clamped = map[string]int{}
			}
			clamped[ad.GetProviderId()] = advertised
		}
		if len(n.Providers) > 0 && !contains(n.Providers, ad.GetProviderId()) {
			return nil, nil, fmt.Errorf("provider %q is outside the node's grant", ids.Clip(ad.GetProviderId()))
		}
		for _, m := range ad.GetModels() {
			if len(n.Models) > 0 && !contains(n.Models, m) {
				return nil, nil, fmt.Errorf("model %q is outside the node's grant", ids.Clip(m))
			}
		}
	}
	return ads, clamped, nil
}

// noteClamps tells the pool and the log which of a node's providers
// advertised more capacity than node_limits.max_capacity lets them use.
func (h *Hub) noteClamps(nodeID string, gen uint64, clamped map[string]int) {
	for id, advertised := range clamped {
		h.pool.NoteAdvertisedCapacity(pool.ProviderKey{NodeID: nodeID, Generation: gen, ProviderID: id}, advertised)
		h.log.Warn("a provider advertised more capacity than node_limits.max_capacity allows; it gets the limit", "node_id", nodeID,
			"provider_id", ids.Clip(id), "advertised_capacity", advertised, "effective_capacity", h.limits.MaxCapacity)
	}
}

// maxName bounds every name in an advertisement.
const maxName = 256

// bounded checks one provider's advertisement against the limits and
// clamps its capacity and stall timeout; it returns the advertised
// capacity when that was clamped to max_capacity (else 0).
func (h *Hub) bounded(ad *wire.ProviderAdvertisement) (int, error) {
	if len(ad.GetModels()) == 0 || len(ad.GetModels()) > h.limits.MaxModels {
		return 0, fmt.Errorf("provider %q advertises %d models; 1 to %d are accepted", ids.Clip(ad.GetProviderId()), len(ad.GetModels()), h.limits.MaxModels)
	}
	if len(ad.GetSurfaces()) > 16 {
		return 0, fmt.Errorf("provider %q advertises %d surfaces", ids.Clip(ad.GetProviderId()), len(ad.GetSurfaces()))
	}
	names := append([]string{ad.GetProviderId(), ad.GetAdapter(), ad.GetTarget(), ad.GetInstanceKey(), ad.GetExecutionPath()}, ad.GetModels()...)
	for _, s := range append(names, ad.GetSurfaces()...) {
		if len(s) > maxName {
			return 0, fmt.Errorf("provider %q advertises a name longer than %d bytes", ids.Clip(ad.GetProviderId()), maxName)
		}
	}
	if ad.GetProviderId() == "" {
		return 0, errors.New("a provider without an id was advertised")
	}
	clamped := 0
	if ad.GetCapacity() > int32(h.limits.MaxCapacity) {
		clamped = int(ad.GetCapacity())
	}
	ad.Capacity = min(max(ad.GetCapacity(), 1), int32(h.limits.MaxCapacity))
	if maxMS := h.limits.MaxStallTimeout.Milliseconds(); ad.GetResponseStallTimeoutMs() <= 0 || ad.GetResponseStallTimeoutMs() > maxMS {
		ad.ResponseStallTimeoutMs = min(max(ad.GetResponseStallTimeoutMs(), 0), maxMS)
		if ad.ResponseStallTimeoutMs == 0 {
			ad.ResponseStallTimeoutMs = min(300000, maxMS)
		}
	}
	return clamped, nil
}

func contains(list []string, v string) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

// readvertise applies a re-advertisement of c — only while c is the
// node's registered connection, checked and applied under one lock, so a
// late advertisement of a superseded or closed connection never reaches
// the pool (which refuses an older generation anyway).
func (h *Hub) readvertise(c *nodeConn, ads []*wire.ProviderAdvertisement, clamped map[string]int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.conns[c.nodeID] == c {
		h.pool.SetNode(c.nodeID, c.gen, ads)
		h.noteClamps(c.nodeID, c.gen, clamped)
	}
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

// open dispatches work to the connection owner: onto one of its parked
// streams when it has one, otherwise it asks that connection to open an
// Attempt stream and sends down on it.
func (h *Hub) Open(ctx context.Context, owner pool.Reception, down *wire.AttemptDown) (*AttemptConn, error) {
	h.mu.Lock()
	c := h.conns[owner.NodeID]
	h.mu.Unlock()
	if c == nil || c.gen != owner.ConnectionGeneration {
		return nil, errors.New("the node connection is gone")
	}
	for a := c.takeParked(); a != nil; a = c.takeParked() {
		if err := a.stream.Send(down); err == nil {
			h.metrics.attemptStreams.WithLabelValues("parked").Inc()
			h.watchTakeUp(c, a)
			return a, nil
		}
		// The stream died unused: nothing ran; try the next one.
		a.End()
		c.untrack(a)
	}
	h.metrics.attemptStreams.WithLabelValues("dispatched").Inc()
	return h.dispatch(ctx, c, owner, down)
}

// dispatch asks c to open an Attempt stream for down and sends it there.
func (h *Hub) dispatch(ctx context.Context, c *nodeConn, owner pool.Reception, down *wire.AttemptDown) (*AttemptConn, error) {
	h.mu.Lock()
	if h.conns[owner.NodeID] != c {
		h.mu.Unlock()
		return nil, errors.New("the node connection is gone")
	}
	id := ids.New()
	pd := &pendingDispatch{owner: owner, ch: make(chan *AttemptConn, 1)}
	h.pending[id] = pd
	h.opening[owner.NodeID]++
	h.mu.Unlock()
	defer h.abandon(id, pd)
	if err := c.send(&wire.EdgeMessage{Msg: &wire.EdgeMessage_Dispatch{Dispatch: &wire.Dispatch{DispatchId: id}}}); err != nil {
		return nil, fmt.Errorf("sending dispatch: %w", err)
	}
	expired, t := clock.After(h.clock, h.link.OpenTimeout)
	defer t.Stop()
	select {
	case a := <-pd.ch:
		if !c.track(a) {
			a.End()
			return nil, errors.New("node connection closed")
		}
		if err := a.stream.Send(down); err != nil {
			a.End()
			return nil, fmt.Errorf("sending work: %w", err)
		}
		return a, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-c.done.Done():
		return nil, errors.New("node connection closed")
	case <-expired:
		h.pool.SetNodeState(owner.NodeID, owner.ConnectionGeneration, pool.NodeSuspect)
		h.log.Warn("node did not open a dispatched attempt in time; it takes no new work until it answers",
			"node_id", owner.NodeID, "connection_generation", owner.ConnectionGeneration, "open_timeout", h.link.OpenTimeout)
		return nil, fmt.Errorf("node did not open the attempt stream within %v", h.link.OpenTimeout)
	}
}

// Attempt implements the per-attempt stream. The reception is the
// authenticated node and the generation it claims, which must be the
// lease's: anything else is a reception-owner mismatch and is refused
// without touching the lease. Between its messages the stream only waits
// for its attempt's end (next): over the network on this handler's
// goroutine; on the in-process channel the handler detaches the stream
// and returns, and each end goes on on a goroutine of its own (detach),
// so a held or parked in-process stream costs the edge no goroutine.
// The stream's reads, writes and parking run aside (a short-lived
// goroutine): the handler's goroutine waits for the stream's whole life
// and keeps the stack it needs for that.
func (h *Hub) Attempt(stream wire.NodeLink_AttemptServer) error {
	nodeID := nodeIDFrom(stream.Context())
	if !h.admitAttempt(nodeID) {
		return status.Error(codes.ResourceExhausted, "no dispatch is waiting for an attempt stream")
	}
	var a *AttemptConn
	var err error
	aside(func() { a, err = h.opened(stream, nodeID) })
	if err != nil {
		return err
	}
	if end, ok := inproc.Detach(stream.Context()); ok {
		pending, _ := inproc.Pending(stream.Context()) // a context Detach took: Pending takes it too
		h.detach(stream, a, end, pending)
		return nil
	}
	for {
		a.wait()
		if aside(func() { a, err = h.next(stream, a) }); a == nil {
			return err
		}
	}
}

// opened reads a new Attempt stream's AttemptOpen and makes its attempt
// (attach).
func (h *Hub) opened(stream wire.NodeLink_AttemptServer, nodeID string) (*AttemptConn, error) {
	m, err := stream.Recv()
	h.matchedAttempt(nodeID)
	if err != nil {
		return nil, err
	}
	open := m.GetOpen()
	if open == nil {
		return nil, status.Error(codes.InvalidArgument, "first message must be open")
	}
	r := pool.Reception{NodeID: nodeID, ConnectionGeneration: open.GetConnectionGeneration()}
	return h.attach(stream, r, open, false)
}

// aside runs f on a goroutine of its own and returns when f did. A
// goroutine's stack grows to the deepest call it made and keeps that
// size while it stays deep enough, and an Attempt handler waits for its
// stream's whole life under grpc-go's own deep frames: run there, a
// stream's first read (protobuf, the transport's flow control) doubles
// its stack to 8 KiB for good. Run aside, those calls leave it at 4 KiB,
// a held or parked stream 4 KiB lighter, for a goroutine started per
// attempt.
func aside(f func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	<-done
}

// attach makes the attempt of open on stream, and parks it or hands it to
// the dispatch that asked for it.
func (h *Hub) attach(stream wire.NodeLink_AttemptServer, r pool.Reception, open *wire.AttemptOpen, reopened bool) (*AttemptConn, error) {
	a := &AttemptConn{stream: stream, reception: r, reusable: open.GetReusable(), unasked: open.GetParksAfterTerminal()}
	if !open.GetParked() {
		if err := h.deliver(open.GetDispatchId(), a); err != nil {
			a.end(false)
			return nil, err
		}
		return a, nil
	}
	if err := h.parkAttempt(a); err != nil {
		a.end(false)
		return nil, err
	}
	if reopened {
		h.metrics.reparked.Inc()
	}
	return a, nil
}

// next follows the end of attempt a on its stream: the stream is parked
// again for the node's next work (the new attempt), or ends (nil).
func (h *Hub) next(stream wire.NodeLink_AttemptServer, a *AttemptConn) (*AttemptConn, error) {
	h.untrack(a.reception, a)
	open, err := h.repark(stream, a)
	if open == nil {
		return nil, err
	}
	return h.attach(stream, a.reception, open, true)
}

// repark takes a finished attempt's stream back as a parked one and
// returns the node's new AttemptOpen; nil when the stream ends instead —
// it was not reusable, its attempt did not finish (cancelled, not taken
// up, abandoned), or the node ended it. A node that parks its streams
// after the terminal unasked has sent that AttemptOpen already (or
// half-closed the stream); any other is offered the stream (Reparked)
// and answers with it. Either sends nothing else in between.
func (h *Hub) repark(stream wire.NodeLink_AttemptServer, a *AttemptConn) (*wire.AttemptOpen, error) {
	if !(a.reusable || a.unasked) || !a.finished.Load() || stream.Context().Err() != nil {
		return nil, nil
	}
	if !a.unasked {
		if err := stream.Send(&wire.AttemptDown{Msg: &wire.AttemptDown_Reparked{Reparked: &wire.Reparked{}}}); err != nil {
			return nil, nil
		}
	}
	m, err := stream.Recv()
	if err != nil {
		return nil, nil // the node ended the stream instead
	}
	open := m.GetOpen()
	if open == nil || !open.GetParked() || open.GetConnectionGeneration() != a.reception.ConnectionGeneration {
		return nil, status.Error(codes.InvalidArgument, "a reparked stream must be opened again, parked, for its connection generation")
	}
	return open, nil
}

// untrack forgets an ended attempt stream of reception r.
func (h *Hub) untrack(r pool.Reception, a *AttemptConn) {
	h.mu.Lock()
	c := h.conns[r.NodeID]
	h.mu.Unlock()
	if c != nil && c.gen == r.ConnectionGeneration {
		c.unpark(a)
		c.untrack(a)
	}
}

// abandon forgets dispatch id once open is done with it. An attempt
// stream delivered after open gave up is ended, so its Attempt handler
// (and the node's end) does not wait for the session to die; delivery
// happens under h.mu, so none can follow.
func (h *Hub) abandon(id string, pd *pendingDispatch) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.pending, id)
	if h.opening[pd.owner.NodeID]--; h.opening[pd.owner.NodeID] <= 0 {
		delete(h.opening, pd.owner.NodeID)
	}
	select {
	case a := <-pd.ch:
		a.End()
	default:
	}
}

// deliver hands a to the dispatch id waits for, under h.mu so that open's
// cleanup (which drains what it abandons under the same lock) cannot miss
// it.
func (h *Hub) deliver(id string, a *AttemptConn) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	pd := h.pending[id]
	if pd == nil || pd.owner != a.reception {
		h.metrics.staleGeneration.Inc()
		return status.Error(codes.NotFound, "no such dispatch for this connection")
	}
	select {
	case pd.ch <- a:
		h.pool.SetNodeState(a.reception.NodeID, a.reception.ConnectionGeneration, "") // it answered
		return nil
	default:
		return status.Error(codes.AlreadyExists, "dispatch already opened")
	}
}

// admitAttempt lets an attempt stream read its first message only while
// the node has more dispatches waiting, plus room for parked streams,
// than streams already reading one: a node cannot make the edge decode
// messages on streams it was never asked (or allowed) to open.
func (h *Hub) admitAttempt(nodeID string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	room := 0
	if c := h.conns[nodeID]; c != nil {
		room = c.parkRoom()
	}
	if h.reading[nodeID] >= h.opening[nodeID]+room {
		return false
	}
	h.reading[nodeID]++
	return true
}

func (h *Hub) matchedAttempt(nodeID string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.reading[nodeID]--; h.reading[nodeID] <= 0 {
		delete(h.reading, nodeID)
	}
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
