package fleet

import (
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/iopgw/iop/internal/inproc"
	"github.com/iopgw/iop/wire"
)

// InProcess returns a channel to the hub's NodeLink service for a node
// agent running in this process (iop dev, iop gateway with a node
// section): the same service, generated stubs, token authentication,
// session, generations, heartbeats, advertisements, attempts, probes and
// drain, with the handlers called in process — no socket, no HTTP/2
// framing, no marshalling. A message is handed over, not copied: the
// sender never touches a message after sending it (every message on the
// link is built for one send). The channel (internal/inproc) costs a
// stream its handler's goroutine and nothing more: grpchan's inprocgrpc,
// used before, also spent a goroutine per stream carrying the client's
// cancellation to the handler, and copied every message.
//
// A node on the channel proves itself with its token as over the
// network; it has no transport, so node_tls's client certificate check
// does not apply to it.
func (h *Hub) InProcess() grpc.ClientConnInterface {
	ch := inproc.New(handover{}.Copy, h.authenticateToken)
	wire.RegisterNodeLinkServer(ch, h)
	return ch
}

// handover passes messages between the two ends of the in-process
// channel by reference.
type handover struct{}

// Copy makes the receiver's message out the sent message in: its fields
// are set from in's, sharing their values (no deep copy). The link's four
// stream messages are a single oneof each, assigned directly; any other
// message goes field by field through protoreflect.
func (handover) Copy(out, in any) error {
	switch o := out.(type) {
	case *wire.AttemptUp:
		if i, ok := in.(*wire.AttemptUp); ok {
			o.Msg = i.Msg
			return nil
		}
	case *wire.AttemptDown:
		if i, ok := in.(*wire.AttemptDown); ok {
			o.Msg = i.Msg
			return nil
		}
	case *wire.NodeMessage:
		if i, ok := in.(*wire.NodeMessage); ok {
			o.Msg = i.Msg
			return nil
		}
	case *wire.EdgeMessage:
		if i, ok := in.(*wire.EdgeMessage); ok {
			o.Msg = i.Msg
			return nil
		}
	}
	src, ok := in.(proto.Message)
	dst, ok2 := out.(proto.Message)
	if !ok || !ok2 {
		return fmt.Errorf("in-process link: %T into %T: not protobuf messages", in, out)
	}
	s, d := src.ProtoReflect(), dst.ProtoReflect()
	if s.Descriptor() != d.Descriptor() {
		return fmt.Errorf("in-process link: %s into %s", s.Descriptor().FullName(), d.Descriptor().FullName())
	}
	proto.Reset(dst)
	s.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		d.Set(fd, v)
		return true
	})
	if u := s.GetUnknown(); len(u) > 0 {
		d.SetUnknown(u)
	}
	return nil
}

// authenticateToken is authenticate without the client certificate
// check, for the in-process channel.
func (h *Hub) authenticateToken(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	return h.authenticateStream(srv, ss, handler, false)
}
