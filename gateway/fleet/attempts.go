package fleet

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/iopgw/iop/gateway/pool"
	"github.com/iopgw/iop/internal/clock"
	"github.com/iopgw/iop/internal/ids"
	"github.com/iopgw/iop/internal/inproc"
	"github.com/iopgw/iop/wire"
)

// Open dispatches work to the connection owner: onto one of its parked
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
			h.metrics.parkedStreams.Inc()
			h.watchTakeUp(c, a)
			return a, nil
		}
		// The stream died unused: nothing ran; try the next one.
		a.End()
		c.untrack(a)
	}
	h.metrics.dispatchedStreams.Inc()
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
