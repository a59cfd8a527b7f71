package nodeagent

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/test/bufconn"

	"github.com/iopgw/iop/wire"
)

const defaultTestTimeout = 10 * time.Second

// fakeEdge is a minimal edge: it welcomes sessions with increasing
// generations and lets a test dispatch work and read the attempt stream.
type fakeEdge struct {
	wire.UnimplementedNodeLinkServer
	gen      atomic.Uint64
	sessions chan *edgeSession

	mu      sync.Mutex
	pending map[string]chan *edgeAttempt
	nextID  int

	// parkedAttempts is the Welcome's allowance; the node's parked
	// streams wait in parked for a test to use.
	parkedAttempts uint32
	parked         chan *edgeAttempt
}

type edgeSession struct {
	hello  *wire.Hello
	gen    uint64
	stream wire.NodeLink_SessionServer
	sendMu sync.Mutex
	close  chan struct{}
	once   sync.Once
}

type edgeAttempt struct {
	stream wire.NodeLink_AttemptServer
	open   *wire.AttemptOpen
	done   chan struct{}
	once   sync.Once
}

// end ends the attempt's RPC (the edge "closes its transport").
func (a *edgeAttempt) end() { a.once.Do(func() { close(a.done) }) }

func newFakeEdge() *fakeEdge {
	return &fakeEdge{sessions: make(chan *edgeSession, 16), pending: map[string]chan *edgeAttempt{}, parked: make(chan *edgeAttempt, 64)}
}

func (e *fakeEdge) Session(stream wire.NodeLink_SessionServer) error {
	m, err := stream.Recv()
	if err != nil {
		return err
	}
	h := m.GetHello()
	if h == nil {
		return errors.New("no hello")
	}
	s := &edgeSession{hello: h, gen: e.gen.Add(1), stream: stream, close: make(chan struct{})}
	if err := stream.Send(&wire.EdgeMessage{Msg: &wire.EdgeMessage_Welcome{Welcome: &wire.Welcome{ConnectionGeneration: s.gen, ParkedAttempts: e.parkedAttempts}}}); err != nil {
		return err
	}
	e.sessions <- s
	go func() {
		for {
			if _, err := stream.Recv(); err != nil {
				s.once.Do(func() { close(s.close) })
				return
			}
		}
	}()
	select {
	case <-s.close:
	case <-stream.Context().Done():
	}
	return errors.New("session closed by edge")
}

func (e *fakeEdge) Attempt(stream wire.NodeLink_AttemptServer) error {
	m, err := stream.Recv()
	if err != nil {
		return err
	}
	open := m.GetOpen()
	if open.GetParked() {
		a := &edgeAttempt{stream: stream, open: open, done: make(chan struct{})}
		select {
		case e.parked <- a:
		default:
			return errors.New("too many parked streams")
		}
		select {
		case <-a.done:
		case <-stream.Context().Done():
		}
		return nil
	}
	e.mu.Lock()
	ch := e.pending[open.GetDispatchId()]
	delete(e.pending, open.GetDispatchId())
	e.mu.Unlock()
	if ch == nil {
		return errors.New("unknown dispatch")
	}
	a := &edgeAttempt{stream: stream, open: open, done: make(chan struct{})}
	ch <- a
	select {
	case <-a.done:
	case <-stream.Context().Done():
	}
	return nil
}

// dispatch sends down to the node over s and returns the attempt stream.
func (e *fakeEdge) dispatch(t *testing.T, s *edgeSession, down *wire.AttemptDown) *edgeAttempt {
	t.Helper()
	e.mu.Lock()
	e.nextID++
	id := fmt.Sprintf("d%d", e.nextID)
	ch := make(chan *edgeAttempt, 1)
	e.pending[id] = ch
	e.mu.Unlock()
	s.sendMu.Lock()
	err := s.stream.Send(&wire.EdgeMessage{Msg: &wire.EdgeMessage_Dispatch{Dispatch: &wire.Dispatch{DispatchId: id}}})
	s.sendMu.Unlock()
	if err != nil {
		t.Fatalf("dispatch: %v", err)
	}
	var a *edgeAttempt
	select {
	case a = <-ch:
	case <-time.After(defaultTestTimeout):
		t.Fatal("node did not open the attempt stream")
	}
	t.Cleanup(a.end)
	if err := a.stream.Send(down); err != nil {
		t.Fatalf("send work: %v", err)
	}
	return a
}

func (s *edgeSession) cancelRun(t *testing.T, runID string) {
	s.sendMu.Lock()
	defer s.sendMu.Unlock()
	if err := s.stream.Send(&wire.EdgeMessage{Msg: &wire.EdgeMessage_CancelRun{CancelRun: &wire.CancelRun{RunId: runID}}}); err != nil {
		t.Fatal(err)
	}
}

// items reads the next message's items: one event or frame, or a
// batch's (the edge handles them in order, one by one).
func (a *edgeAttempt) items(t *testing.T) ([]*wire.RunEvent, []*wire.ProviderTunnelFrame) {
	t.Helper()
	m, err := a.stream.Recv()
	if err != nil {
		t.Fatalf("recv: %v", err)
	}
	switch msg := m.Msg.(type) {
	case *wire.AttemptUp_Event:
		return []*wire.RunEvent{msg.Event}, nil
	case *wire.AttemptUp_Frame:
		return nil, []*wire.ProviderTunnelFrame{msg.Frame}
	case *wire.AttemptUp_Batch:
		return msg.Batch.GetEvents(), msg.Batch.GetFrames()
	}
	t.Fatalf("unexpected message %v", m)
	return nil, nil
}

// events reads run events until the terminal (or error).
func (a *edgeAttempt) events(t *testing.T) []*wire.RunEvent {
	t.Helper()
	var out []*wire.RunEvent
	for {
		evs, fs := a.items(t)
		if len(fs) > 0 {
			t.Fatalf("frames on a run: %v", fs)
		}
		for i, ev := range evs {
			out = append(out, ev)
			switch ev.GetType() {
			case "complete", "error", "cancelled":
				if i != len(evs)-1 {
					t.Fatalf("items after the terminal: %v", evs[i+1:])
				}
				return out
			}
		}
	}
}

// frames reads tunnel frames until the terminal.
func (a *edgeAttempt) frames(t *testing.T) []*wire.ProviderTunnelFrame {
	t.Helper()
	var out []*wire.ProviderTunnelFrame
	for {
		evs, fs := a.items(t)
		if len(evs) > 0 {
			t.Fatalf("events on a tunnel: %v", evs)
		}
		for i, f := range fs {
			out = append(out, f)
			if f.GetType() == "end" || f.GetType() == "error" {
				if i != len(fs)-1 {
					t.Fatalf("items after the terminal: %v", fs[i+1:])
				}
				return out
			}
		}
	}
}

// testLink is a fake edge on a bufconn listener and an agent dialing it.
type testLink struct {
	edge   *fakeEdge
	agent  *Agent
	lis    *bufconn.Listener
	srv    *grpc.Server
	cancel context.CancelFunc
	done   chan error
}

func startLink(t *testing.T, cfg Config, opts Options) *testLink {
	t.Helper()
	return startLinkTo(t, newFakeEdge(), cfg, opts)
}

// startLinkTo is startLink with the fake edge given.
func startLinkTo(t *testing.T, edge *fakeEdge, cfg Config, opts Options) *testLink {
	t.Helper()
	lis := bufconn.Listen(1 << 20)
	srv := grpc.NewServer(wire.EdgeServerOptions()...)
	wire.RegisterNodeLinkServer(srv, edge)
	go func() { _ = srv.Serve(lis) }()
	opts.Dialer = func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }
	opts.NoMetricsServer = true
	if err := cfg.Resolve(); err != nil {
		t.Fatal(err)
	}
	agent, err := New(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	l := &testLink{edge: edge, agent: agent, lis: lis, srv: srv, cancel: cancel, done: make(chan error, 1)}
	go func() { l.done <- agent.Run(ctx) }()
	t.Cleanup(l.stop)
	return l
}

func (l *testLink) stop() {
	l.cancel()
	select {
	case <-l.done:
	case <-time.After(defaultTestTimeout):
	}
	l.srv.Stop()
}

func (l *testLink) session(t *testing.T) *edgeSession {
	t.Helper()
	select {
	case s := <-l.edge.sessions:
		return s
	case <-time.After(defaultTestTimeout):
		t.Fatal("no session")
		return nil
	}
}

// baseConfig is a node config with the given providers and one edge.
func baseConfig(providers ...ProviderConfig) Config {
	c := DefaultConfig()
	c.NodeID = "node-1"
	c.Token = "t0k3n"
	c.Edges = []EdgeConfig{{Address: "bufconn"}}
	c.Providers = providers
	return c
}

func simProvider(id string, sim SimConfig) ProviderConfig {
	if sim.TokenLatency == 0 {
		sim.TokenLatency = time.Millisecond
	}
	return ProviderConfig{ID: id, Adapter: "sim", Models: []string{"iop-sim"}, Sim: sim}
}
