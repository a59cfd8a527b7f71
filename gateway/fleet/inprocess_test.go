package fleet

import (
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
