package fleet

import (
	"context"
	"crypto/subtle"
	"crypto/x509"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/iopgw/iop/internal/ids"
)

type nodeIDKey struct{}

// authenticate binds the bearer token of every RPC to a configured
// node_id (constant-time comparison of hashes) and, with mTLS, requires
// the client certificate's identity to be that node_id.
func (h *Hub) authenticate(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	return h.authenticateStream(srv, ss, handler, h.mtls)
}

// authenticateStream checks a stream's token and, when mtls, its client
// certificate.
func (h *Hub) authenticateStream(srv any, ss grpc.ServerStream, handler grpc.StreamHandler, mtls bool) error {
	md, _ := metadata.FromIncomingContext(ss.Context())
	token := ""
	if v := md.Get("authorization"); len(v) == 1 {
		token, _ = strings.CutPrefix(v[0], "Bearer ")
	}
	nodeID, ok := h.nodeForToken(token)
	if !ok {
		h.audit.Warn("node refused: invalid token", "peer", peerAddr(ss.Context()), "token_present", token != "")
		return status.Error(codes.Unauthenticated, "invalid node token")
	}
	if mtls && !peerIsNode(ss.Context(), nodeID) {
		h.audit.Warn("node refused: client certificate does not match the node id", "node_id", nodeID, "peer", peerAddr(ss.Context()))
		return status.Error(codes.PermissionDenied, "client certificate does not match the node id")
	}
	return handler(srv, &authedStream{ServerStream: ss, ctx: context.WithValue(ss.Context(), nodeIDKey{}, nodeID)})
}

func (h *Hub) nodeForToken(token string) (string, bool) {
	if token == "" {
		return "", false
	}
	sum := ids.Hash(token)
	found := ""
	for id, n := range *h.nodes.Load() {
		// SetNodes stored every node's hash, lower-case.
		if subtle.ConstantTimeCompare([]byte(sum), []byte(n.TokenSHA256)) == 1 {
			found = id
		}
	}
	return found, found != ""
}

// peerIsNode reports whether the verified client certificate names nodeID
// (as its common name or a DNS SAN).
func peerIsNode(ctx context.Context, nodeID string) bool {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return false
	}
	ti, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok || len(ti.State.VerifiedChains) == 0 {
		return false
	}
	return certNames(ti.State.VerifiedChains[0][0], nodeID)
}

// peerAddr is the remote address of an RPC, for audit lines.
func peerAddr(ctx context.Context) string {
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		return p.Addr.String()
	}
	return ""
}

func certNames(c *x509.Certificate, nodeID string) bool {
	if c.Subject.CommonName == nodeID {
		return true
	}
	for _, n := range c.DNSNames {
		if n == nodeID {
			return true
		}
	}
	return false
}

type authedStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *authedStream) Context() context.Context { return s.ctx }

func nodeIDFrom(ctx context.Context) string { v, _ := ctx.Value(nodeIDKey{}).(string); return v }
