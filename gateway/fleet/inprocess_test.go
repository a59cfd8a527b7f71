package fleet

import (
	"context"
	"runtime"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/iopgw/iop/gateway/pool"
	"github.com/iopgw/iop/internal/testing/wait"
	"github.com/iopgw/iop/wire"
)

// TestInProcessChannelIsTheSameService: a node on the in-process channel
// is authenticated by its token as over the network (a wrong token or
// another node's id refused), welcomed with a generation, registered in
// the pool, and its attempts carried; with node mTLS configured, the
// in-process node needs no certificate (it has no transport).
func TestInProcessChannelIsTheSameService(t *testing.T) {
	e := startHub(t, NodeConfig{ID: "n1", Token: "tok"}, NodeConfig{ID: "n2", Token: "tok2"})
	e.hub.mtls = true
	c := wire.NewNodeLinkClient(e.hub.InProcess())
	ctx := t.Context()
	if _, _, err := session(t, ctx, c, "wrong", "n1"); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("wrong token: %v", err)
	}
	if _, _, err := session(t, ctx, c, "tok2", "n1"); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("n2's token claiming n1: %v", err)
	}
	st, gen, err := session(t, ctx, c, "tok", "n1", ad("p", 2, "m"))
	if err != nil || gen == 0 {
		t.Fatalf("session: gen %d, %v", gen, err)
	}
	wait.Until(t, func() bool { return len(e.pool.Snapshot()) == 1 })
	l, err := e.pool.Acquire(ctx, pool.ProviderPoolDispatchRequest{Model: "m"})
	if err != nil || l.ConnectionGeneration != gen {
		t.Fatalf("lease %+v %v", l, err)
	}
	defer l.Release()
	// The edge dispatches; the node opens the attempt and gets the work.
	opened := make(chan *AttemptConn, 1)
	go func() {
		ac, err := e.hub.Open(ctx, pool.Reception{NodeID: l.NodeID, ConnectionGeneration: l.ConnectionGeneration}, &wire.AttemptDown{Msg: &wire.AttemptDown_Command{Command: &wire.Command{Command: "transport_status"}}})
		if err != nil {
			t.Error(err)
		}
		opened <- ac
	}()
	m, err := st.Recv()
	if err != nil || m.GetDispatch() == nil {
		t.Fatalf("dispatch: %v %v", m, err)
	}
	at, err := c.Attempt(withToken(ctx, "tok"))
	if err != nil {
		t.Fatal(err)
	}
	open := &wire.AttemptOpen{DispatchId: m.GetDispatch().GetDispatchId(), ConnectionGeneration: gen}
	if err := at.Send(&wire.AttemptUp{Msg: &wire.AttemptUp_Open{Open: open}}); err != nil {
		t.Fatal(err)
	}
	down, err := at.Recv()
	if err != nil || down.GetCommand().GetCommand() != "transport_status" {
		t.Fatalf("work: %v %v", down, err)
	}
	ac := <-opened
	if ac == nil {
		t.Fatal("no attempt stream")
	}
	defer ac.End()
	up := &wire.AttemptUp{Msg: &wire.AttemptUp_Event{Event: &wire.RunEvent{Type: "complete"}}}
	if err := at.Send(up); err != nil {
		t.Fatal(err)
	}
	got, err := ac.Recv()
	if err != nil || !proto.Equal(got, up) {
		t.Fatalf("the node's event arrived as %v (%v)", got, err)
	}
}

// TestHandoverSharesNotCopies: the channel hands a message over — the
// receiver's message holds the sender's values — and refuses to fill a
// message of another type.
func TestHandoverSharesNotCopies(t *testing.T) {
	body := []byte("data: x\n\n")
	in := &wire.AttemptUp{Msg: &wire.AttemptUp_Frame{Frame: &wire.ProviderTunnelFrame{Type: "body", Body: body}}}
	out := &wire.AttemptUp{}
	if err := (handover{}).Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(in, out) || &out.GetFrame().GetBody()[0] != &body[0] {
		t.Fatalf("handed over %v", out)
	}
	if err := (handover{}).Copy(&wire.AttemptDown{}, in); err == nil {
		t.Fatal("an AttemptUp filled an AttemptDown")
	}
	// The fast path assigns the one oneof of the link's stream messages:
	// a field added beside it would be dropped, so none may be.
	for _, m := range []proto.Message{&wire.AttemptUp{}, &wire.AttemptDown{}, &wire.NodeMessage{}, &wire.EdgeMessage{}} {
		md := m.ProtoReflect().Descriptor()
		if md.Oneofs().Len() != 1 || md.Oneofs().Get(0).Fields().Len() != md.Fields().Len() {
			t.Errorf("%s has fields outside its oneof: extend handover.Copy", md.FullName())
		}
	}
}

// TestInProcessStreamsHoldNoEdgeGoroutine: on the in-process channel the
// edge's side of a parked or working attempt stream is detached — no
// Attempt handler waits beside it — and the stream still works as over
// the network: work dispatched onto a parked stream arrives, its terminal
// reaches the edge, the node's reopen parks the stream again, the next
// work goes on the same stream, and a stream the node ends leaves the
// edge's parked streams.
func TestInProcessStreamsHoldNoEdgeGoroutine(t *testing.T) {
	const streams = 8 // liveSession's capacity
	e := startHub(t, NodeConfig{ID: "n1", Token: "tok"})
	c := wire.NewNodeLinkClient(e.hub.InProcess())
	ctx := t.Context()
	_, welcome := liveSession(t, ctx, c, "n1", nil)
	gen := welcome.GetConnectionGeneration()
	reopen := &wire.AttemptUp{Msg: &wire.AttemptUp_Open{Open: &wire.AttemptOpen{Parked: true, Reusable: true, ParksAfterTerminal: true, ConnectionGeneration: gen}}}
	var held []wire.NodeLink_AttemptClient
	var cancels []context.CancelFunc
	for range streams {
		sctx, cancel := context.WithCancel(ctx)
		cancels = append(cancels, cancel)
		at, err := c.Attempt(withToken(sctx, "tok"))
		if err != nil {
			t.Fatal(err)
		}
		if err := at.Send(reopen); err != nil {
			t.Fatal(err)
		}
		held = append(held, at)
	}
	type down struct {
		i   int
		msg *wire.AttemptDown
		err error
	}
	downs := make(chan down, 2*streams)
	for i, at := range held {
		go func() {
			for {
				msg, err := at.Recv()
				downs <- down{i, msg, err}
				if err != nil {
					return
				}
			}
		}()
	}
	r := pool.Reception{NodeID: "n1", ConnectionGeneration: gen}
	conn := func() *nodeConn { e.hub.mu.Lock(); defer e.hub.mu.Unlock(); return e.hub.conns["n1"] }
	wait.Until(t, func() bool { return conn().parkedCount() == streams })
	wait.Until(t, func() bool { return handlersRunning() == 0 })

	for round := range 3 {
		work := &wire.AttemptDown{Msg: &wire.AttemptDown_Command{Command: &wire.Command{Command: "transport_status"}}}
		ac, err := e.hub.Open(ctx, r, work)
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		d := <-downs
		if d.err != nil || d.msg.GetCommand() == nil {
			t.Fatalf("round %d: work %v %v", round, d.msg, d.err)
		}
		at := held[d.i]
		if n := handlersRunning(); n != 0 {
			t.Fatalf("round %d: %d Attempt handlers wait beside the working stream", round, n)
		}
		terminal := &wire.AttemptUp{Msg: &wire.AttemptUp_Event{Event: &wire.RunEvent{Type: "complete"}}}
		if err := at.Send(terminal); err != nil {
			t.Fatal(err)
		}
		if got, err := ac.Recv(); err != nil || !proto.Equal(got, terminal) {
			t.Fatalf("round %d: terminal %v %v", round, got, err)
		}
		// The node's open again is there when the attempt finishes (even
		// rounds): the stream is parked again on the goroutine that
		// finished it. It comes after (odd rounds): a goroutine waits.
		if round%2 == 1 {
			ac.Finish()
		}
		if err := at.Send(reopen); err != nil {
			t.Fatal(err)
		}
		if round%2 == 0 {
			ac.Finish()
			if n := conn().parkedCount(); n != streams {
				t.Fatalf("round %d: %d streams parked as the attempt finished, want %d", round, n, streams)
			}
		}
		wait.Until(t, func() bool { return conn().parkedCount() == streams })
	}
	wait.Until(t, func() bool { return handlersRunning() == 0 })

	// The node ending a parked stream ends it at the edge too.
	cancels[0]()
	wait.Until(t, func() bool { return conn().parkedCount() == streams-1 })
	if d := <-downs; d.i != 0 || status.Code(d.err) != codes.Canceled {
		t.Fatalf("the ended stream: %d %v", d.i, d.err)
	}
}

// handlersRunning counts goroutines inside the hub's Attempt handler.
func handlersRunning() int {
	buf := make([]byte, 1<<22)
	n := runtime.Stack(buf, true)
	return strings.Count(string(buf[:n]), "fleet.(*Hub).Attempt(")
}
