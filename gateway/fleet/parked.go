package fleet

import (
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/iopgw/iop/gateway/pool"
	"github.com/iopgw/iop/wire"
)

// parkLimit is how many attempt streams a node may park: the configured
// number, but no more than the attempts its providers can run at once
// (their capacities, as accepted): a stream beyond that would never be
// taken.
func parkLimit(configured int, ads []*wire.ProviderAdvertisement) int {
	capacity := 0
	for _, ad := range ads {
		capacity += int(ad.GetCapacity())
		if capacity >= configured {
			return configured
		}
	}
	return capacity
}

// maxParkedAttempts bounds node_link.parked_attempts.
const MaxParkedAttempts = 1024

// Parked attempt streams: a node opens up to the Welcome's
// parked_attempts streams ahead of work on a connection; a dispatch to
// that connection takes one and sends the work on it at once, with no
// Dispatch message and no stream setup on the request path. A parked
// stream belongs to the connection generation it named: it is used by
// that connection only and ended with it, so a stream of an old
// generation never carries work.

// park adds a to c's parked streams; false when c has ended or is full.
func (c *nodeConn) park(a *AttemptConn) bool {
	c.attemptsMu.Lock()
	defer c.attemptsMu.Unlock()
	if c.done.HasFired() || len(c.parked) >= c.parkLimit {
		return false
	}
	c.parked = append(c.parked, a)
	return true
}

// takeParked removes the most recently parked stream that is still open
// and tracks it as an attempt; nil when none is.
func (c *nodeConn) takeParked() *AttemptConn {
	c.attemptsMu.Lock()
	defer c.attemptsMu.Unlock()
	for len(c.parked) > 0 && !c.done.HasFired() {
		a := c.parked[len(c.parked)-1]
		c.parked[len(c.parked)-1] = nil
		c.parked = c.parked[:len(c.parked)-1]
		if a.ended() {
			continue
		}
		c.attempts[a] = struct{}{}
		return a
	}
	return nil
}

// parkedCount is how many streams are parked now.
func (c *nodeConn) parkedCount() int {
	c.attemptsMu.Lock()
	defer c.attemptsMu.Unlock()
	return len(c.parked)
}

// unpark forgets a if it is still parked (its stream ended unused).
func (c *nodeConn) unpark(a *AttemptConn) {
	c.attemptsMu.Lock()
	defer c.attemptsMu.Unlock()
	for i, p := range c.parked {
		if p == a {
			c.parked = append(c.parked[:i], c.parked[i+1:]...)
			return
		}
	}
}

// parkRoom is how many more streams c may park.
func (c *nodeConn) parkRoom() int {
	c.attemptsMu.Lock()
	defer c.attemptsMu.Unlock()
	return max(c.parkLimit-len(c.parked), 0)
}

// endParked ends every parked stream of c (the edge is draining).
func (c *nodeConn) endParked() {
	c.attemptsMu.Lock()
	defer c.attemptsMu.Unlock()
	for _, a := range c.parked {
		a.End()
	}
	c.parked = nil
}

// parkAttempt parks a on the connection its reception names, which must
// be the node's current one.
func (h *Hub) parkAttempt(a *AttemptConn) error {
	h.mu.Lock()
	c := h.conns[a.reception.NodeID]
	h.mu.Unlock()
	if c == nil || c.gen != a.reception.ConnectionGeneration {
		h.metrics.staleGeneration.Inc()
		return status.Error(codes.NotFound, "no such connection generation for a parked stream")
	}
	if !c.park(a) {
		return status.Error(codes.ResourceExhausted, "parked stream limit reached")
	}
	return nil
}

// watchTakeUp guards work sent on a parked stream, which — unlike a
// Dispatch — no open acknowledges: if nothing comes back within
// open_timeout and the node has not answered a heartbeat since the work
// was sent, the node is taken as frozen, exactly as for a dispatch it
// does not open: it is suspect (no new work) and the attempt ends before
// commit, so the request moves to another provider. A node answering
// heartbeats is alive; its upstream is merely slow (the stall watchdog's
// business).
func (h *Hub) watchTakeUp(c *nodeConn, a *AttemptConn) {
	sent := h.clock.Now().UnixNano()
	// At least two heartbeat intervals, so a live node has answered one.
	a.takeUp = h.clock.AfterFunc(max(h.link.OpenTimeout, 2*h.link.HeartbeatInterval), func() {
		if c.lastPong.Load() > sent || a.ended() {
			return
		}
		a.notTaken.Store(true)
		h.pool.SetNodeState(c.nodeID, c.gen, pool.NodeSuspect)
		h.metrics.dispatchFails.Inc()
		h.log.Warn("node did not take up work sent on a parked stream in time; it takes no new work until it answers",
			"node_id", c.nodeID, "connection_generation", c.gen)
		a.End()
	})
}
