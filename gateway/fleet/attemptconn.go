package fleet

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/iopgw/iop/gateway/pool"
	"github.com/iopgw/iop/internal/clock"
	"github.com/iopgw/iop/internal/syncx"
	"github.com/iopgw/iop/wire"
)

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
