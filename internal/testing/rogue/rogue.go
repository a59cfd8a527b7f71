// Package rogue is a node written directly against wire/, doing what a
// compromised or buggy node might: it authenticates with a real token,
// advertises whatever it is told to, and answers every dispatch with a
// script of raw messages. Tests use it to check that the edge treats
// everything a node sends as untrusted input. Tests only.
package rogue

import (
	"context"
	"errors"
	"net"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/iopgw/iop/wire"
)

// Respond answers one dispatched attempt: down is what the edge sent,
// send writes to the attempt stream.
type Respond func(down *wire.AttemptDown, send func(*wire.AttemptUp) error) error

// Node is a connected rogue node.
type Node struct {
	Conn       *grpc.ClientConn
	Client     wire.NodeLinkClient
	Session    wire.NodeLink_SessionClient
	Generation uint64
	ctx        context.Context
}

// Dial connects to an edge's node listener through dial.
func Dial(dial func(context.Context) (net.Conn, error)) (*grpc.ClientConn, error) {
	return grpc.NewClient("passthrough:///edge", grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return dial(ctx) }),
		grpc.WithDefaultCallOptions(grpc.MaxCallSendMsgSize(wire.MaxMessageSize)))
}

// Connect opens a session as nodeID with token and the given providers,
// and answers every dispatch with respond until ctx ends.
func Connect(ctx context.Context, conn *grpc.ClientConn, token, nodeID string, providers []*wire.ProviderAdvertisement, respond Respond) (*Node, error) {
	ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
	c := wire.NewNodeLinkClient(conn)
	st, err := c.Session(ctx)
	if err != nil {
		return nil, err
	}
	hello := &wire.NodeMessage{Msg: &wire.NodeMessage_Hello{Hello: &wire.Hello{NodeId: nodeID,
		Advertisement: &wire.Advertisement{NodeId: nodeID, Providers: providers}}}}
	if err := st.Send(hello); err != nil {
		_, rerr := st.Recv()
		return nil, errors.Join(err, rerr)
	}
	m, err := st.Recv()
	if err != nil {
		return nil, err
	}
	n := &Node{Conn: conn, Client: c, Session: st, Generation: m.GetWelcome().GetConnectionGeneration(), ctx: ctx}
	go n.serve(respond)
	return n, nil
}

// serve opens an attempt stream for every dispatch and runs respond on it.
func (n *Node) serve(respond Respond) {
	for {
		m, err := n.Session.Recv()
		if err != nil {
			return
		}
		d := m.GetDispatch()
		if d == nil || respond == nil {
			continue // without respond, the node never takes work
		}
		go n.attempt(d.GetDispatchId(), respond)
	}
}

func (n *Node) attempt(id string, respond Respond) {
	st, err := n.Client.Attempt(n.ctx)
	if err != nil {
		return
	}
	open := &wire.AttemptUp{Msg: &wire.AttemptUp_Open{Open: &wire.AttemptOpen{DispatchId: id, ConnectionGeneration: n.Generation}}}
	if st.Send(open) != nil {
		return
	}
	down, err := st.Recv()
	if err != nil {
		return
	}
	_ = respond(down, st.Send)
	_ = st.CloseSend()
	for {
		if _, err := st.Recv(); err != nil {
			return
		}
	}
}

// Frame is a tunnel frame message.
func Frame(f *wire.ProviderTunnelFrame) *wire.AttemptUp {
	return &wire.AttemptUp{Msg: &wire.AttemptUp_Frame{Frame: f}}
}
