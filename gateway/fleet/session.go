package fleet

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/iopgw/iop/gateway/pool"
	"github.com/iopgw/iop/internal/clock"
	"github.com/iopgw/iop/internal/ids"
	"github.com/iopgw/iop/internal/syncx"
	"github.com/iopgw/iop/wire"
)

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
