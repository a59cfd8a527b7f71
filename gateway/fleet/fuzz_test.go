package fleet

import (
	"context"
	"io"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/iopgw/iop/gateway/pool"
	"github.com/iopgw/iop/wire"
)

// scriptedSession is the edge's side of a node's Session stream: Recv
// returns the scripted messages, then reports (processed) that the last
// one was handled and blocks until the test releases it.
type scriptedSession struct {
	grpc.ServerStream
	ctx       context.Context
	msgs      []*wire.NodeMessage
	processed chan struct{}
	release   chan struct{}
}

func (s *scriptedSession) Context() context.Context     { return s.ctx }
func (s *scriptedSession) Send(*wire.EdgeMessage) error { return nil }
func (s *scriptedSession) Recv() (*wire.NodeMessage, error) {
	if len(s.msgs) > 0 {
		m := s.msgs[0]
		s.msgs = s.msgs[1:]
		return m, nil
	}
	close(s.processed)
	<-s.release
	return nil, io.EOF
}

type scriptedAttempt struct {
	grpc.ServerStream
	ctx context.Context
	up  *wire.AttemptUp
}

func (s *scriptedAttempt) Context() context.Context     { return s.ctx }
func (s *scriptedAttempt) Send(*wire.AttemptDown) error { return nil }
func (s *scriptedAttempt) Recv() (*wire.AttemptUp, error) {
	if s.up == nil {
		return nil, io.EOF
	}
	up := s.up
	s.up = nil
	return up, nil
}

// FuzzNodeMessages is F5 on the edge: random bytes into proto.Unmarshal as
// a node's session message (after a valid hello) and as the first message
// of an Attempt stream, then the hub's handlers. The hub never panics; the
// pool only ever holds providers and models inside the node's grant, all
// of the current generation; an Attempt stream naming no pending dispatch
// of its own generation is refused and counted as stale, and one opened
// while no dispatch waits is refused before its first message is read.
func FuzzNodeMessages(f *testing.F) {
	seed := func(s *wire.NodeMessage, a *wire.AttemptUp) {
		sb, _ := proto.Marshal(s)
		ab, _ := proto.Marshal(a)
		f.Add(sb, ab)
	}
	seed(&wire.NodeMessage{Msg: &wire.NodeMessage_Advertisement{Advertisement: &wire.Advertisement{NodeId: "n1", Providers: []*wire.ProviderAdvertisement{ad("p", 2, "m")}}}},
		&wire.AttemptUp{Msg: &wire.AttemptUp_Open{Open: &wire.AttemptOpen{DispatchId: "d1", ConnectionGeneration: 1}}})
	seed(&wire.NodeMessage{Msg: &wire.NodeMessage_Advertisement{Advertisement: &wire.Advertisement{NodeId: "n1", Providers: []*wire.ProviderAdvertisement{ad("evil", 9, "other")}}}},
		&wire.AttemptUp{Msg: &wire.AttemptUp_Event{Event: &wire.RunEvent{Type: "complete"}}})
	seed(hello("n2"), &wire.AttemptUp{})

	pool := pool.NewPool(pool.PoolConfig{})
	h := NewHub(HubConfig{Nodes: []NodeConfig{{ID: "n1", Token: "t", Providers: []string{"p"}, Models: []string{"m"}}}, Pool: pool, EdgeID: "edge-fuzz"})
	m := h.metrics
	ctx := context.WithValue(context.Background(), nodeIDKey{}, "n1")

	f.Fuzz(func(t *testing.T, sessionMsg, attemptMsg []byte) {
		nm := &wire.NodeMessage{}
		if proto.Unmarshal(sessionMsg, nm) == nil {
			st := &scriptedSession{ctx: ctx, msgs: []*wire.NodeMessage{hello("n1", ad("p", 2, "m")), nm},
				processed: make(chan struct{}), release: make(chan struct{})}
			done := make(chan error, 1)
			go func() { done <- h.Session(st) }()
			<-st.processed
			gen := h.gen.Load()
			for _, s := range pool.Snapshot() {
				if s.NodeID != "n1" || s.ConnectionGeneration != gen || s.LocalProviderID != "p" {
					t.Fatalf("pool holds %+v (current generation %d)", s, gen)
				}
				for _, model := range s.Models {
					if model != "m" {
						t.Fatalf("pool holds model %q outside the grant", model)
					}
				}
			}
			close(st.release)
			<-done
			if n := len(pool.Snapshot()); n != 0 {
				t.Fatalf("%d providers left after the session ended", n)
			}
		}
		up := &wire.AttemptUp{}
		if proto.Unmarshal(attemptMsg, up) != nil {
			return
		}
		// With no dispatch waiting, no attempt stream is even read.
		if err := h.Attempt(&scriptedAttempt{ctx: ctx, up: up}); status.Code(err) != codes.ResourceExhausted {
			t.Fatalf("attempt stream with no dispatch waiting: %v", err)
		}
		h.mu.Lock()
		h.opening["n1"]++ // a dispatch of another id is waiting
		h.mu.Unlock()
		defer func() {
			h.mu.Lock()
			h.opening["n1"]--
			h.mu.Unlock()
		}()
		before := testutil.ToFloat64(m.staleGeneration)
		err := h.Attempt(&scriptedAttempt{ctx: ctx, up: up})
		switch code := status.Code(err); {
		case up.GetOpen() == nil && code != codes.InvalidArgument:
			t.Fatalf("attempt opening with %v: %v", up, err)
		case up.GetOpen() != nil && (code != codes.NotFound || testutil.ToFloat64(m.staleGeneration) != before+1):
			t.Fatalf("open of an unknown dispatch: %v", err)
		}
	})
}
