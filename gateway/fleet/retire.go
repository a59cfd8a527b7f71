package fleet

import (
	"context"
	"strings"
	"time"

	"github.com/iopgw/iop/gateway/pool"
	"github.com/iopgw/iop/internal/clock"
	"github.com/iopgw/iop/internal/ids"
)

// SetNodes replaces the configured nodes. A node no longer listed takes
// no new work at once; its session ends once its in-flight attempts have
// (bounded by the drain timeout), so no stream is cut. A listed node's
// new token or grant applies from its next connection or advertisement.
func (h *Hub) SetNodes(nodes []NodeConfig, drainTimeout time.Duration) {
	h.drainTimeout.Store(int64(drainTimeout))
	m := make(map[string]NodeConfig, len(nodes))
	for _, n := range nodes {
		// The token's hash, once here rather than on every stream.
		if n.TokenSHA256 == "" {
			n.TokenSHA256 = ids.Hash(n.Token)
		}
		n.TokenSHA256 = strings.ToLower(n.TokenSHA256)
		m[n.ID] = n
	}
	h.nodes.Store(&m)
	h.mu.Lock()
	var removed []*nodeConn
	for id, c := range h.conns {
		if _, ok := m[id]; !ok {
			removed = append(removed, c)
		}
	}
	h.mu.Unlock()
	for _, c := range removed {
		h.pool.SetNodeState(c.nodeID, c.gen, pool.NodeDraining)
		h.log.Warn("node removed from the configuration: it takes no new work; its session ends when its streams have", "node_id", c.nodeID)
		h.goOwned(func(ctx context.Context) { h.retire(ctx, c, time.Duration(h.drainTimeout.Load())) })
	}
}

// retire closes c once it has no open attempt — woken by the last one's
// end, not by polling — or after limit (the configured drain_timeout), or
// at once when the hub stops.
func (h *Hub) retire(ctx context.Context, c *nodeConn, limit time.Duration) {
	expired, t := clock.After(h.clock, limit)
	defer t.Stop()
	for c.open() > 0 {
		select {
		case <-c.idle:
		case <-c.done.Done():
			return
		case <-expired:
			h.log.Warn("a removed node's streams did not finish within drain_timeout; its session ends", "node_id", c.nodeID,
				"open_streams", c.open())
			c.close()
			return
		case <-ctx.Done():
			c.close()
			return
		}
	}
	c.close()
}
