package nodeagent

import (
	"errors"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// connectCause classifies why a session could not be opened, for the log
// and the failures metric: the operator's first question is whether the
// address, the network, TLS or the credentials are wrong.
func connectCause(err error) string {
	st, _ := status.FromError(err)
	msg := strings.ToLower(st.Message())
	switch {
	case st.Code() == codes.Unauthenticated:
		return "unauthenticated"
	case st.Code() == codes.PermissionDenied || st.Code() == codes.InvalidArgument:
		return "rejected"
	case strings.Contains(msg, "connection refused"):
		return "refused"
	case strings.Contains(msg, "no such host") || strings.Contains(msg, "server misbehaving") || strings.Contains(msg, "lookup "):
		return "dns"
	case strings.Contains(msg, "tls") || strings.Contains(msg, "x509") || strings.Contains(msg, "certificate") || strings.Contains(msg, "handshake"):
		return "tls"
	case st.Code() == codes.DeadlineExceeded || strings.Contains(msg, "timeout") || strings.Contains(msg, "deadline") ||
		strings.Contains(msg, "no route to host") || strings.Contains(msg, "network is unreachable"):
		return "timeout"
	case errors.Is(err, errNotWelcomed):
		return "rejected"
	}
	return "other"
}

var errNotWelcomed = errors.New("edge did not welcome the node")
