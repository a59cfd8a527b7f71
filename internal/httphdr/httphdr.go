// Package httphdr decides which HTTP headers cross iop. Hop-by-hop headers
// never do (RFC 9110 §7.6.1, as net/http/httputil.ReverseProxy); client
// credentials never reach a provider — a provider sees exactly one
// Authorization, the node's.
package httphdr

import (
	"net/http"
	"net/textproto"
	"strings"
)

// hopByHop are the headers a proxy must not forward.
var hopByHop = []string{
	"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade",
}

// credentials are request headers that carry the client's identity or
// secrets; they stay at the edge.
var credentials = []string{"Authorization", "Cookie", "Api-Key", "X-Api-Key", "Openai-Api-Key"}

// CredentialScoped are request headers that choose which account a
// provider's credential acts for (or carry another vendor's key); a
// client must not pick the organization the node's key bills. A provider
// may forward named ones (its forward_headers setting).
var CredentialScoped = []string{"Openai-Organization", "Openai-Project", "X-Goog-Api-Key", "X-Auth-Token", "Anthropic-Api-Key", "X-Goog-User-Project"}

// Propagated are the client request headers carried on every path, the
// translated one included: trace context, the client's request id, and
// the OpenAI request headers that change how the upstream treats the
// request.
var Propagated = []string{"Traceparent", "Tracestate", "X-Request-Id", "Openai-Beta", "Idempotency-Key"}

// edgeOnly are request headers the edge owns or the transport recomputes.
var edgeOnly = []string{"Host", "Content-Length", "Accept-Encoding", "Forwarded", "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto", "X-Real-Ip"}

// removeConnectionListed drops the headers named in Connection.
func removeConnectionListed(h http.Header) {
	for _, v := range h.Values("Connection") {
		for _, name := range strings.Split(v, ",") {
			if name = textproto.TrimString(name); name != "" {
				h.Del(name)
			}
		}
	}
}

// ForUpstream returns a copy of a client's request headers that may be
// carried to a provider: end-to-end headers such as Content-Type, Accept,
// OpenAI-Beta, X-Stainless-* and custom ones, with hop-by-hop headers,
// credentials, credential-scoped headers (OpenAI-Organization,
// OpenAI-Project, other vendors' key headers) unless named in allow, Host,
// Content-Length, Accept-Encoding and X-Forwarded-* removed.
func ForUpstream(in http.Header, allow ...string) http.Header {
	return FilterForUpstream(in.Clone(), allow...)
}

// FilterForUpstream is ForUpstream in place: it removes from h, which
// the caller owns, what ForUpstream would not copy, and returns it (an
// empty header for nil).
func FilterForUpstream(h http.Header, allow ...string) http.Header {
	if h == nil {
		return http.Header{}
	}
	removeConnectionListed(h)
	// The lists hold canonical keys: deleted as they are (Header.Del
	// would canonicalize each again, on every request).
	for _, list := range [][]string{hopByHop, credentials, edgeOnly} {
		for _, k := range list {
			delete(h, k)
		}
	}
	for _, k := range CredentialScoped {
		if !containsFold(allow, k) {
			delete(h, k)
		}
	}
	return h
}

// Propagate returns the Propagated headers of a client request, for the
// translated path (nil when there are none).
func Propagate(in http.Header) map[string][]string {
	var out map[string][]string
	for _, k := range Propagated {
		if v := in.Values(k); len(v) > 0 {
			if out == nil {
				out = map[string][]string{}
			}
			out[k] = append([]string(nil), v...)
		}
	}
	return out
}

// fromNode are response headers a node may not set on a client's
// response: the edge owns framing (Content-Length, Transfer-Encoding,
// Content-Encoding: the node's transport already decoded the body) and
// never lets a provider set cookies, redirect, or name its server.
var fromNode = []string{"Content-Length", "Content-Encoding", "Set-Cookie", "Set-Cookie2", "Location", "Server", "Alt-Svc", "Strict-Transport-Security"}

// ForClient filters the headers of a node-relayed upstream response to
// what may reach the client: what FromUpstream keeps, minus the headers
// the edge owns or never takes from a node. It works in place, on a map
// the caller owns (each frame decoded from the link is a fresh one), and
// returns it (an empty map for nil).
func ForClient(h http.Header) http.Header {
	h = FromUpstream(h)
	for _, k := range fromNode {
		delete(h, k) // canonical, as the lists ForUpstream deletes
	}
	return h
}

func containsFold(list []string, k string) bool {
	for _, v := range list {
		if strings.EqualFold(v, k) {
			return true
		}
	}
	return false
}

// FromUpstream removes hop-by-hop headers from a provider's response
// headers, for the client. It works in place, on a map the caller owns
// (an upstream response's, which nothing reads after), and returns it (an
// empty map for nil).
func FromUpstream(h http.Header) http.Header {
	if h == nil {
		return http.Header{}
	}
	removeConnectionListed(h)
	for _, k := range hopByHop {
		delete(h, k)
	}
	return h
}
