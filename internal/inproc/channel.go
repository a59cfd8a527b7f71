// Package inproc is a gRPC channel to services registered in the same
// process: a client stream's messages are handed to the server's handler
// by reference (through the channel's Copy), with no socket, no HTTP/2
// framing and no marshalling.
//
// It does what grpchan's inprocgrpc does for streaming methods, at a
// fixed cost per stream: the handler's goroutine and nothing else. The
// server's context follows the client's cancellation and deadline by
// context.AfterFunc instead of a goroutine per stream (inprocgrpc wraps
// the client's context in a type that forces context.WithCancel to start
// one), and a stream is two one-slot channels and a few fields.
//
// Semantics follow a network channel: the server's context carries the
// client's outgoing metadata as incoming metadata, a peer and the
// server transport stream (grpc.SetHeader works); the client's RecvMsg
// returns io.EOF after a handler that returned nil and the handler's
// status otherwise, after every message it sent; SendMsg returns io.EOF
// once the handler has returned; a cancelled client context ends the
// stream on both sides with codes.Canceled (or DeadlineExceeded).
// Backpressure is one message in flight each way.
//
// Two things a network channel cannot do: a handler that only waits
// between messages can return and leave its stream open (Detach), and a
// client whose messages come out of a blocking read can lend that read
// to the handler's receive (Hand), so a message is taken on the
// goroutine its read woke instead of being handed between two.
package inproc

import (
	"context"
	"maps"
	"net"
	"slices"
	"strings"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// CopyFunc makes the receiver's message dst out of the sent message src.
// It may share src's values: the sender never touches a message after
// sending it.
type CopyFunc func(dst, src any) error

// Channel is a grpc.ClientConnInterface whose streams run the handlers
// registered on it, in process. Register every service before the first
// call; a Channel is then safe for concurrent use.
type Channel struct {
	methods   map[string]method // by full method name, "/pkg.Service/Method"
	intercept grpc.StreamServerInterceptor
	copy      CopyFunc
	lastMD    atomic.Pointer[metadata.MD] // the last incoming metadata made (incoming)
}

type method struct {
	impl    any
	handler grpc.StreamHandler
	info    *grpc.StreamServerInfo
}

// New returns a channel that hands messages over with copy and runs
// intercept (which may be nil) around every handler.
func New(copy CopyFunc, intercept grpc.StreamServerInterceptor) *Channel {
	return &Channel{methods: map[string]method{}, intercept: intercept, copy: copy}
}

// RegisterService registers the streaming methods of a service
// (grpc.ServiceRegistrar): the generated Register…Server functions take
// the channel as they take a grpc.Server.
func (c *Channel) RegisterService(sd *grpc.ServiceDesc, impl any) {
	for _, s := range sd.Streams {
		name := "/" + sd.ServiceName + "/" + s.StreamName
		c.methods[name] = method{impl: impl, handler: s.Handler,
			info: &grpc.StreamServerInfo{FullMethod: name, IsClientStream: s.ClientStreams, IsServerStream: s.ServerStreams}}
	}
}

// Invoke refuses unary calls: the channel carries streaming methods.
func (c *Channel) Invoke(_ context.Context, name string, _, _ any, _ ...grpc.CallOption) error {
	return status.Errorf(codes.Unimplemented, "in-process channel: unary method %s is not served", name)
}

// NewStream starts the handler of the named method in its own goroutine
// and returns the client's end of the stream.
func (c *Channel) NewStream(ctx context.Context, _ *grpc.StreamDesc, name string, _ ...grpc.CallOption) (grpc.ClientStream, error) {
	if !strings.HasPrefix(name, "/") {
		name = "/" + name
	}
	m, ok := c.methods[name]
	if !ok {
		return nil, status.Errorf(codes.Unimplemented, "in-process channel: method %s is not served", name)
	}
	if err := ctx.Err(); err != nil {
		return nil, status.FromContextError(err).Err()
	}
	s := newStream(ctx, c, name)
	go s.serve(m, c.intercept)
	return (*clientStream)(s), nil
}

// addr is the peer address of both ends.
type addr struct{}

func (addr) Network() string { return "inproc" }
func (addr) String() string  { return "inproc" }

var inprocPeer = &peer.Peer{Addr: addr{}, LocalAddr: addr{}}

var _ net.Addr = addr{}

// serverContext is the handler's context: none of the client's values,
// its outgoing metadata as incoming, the peer and the transport stream;
// ended by the client's cancellation or deadline, or when the handler
// returns.
func (c *Channel) serverContext(client context.Context, sts grpc.ServerTransportStream) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	if d, ok := client.Deadline(); ok {
		ctx, cancel = context.WithDeadline(context.Background(), d)
	}
	if md, ok := c.incoming(client); ok {
		ctx = metadata.NewIncomingContext(ctx, md)
	}
	ctx = peer.NewContext(ctx, inprocPeer)
	return grpc.NewContextWithServerTransportStream(ctx, sts), cancel
}

// incoming is the client's outgoing metadata as the handler's incoming
// metadata. A channel's client usually sends the same metadata on every
// stream (a node's token), so the last one made is kept and shared by
// the streams whose metadata equals it, instead of a copy held by each
// for its life: incoming metadata is read only (FromIncomingContext and
// ValueFromIncomingContext hand out copies).
func (c *Channel) incoming(client context.Context) (metadata.MD, bool) {
	md, ok := metadata.FromOutgoingContext(client)
	if !ok {
		return nil, false
	}
	if last := c.lastMD.Load(); last != nil && maps.EqualFunc(*last, md, slices.Equal) {
		return *last, true
	}
	c.lastMD.Store(&md)
	return md, true
}

// statusOf is the status a client sees for a handler's error, as a
// network server reports it.
func statusOf(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	if se := status.FromContextError(err); se.Code() != codes.Unknown {
		return se.Err()
	}
	return status.Error(codes.Unknown, err.Error())
}
