package wire

import (
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/keepalive"
)

// The keepalive contract of the node link, both sides in one place so they
// stay consistent (RELIABILITY.md R11, R12): the edge's MinTime must not
// exceed the node's ping interval, and both permit pings without streams.
var (
	// NodeKeepalive: the node pings an idle connection every 10 s and
	// declares it dead after 5 s without an answer.
	NodeKeepalive = keepalive.ClientParameters{Time: 10 * time.Second, Timeout: 5 * time.Second, PermitWithoutStream: true}
	// NodeBackoff: reconnects back off from 1 s by ×1.6 with 20 % jitter up
	// to 15 s, so a long edge outage costs at most ~19 s of reconnect tail,
	// not grpc's default two minutes.
	NodeBackoff = backoff.Config{BaseDelay: time.Second, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 15 * time.Second}
	// EdgeKeepalive: the edge pings every 10 s and closes a connection that
	// does not answer within 5 s, so a black-holed node is detected in at
	// most ~15 s.
	EdgeKeepalive = keepalive.ServerParameters{Time: 10 * time.Second, Timeout: 5 * time.Second}
	// EdgeEnforcement: the edge accepts the node's pings down to 5 s apart,
	// also without active streams.
	EdgeEnforcement = keepalive.EnforcementPolicy{MinTime: 5 * time.Second, PermitWithoutStream: true}
)

// Edge limits.
const (
	// EdgeMaxConcurrentStreams bounds streams per node connection (one per
	// in-flight attempt plus the session), so one node connection carries at
	// most 16,383 concurrent attempts; grpc-go's default is unlimited.
	EdgeMaxConcurrentStreams = 16384
	// EdgeStreamWindow is the edge's receive window per attempt stream: at
	// most this much of an attempt's output waits at the edge for a slow
	// client before backpressure reaches the node and its provider. A
	// fixed window also turns off grpc-go's BDP estimation, which would
	// otherwise grow it to 16 MiB per stream on a fast link.
	EdgeStreamWindow = 1 << 20
	// EdgeConnWindow is the edge's receive window per node connection.
	// grpc-go replenishes it as data arrives, not as streams are read, so
	// a stuck stream never blocks the others.
	EdgeConnWindow = 16 << 20
	// MaxMessageSize bounds one message the edge sends (a request body
	// snapshot) and the node receives.
	MaxMessageSize = 64 << 20
	// EdgeMaxRecvMessage bounds one message the edge receives from a node
	// (a node may run in someone else's network): nodes send body frames
	// of at most 32 KiB, events of at most 256 KiB of text and headers of
	// at most 64 KiB, so 1 MiB is ample, and what a hostile node can make
	// the edge decode at once is bounded by it times the attempt streams
	// the node may hold open.
	EdgeMaxRecvMessage = 1 << 20
	// EdgeMaxHeaderList bounds the HTTP/2 header list the edge decodes on
	// the node port, before any token is checked (grpc-go's default is 16
	// MiB: an unauthenticated HPACK amplification).
	EdgeMaxHeaderList = 16 << 10
	// NodeStreamWindow and NodeConnWindow are the node's receive windows
	// (the work the edge sends: request bodies). Fixed windows turn off
	// grpc-go's BDP estimation, which otherwise answers received data with
	// PING frames: a write and a read on both ends of every attempt.
	NodeStreamWindow = 1 << 20
	NodeConnWindow   = 16 << 20
	// EdgeHandshakeTimeout bounds how long a connection to the node port
	// may take to complete its TLS and HTTP/2 handshake (grpc-go's
	// default is 120 s, which lets idle connections hold descriptors).
	EdgeHandshakeTimeout = 5 * time.Second
)

// EdgeServerOptions are the edge's gRPC server options for the node link.
func EdgeServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.KeepaliveParams(EdgeKeepalive),
		grpc.KeepaliveEnforcementPolicy(EdgeEnforcement),
		grpc.MaxConcurrentStreams(EdgeMaxConcurrentStreams),
		grpc.InitialWindowSize(EdgeStreamWindow),
		grpc.InitialConnWindowSize(EdgeConnWindow),
		grpc.MaxRecvMsgSize(EdgeMaxRecvMessage),
		grpc.MaxSendMsgSize(MaxMessageSize),
		grpc.MaxHeaderListSize(EdgeMaxHeaderList),
		grpc.ConnectionTimeout(EdgeHandshakeTimeout),
	}
}
