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
// OpenAI-Organization, OpenAI-Project, X-Stainless-* and custom ones, with
// hop-by-hop headers, credentials, Host, Content-Length, Accept-Encoding
// and X-Forwarded-* removed.
func ForUpstream(in http.Header) http.Header {
	h := in.Clone()
	if h == nil {
		return http.Header{}
	}
	removeConnectionListed(h)
	for _, list := range [][]string{hopByHop, credentials, edgeOnly} {
		for _, k := range list {
			h.Del(k)
		}
	}
	return h
}

// FromUpstream returns a copy of a provider's response headers without
// hop-by-hop headers, for the client.
func FromUpstream(in http.Header) http.Header {
	h := in.Clone()
	if h == nil {
		return http.Header{}
	}
	removeConnectionListed(h)
	for _, k := range hopByHop {
		h.Del(k)
	}
	return h
}
