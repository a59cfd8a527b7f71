package nodeagent

import (
	"errors"
	"sync"
	"sync/atomic"

	"github.com/iopgw/iop/wire"
)

// Session is one accepted connection to one edge: the connection
// generation the edge assigned, and the connection-scoped monotonic source
// of health_observation_seq.
//
// A new connection gets a new Session whose sequence starts at zero, so
// its first finalized observation is 1. Normalized and tunnel observations
// on the same connection share the source and receive unique, increasing
// values under concurrency. Nothing here is process-global.
type Session struct {
	generation uint64
	seq        atomic.Uint64

	mu    sync.Mutex // guards state
	state string

	sendMu sync.Mutex // serializes sends on the session stream
	send   func(*wire.NodeMessage) error

	// Parked attempt streams: how many the edge allows (Welcome), and how
	// many are parked now, waiting for work (see Agent.parked).
	parkTarget int32
	idle       atomic.Int32

	// reopen parks a stream again after its terminal: the same message
	// for every attempt of the session, never changed once made (a
	// network send marshals it, the in-process channel hands its oneof
	// to the edge, which only reads it).
	reopen *wire.AttemptUp
}

// Send sends m on the session stream (safe for concurrent use).
func (s *Session) Send(m *wire.NodeMessage) error {
	s.sendMu.Lock()
	defer s.sendMu.Unlock()
	if s.send == nil {
		return errors.New("session has no stream")
	}
	return s.send(m)
}

// Session states reported by transport_status.
const (
	StateConnected = "connected"
	StateClosed    = "closed"
)

func newSession(generation uint64) *Session {
	s := &Session{generation: generation, state: StateConnected}
	s.reopen = &wire.AttemptUp{Msg: &wire.AttemptUp_Open{Open: parkedOpen(s)}}
	return s
}

// Generation is the connection_generation the edge assigned.
func (s *Session) Generation() uint64 { return s.generation }

// NextObservationSeq returns the next health_observation_seq: 1 for the
// first call on a session.
func (s *Session) NextObservationSeq() uint64 { return s.seq.Add(1) }

// State reports connected or closed.
func (s *Session) State() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state
}

func (s *Session) markClosed() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.state = StateClosed
}
