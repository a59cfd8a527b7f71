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
	// MaxMessageSize bounds one message in either direction (a request
	// body snapshot, or one response chunk).
	MaxMessageSize = 64 << 20
)

// EdgeServerOptions are the edge's gRPC server options for the node link.
func EdgeServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.KeepaliveParams(EdgeKeepalive),
		grpc.KeepaliveEnforcementPolicy(EdgeEnforcement),
		grpc.MaxConcurrentStreams(EdgeMaxConcurrentStreams),
		grpc.InitialWindowSize(EdgeStreamWindow),
		grpc.InitialConnWindowSize(EdgeConnWindow),
		grpc.MaxRecvMsgSize(MaxMessageSize),
		grpc.MaxSendMsgSize(MaxMessageSize),
	}
}
